//! Simplification, after `re2/simplify.cc` (`CoalesceWalker` and
//! `SimplifyWalker`): adjacent repeats of one atom are coalesced (`a+a*` is
//! `a{1,}`), `x{n,m}` becomes n copies of `x` and m-n nested `(x)?`, and
//! empty or full classes become their simple ops.
//!
//! It rejects nothing; the compiler reads its output.

use std::rc::Rc;

use super::regexp::{FOLD_CASE, NON_GREEDY, Op, Re, concat, equal};

fn star_plus_or_quest(op: Op, sub: Rc<Re>, flags: u16) -> Rc<Re> {
    if op == sub.op && flags == sub.flags {
        return sub;
    }
    if matches!(sub.op, Op::Star | Op::Plus | Op::Quest) && flags == sub.flags {
        if sub.op == Op::Star {
            return sub;
        }
        return Re::with_subs(Op::Star, flags, vec![sub.subs[0].clone()]);
    }
    Re::with_subs(op, flags, vec![sub])
}

fn same_subs(re: &Re, subs: &[Rc<Re>]) -> bool {
    re.subs.iter().zip(subs).all(|(a, b)| Rc::ptr_eq(a, b))
}

fn rebuild(re: &Rc<Re>, subs: Vec<Rc<Re>>) -> Rc<Re> {
    if same_subs(re, &subs) {
        return re.clone();
    }
    let mut n = Re::new(re.op, re.flags);
    n.subs = subs;
    n.min = re.min;
    n.max = re.max;
    n.cap = re.cap;
    n.name = re.name.clone();
    Rc::new(n)
}

fn can_coalesce(r1: &Re, r2: &Re) -> bool {
    let repeat = |r: &Re| matches!(r.op, Op::Star | Op::Plus | Op::Quest | Op::Repeat);
    if !repeat(r1)
        || !matches!(
            r1.subs[0].op,
            Op::Literal | Op::CharClass | Op::AnyChar | Op::AnyByte
        )
    {
        return false;
    }
    let atom = &r1.subs[0];
    if repeat(r2) && equal(atom, &r2.subs[0]) && (r1.flags & NON_GREEDY) == (r2.flags & NON_GREEDY) {
        return true;
    }
    if equal(atom, r2) {
        return true;
    }
    atom.op == Op::Literal
        && r2.op == Op::LiteralString
        && r2.runes[0] == atom.rune
        && (atom.flags & FOLD_CASE) == (r2.flags & FOLD_CASE)
}

fn do_coalesce(args: &mut [Rc<Re>], i: usize) {
    let (r1, r2) = (args[i].clone(), args[i + 1].clone());
    let mut nre = Re::repeat(r1.subs[0].clone(), r1.flags, 0, 0);
    match r1.op {
        Op::Star => (nre.min, nre.max) = (0, -1),
        Op::Plus => (nre.min, nre.max) = (1, -1),
        Op::Quest => (nre.min, nre.max) = (0, 1),
        _ => (nre.min, nre.max) = (r1.min, r1.max),
    }
    match r2.op {
        Op::Star => nre.max = -1,
        Op::Plus => {
            nre.min += 1;
            nre.max = -1;
        }
        Op::Quest => {
            if nre.max != -1 {
                nre.max += 1;
            }
        }
        Op::Repeat => {
            nre.min += r2.min;
            if r2.max == -1 {
                nre.max = -1;
            } else if nre.max != -1 {
                nre.max += r2.max;
            }
        }
        Op::LiteralString => {
            let r = r1.subs[0].rune;
            let n = r2.runes.iter().take_while(|&&x| x == r).count().max(1);
            nre.min += n as i32;
            if nre.max != -1 {
                nre.max += n as i32;
            }
            if n < r2.runes.len() {
                args[i] = Rc::new(nre);
                args[i + 1] = Re::literal_string(&r2.runes[n..], r2.flags);
                return;
            }
        }
        _ => {
            nre.min += 1;
            if nre.max != -1 {
                nre.max += 1;
            }
        }
    }
    args[i] = Re::rc(Op::EmptyMatch, 0);
    args[i + 1] = Rc::new(nre);
}

pub(super) fn coalesce(re: &Rc<Re>) -> Rc<Re> {
    if re.subs.is_empty() {
        return re.clone();
    }
    let mut args: Vec<Rc<Re>> = re.subs.iter().map(coalesce).collect();
    if re.op != Op::Concat || !args.windows(2).any(|w| can_coalesce(&w[0], &w[1])) {
        return rebuild(re, args);
    }
    for i in 0..args.len() - 1 {
        if can_coalesce(&args[i], &args[i + 1]) {
            do_coalesce(&mut args, i);
        }
    }
    args.retain(|a| a.op != Op::EmptyMatch);
    Re::with_subs(Op::Concat, re.flags, args)
}

fn is_empty_op(re: &Re) -> bool {
    matches!(
        re.op,
        Op::BeginLine | Op::EndLine | Op::WordBoundary | Op::NoWordBoundary | Op::BeginText | Op::EndText
    )
}

fn simplify_repeat(re: &Rc<Re>, mut min: i32, mut max: i32, f: u16) -> Rc<Re> {
    if is_empty_op(re)
        || (matches!(re.op, Op::Concat | Op::Alternate) && re.subs.iter().all(|s| is_empty_op(s)))
    {
        min = min.min(1);
        max = max.min(1);
    }
    if max == -1 {
        if min == 0 {
            return star_plus_or_quest(Op::Star, re.clone(), f);
        }
        if min == 1 {
            return star_plus_or_quest(Op::Plus, re.clone(), f);
        }
        let mut subs: Vec<Rc<Re>> = (0..min - 1).map(|_| re.clone()).collect();
        subs.push(star_plus_or_quest(Op::Plus, re.clone(), f));
        return concat(subs, f);
    }
    if min == 0 && max == 0 {
        return Re::rc(Op::EmptyMatch, f);
    }
    if min == 1 && max == 1 {
        return re.clone();
    }
    let mut nre = None;
    if min > 0 {
        nre = Some(concat((0..min).map(|_| re.clone()).collect(), f));
    }
    if max > min {
        let mut suf = star_plus_or_quest(Op::Quest, re.clone(), f);
        for _ in min + 1..max {
            suf = star_plus_or_quest(Op::Quest, Re::with_subs(Op::Concat, f, vec![re.clone(), suf]), f);
        }
        nre = Some(match nre {
            None => suf,
            Some(n) => Re::with_subs(Op::Concat, f, vec![n, suf]),
        });
    }
    nre.unwrap_or_else(|| Re::rc(Op::NoMatch, f))
}

pub(super) fn simplify(re: &Rc<Re>) -> Rc<Re> {
    match re.op {
        Op::Concat | Op::Alternate | Op::Capture => {
            let subs = re.subs.iter().map(simplify).collect();
            rebuild(re, subs)
        }
        Op::Star | Op::Plus | Op::Quest => {
            let newsub = simplify(&re.subs[0]);
            if newsub.op == Op::EmptyMatch {
                return newsub;
            }
            if Rc::ptr_eq(&newsub, &re.subs[0]) {
                return re.clone();
            }
            if re.op == newsub.op && re.flags == newsub.flags {
                return newsub;
            }
            Re::with_subs(re.op, re.flags, vec![newsub])
        }
        Op::Repeat => {
            let newsub = simplify(&re.subs[0]);
            if newsub.op == Op::EmptyMatch {
                return newsub;
            }
            simplify_repeat(&newsub, re.min, re.max, re.flags)
        }
        Op::CharClass => match re.class() {
            Some(cc) if cc.is_empty() => Re::rc(Op::NoMatch, re.flags),
            Some(cc) if cc.is_full() => Re::rc(Op::AnyChar, re.flags),
            _ => re.clone(),
        },
        _ => re.clone(),
    }
}
