//! Alternation factoring, after `FactorAlternation` in `re2/parse.cc`:
//! common literal prefixes, then common leading simple pieces, then runs of
//! literals and classes merged into one class (`abc|abd` becomes `ab[cd]`).
//!
//! It changes no verdict on syntax, only the shape of the tree, and so the
//! program size RE2 reports. Its recursion is bounded: past the nesting
//! bound the parser reports the pattern as too deep instead of recursing.

use std::rc::Rc;

use super::MAX_NESTING;
use super::regexp::{Ccb, FOLD_CASE, Op, Re, concat, concat_or_alternate, equal};

/// Tracks how deep alternation factoring recursed (bounded, to keep our
/// recursion bounded).
#[derive(Default)]
pub(super) struct FactorDepth {
    pub(super) exceeded: bool,
}

/// The leading literal string of `re` and its case-folding flag.
fn leading_string(re: &Re) -> (&[u32], u16) {
    let mut re = re;
    while re.op == Op::Concat && !re.subs.is_empty() {
        re = &re.subs[0];
    }
    let flags = re.flags & FOLD_CASE;
    match re.op {
        Op::Literal => (std::slice::from_ref(&re.rune), flags),
        Op::LiteralString => (&re.runes, flags),
        _ => (&[], flags),
    }
}

fn remove_leading_string(re: &mut Rc<Re>, n: usize, d: usize) {
    if re.op == Op::Concat && !re.subs.is_empty() {
        remove_leading_string(&mut Rc::make_mut(re).subs[0], n, d + 1);
        // RE2 only tidies the four outermost concatenations.
        if d < 4 && re.subs[0].op == Op::EmptyMatch {
            match re.subs.len() {
                0 | 1 => {
                    let m = Rc::make_mut(re);
                    m.subs.clear();
                    m.op = Op::EmptyMatch;
                }
                2 => {
                    let rest = re.subs[1].clone();
                    *re = rest;
                }
                _ => {
                    Rc::make_mut(re).subs.remove(0);
                }
            }
        }
        return;
    }
    let m = Rc::make_mut(re);
    if m.op == Op::Literal {
        m.rune = 0;
        m.op = Op::EmptyMatch;
    } else if m.op == Op::LiteralString {
        if n >= m.runes.len() {
            m.runes.clear();
            m.op = Op::EmptyMatch;
        } else if n == m.runes.len() - 1 {
            m.rune = m.runes[m.runes.len() - 1];
            m.runes.clear();
            m.op = Op::Literal;
        } else {
            m.runes.drain(..n);
        }
    }
}

fn leading_regexp(re: &Rc<Re>) -> Option<Rc<Re>> {
    if re.op == Op::EmptyMatch {
        return None;
    }
    if re.op == Op::Concat && re.subs.len() >= 2 {
        if re.subs[0].op == Op::EmptyMatch {
            return None;
        }
        return Some(re.subs[0].clone());
    }
    Some(re.clone())
}

fn remove_leading_regexp(re: Rc<Re>) -> Rc<Re> {
    if re.op == Op::EmptyMatch {
        return re;
    }
    if re.op == Op::Concat && re.subs.len() >= 2 {
        if re.subs[0].op == Op::EmptyMatch {
            return re;
        }
        let mut re = re;
        let m = Rc::make_mut(&mut re);
        m.subs.remove(0);
        if m.subs.len() == 1 {
            return m.subs[0].clone();
        }
        return re;
    }
    Re::rc(Op::EmptyMatch, re.flags)
}

struct Splice {
    prefix: Rc<Re>,
    start: usize,
    len: usize,
}

fn factor_round1(sub: &mut [Rc<Re>]) -> Vec<Splice> {
    let mut splices = Vec::new();
    let mut start = 0;
    let mut rune: Vec<u32> = Vec::new();
    let mut runeflags = 0u16;
    let n = sub.len();
    for i in 0..=n {
        let mut rune_i: Vec<u32> = Vec::new();
        let mut runeflags_i = 0u16;
        if i < n {
            let (r, f) = leading_string(&sub[i]);
            rune_i = r.to_vec();
            runeflags_i = f;
            if runeflags_i == runeflags {
                let same = rune.iter().zip(&rune_i).take_while(|(a, b)| a == b).count();
                if same > 0 {
                    rune.truncate(same);
                    continue;
                }
            }
        }
        if i - start >= 2 {
            let prefix = Re::literal_string(&rune, runeflags);
            for s in &mut sub[start..i] {
                remove_leading_string(s, rune.len(), 0);
            }
            splices.push(Splice {
                prefix,
                start,
                len: i - start,
            });
        }
        if i < n {
            start = i;
            rune = rune_i;
            runeflags = runeflags_i;
        }
    }
    splices
}

fn factor_round2(sub: &mut [Rc<Re>]) -> Vec<Splice> {
    let mut splices = Vec::new();
    let mut start = 0;
    let mut first: Option<Rc<Re>> = None;
    let n = sub.len();
    for i in 0..=n {
        let mut first_i = None;
        if i < n {
            first_i = leading_regexp(&sub[i]);
            if let (Some(f), Some(fi)) = (&first, &first_i) {
                let simple_sub =
                    |r: &Re| matches!(r.op, Op::Literal | Op::CharClass | Op::AnyChar | Op::AnyByte);
                let factorable = matches!(
                    f.op,
                    Op::BeginLine
                        | Op::EndLine
                        | Op::WordBoundary
                        | Op::NoWordBoundary
                        | Op::BeginText
                        | Op::EndText
                        | Op::CharClass
                        | Op::AnyChar
                        | Op::AnyByte
                ) || (f.op == Op::Repeat && f.min == f.max && simple_sub(&f.subs[0]));
                if factorable && equal(f, fi) {
                    continue;
                }
            }
        }
        if i - start >= 2
            && let Some(prefix) = first.clone()
        {
            for s in &mut sub[start..i] {
                let old = std::mem::replace(s, Re::rc(Op::NoMatch, 0));
                *s = remove_leading_regexp(old);
            }
            splices.push(Splice {
                prefix,
                start,
                len: i - start,
            });
        }
        if i < n {
            start = i;
            first = first_i;
        }
    }
    splices
}

fn factor_round3(sub: &mut [Rc<Re>], flags: u16) -> Vec<Splice> {
    let mut splices = Vec::new();
    let mut start = 0;
    let n = sub.len();
    let is_lit_or_class = |r: &Re| matches!(r.op, Op::Literal | Op::CharClass);
    for i in 0..=n {
        if i < n && i > start && is_lit_or_class(&sub[start]) && is_lit_or_class(&sub[i]) {
            continue;
        }
        if i - start >= 2 {
            let mut ccb = Ccb::default();
            for re in &sub[start..i] {
                if let Some(cc) = re.class() {
                    for &(lo, hi) in &cc.ranges {
                        ccb.add_range_flags(lo, hi, re.flags);
                    }
                } else if re.op == Op::Literal {
                    if re.flags & FOLD_CASE != 0 {
                        let mut tmp = Ccb::default();
                        tmp.add_range_flags(re.rune, re.rune, re.flags);
                        ccb.add_char_class(&tmp);
                    } else {
                        ccb.add_range_flags(re.rune, re.rune, re.flags);
                    }
                }
            }
            let prefix = Re::char_class(ccb.freeze(), flags & !FOLD_CASE);
            splices.push(Splice {
                prefix,
                start,
                len: i - start,
            });
        }
        if i < n {
            start = i;
        }
    }
    splices
}

pub(super) fn factor_alternation(
    mut sub: Vec<Rc<Re>>,
    flags: u16,
    fd: &mut FactorDepth,
    depth: usize,
) -> Vec<Rc<Re>> {
    if depth > MAX_NESTING {
        fd.exceeded = true;
        return sub;
    }
    for round in 1..=3 {
        let splices = match round {
            1 => factor_round1(&mut sub),
            2 => factor_round2(&mut sub),
            _ => factor_round3(&mut sub, flags),
        };
        if splices.is_empty() {
            continue;
        }
        let mut out = Vec::with_capacity(sub.len());
        let mut i = 0;
        for sp in splices {
            while i < sp.start {
                out.push(sub[i].clone());
                i += 1;
            }
            if round == 3 {
                out.push(sp.prefix);
            } else {
                let suffixes =
                    factor_alternation(sub[sp.start..sp.start + sp.len].to_vec(), flags, fd, depth + 1);
                let alt = concat_or_alternate(Op::Alternate, suffixes, flags, false, fd);
                out.push(concat(vec![sp.prefix, alt], flags));
            }
            i += sp.len;
        }
        out.extend(sub[i..].iter().cloned());
        sub = out;
    }
    sub
}
