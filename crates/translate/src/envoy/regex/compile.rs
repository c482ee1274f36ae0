//! The compiler, after `re2/compile.cc` (forward programs, Latin-1): one
//! instruction per literal byte and per byte range of a class, one `Alt`
//! per alternative, class range and repetition, two per capture group; a
//! required literal prefix after `^` is taken out of the program
//! (`RequiredPrefix`), `\A`/`\z` anchors are stripped (`IsAnchorStart`,
//! `IsAnchorEnd`) and an unanchored program gets a `.*?` loop.
//!
//! [`compile_size`] is RE2's `ProgramSize()` for a parsed pattern. Before
//! compiling it bounds the expanded size from below ([`min_insts`]) and
//! reports [`RegexError::ProgramTooLarge`] when that bound alone is far over
//! the limit, as it does when the port's instruction budget runs out.

use std::rc::Rc;

use super::prog::{flattened_size, optimize};
use super::regexp::{FOLD_CASE, LATIN1_MAX, NON_GREEDY, Op, Re, concat, required_prefix_suffix};
use super::simplify::{coalesce, simplify};
use super::{MAX_EXPANSION, MAX_INST, MAX_PROGRAM_SIZE, RegexError};

/// A lower bound on the number of byte-matching instructions of `re` once
/// its repetitions are expanded (each reachable one survives flattening),
/// and whether `re` can match at all: RE2 compiles what cannot match (an
/// empty class such as `\p{Greek}` in Latin-1) to nothing, and drops what
/// only leads there.
fn min_insts(re: &Re) -> (bool, u64) {
    match re.op {
        Op::NoMatch => (false, 0),
        Op::Literal | Op::AnyChar | Op::AnyByte => (true, 1),
        Op::LiteralString => (true, re.runes.len() as u64),
        Op::CharClass => (re.class().is_some_and(|c| !c.is_empty()), 1),
        Op::Concat => {
            let mut n = 0u64;
            for s in &re.subs {
                let (m, k) = min_insts(s);
                if !m {
                    return (false, 0);
                }
                n = n.saturating_add(k);
            }
            (true, n)
        }
        Op::Alternate => re
            .subs
            .iter()
            .map(|s| min_insts(s))
            .filter(|&(m, _)| m)
            .fold((false, 0), |(_, a), (_, k)| (true, a.saturating_add(k))),
        Op::Capture | Op::Plus => min_insts(&re.subs[0]),
        Op::Star | Op::Quest => match min_insts(&re.subs[0]) {
            (true, k) => (true, k),
            (false, _) => (true, 0),
        },
        Op::Repeat => match min_insts(&re.subs[0]) {
            _ if re.max == 0 => (true, 0),
            (false, _) => (re.min == 0, 0),
            (true, k) => {
                let copies = if re.max < 0 { re.min.max(1) } else { re.max };
                (true, k.saturating_mul(copies.max(0) as u64))
            }
        },
        _ => (true, 0),
    }
}

/// RE2's `IsAnchorStart`/`IsAnchorEnd`: strips a leading `\A` (trailing
/// `\z`) reachable through concatenations and captures, four levels deep.
fn strip_anchor(pre: &mut Rc<Re>, depth: u32, start: bool) -> bool {
    if depth >= 4 {
        return false;
    }
    let re = pre.clone();
    match re.op {
        Op::Concat if !re.subs.is_empty() => {
            let k = if start { 0 } else { re.subs.len() - 1 };
            let mut sub = re.subs[k].clone();
            if strip_anchor(&mut sub, depth + 1, start) {
                let mut subs = re.subs.clone();
                subs[k] = sub;
                *pre = concat(subs, re.flags);
                return true;
            }
            false
        }
        Op::Capture => {
            let mut sub = re.subs[0].clone();
            if strip_anchor(&mut sub, depth + 1, start) {
                let mut c = Re::new(Op::Capture, re.flags);
                c.cap = re.cap;
                c.subs = vec![sub];
                *pre = Rc::new(c);
                return true;
            }
            false
        }
        Op::BeginText if start => {
            *pre = Re::rc(Op::EmptyMatch, re.flags);
            true
        }
        Op::EndText if !start => {
            *pre = Re::rc(Op::EmptyMatch, re.flags);
            true
        }
        _ => false,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum InstOp {
    Alt,
    AltMatch,
    ByteRange,
    Capture,
    EmptyWidth,
    Match,
    Nop,
    Fail,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Inst {
    pub(super) op: InstOp,
    pub(super) out: u32,
    pub(super) out1: u32,
    pub(super) lo: u8,
    pub(super) hi: u8,
}

impl Inst {
    fn new(op: InstOp, out: u32) -> Inst {
        Inst {
            op,
            out,
            out1: 0,
            lo: 0,
            hi: 0,
        }
    }
}

/// Instructions whose `out` (even) or `out1` (odd) are still to be
/// patched, threaded through those very fields.
#[derive(Clone, Copy, Debug, Default)]
struct PatchList {
    head: u32,
    tail: u32,
}

impl PatchList {
    fn mk(p: u32) -> PatchList {
        PatchList { head: p, tail: p }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Frag {
    begin: u32,
    end: PatchList,
    nullable: bool,
}

const NO_MATCH: Frag = Frag {
    begin: 0,
    end: PatchList { head: 0, tail: 0 },
    nullable: false,
};

struct Compiler {
    inst: Vec<Inst>,
    failed: bool,
    rune_range: Frag,
}

impl Compiler {
    fn new() -> Compiler {
        Compiler {
            inst: vec![Inst::new(InstOp::Fail, 0)],
            failed: false,
            rune_range: NO_MATCH,
        }
    }

    /// Instruction `id` (a Fail for an id out of range, which the port
    /// never produces: no panics on any input).
    fn at(&self, id: u32) -> Inst {
        self.inst
            .get(id as usize)
            .copied()
            .unwrap_or(Inst::new(InstOp::Fail, 0))
    }

    fn alloc(&mut self, n: usize) -> Option<u32> {
        if self.failed || self.inst.len() + n > MAX_INST {
            self.failed = true;
            return None;
        }
        let id = self.inst.len() as u32;
        for _ in 0..n {
            self.inst.push(Inst::new(InstOp::Nop, 0));
        }
        Some(id)
    }

    fn patch(&mut self, l: PatchList, p: u32) {
        let mut head = l.head;
        while head != 0 {
            let Some(ip) = self.inst.get_mut((head >> 1) as usize) else {
                return;
            };
            if head & 1 != 0 {
                head = ip.out1;
                ip.out1 = p;
            } else {
                head = ip.out;
                ip.out = p;
            }
        }
    }

    fn append(&mut self, l1: PatchList, l2: PatchList) -> PatchList {
        if l1.head == 0 {
            return l2;
        }
        if l2.head == 0 {
            return l1;
        }
        if let Some(ip) = self.inst.get_mut((l1.tail >> 1) as usize) {
            if l1.tail & 1 != 0 {
                ip.out1 = l2.head;
            } else {
                ip.out = l2.head;
            }
        }
        PatchList {
            head: l1.head,
            tail: l2.tail,
        }
    }

    fn cat(&mut self, a: Frag, b: Frag) -> Frag {
        if a.begin == 0 || b.begin == 0 {
            return NO_MATCH;
        }
        let begin = self.at(a.begin);
        if begin.op == InstOp::Nop && a.end.head == (a.begin << 1) && begin.out == 0 {
            self.patch(a.end, b.begin);
            return b;
        }
        self.patch(a.end, b.begin);
        Frag {
            begin: a.begin,
            end: b.end,
            nullable: a.nullable && b.nullable,
        }
    }

    fn alt(&mut self, a: Frag, b: Frag) -> Frag {
        if a.begin == 0 {
            return b;
        }
        if b.begin == 0 {
            return a;
        }
        let Some(id) = self.alloc(1) else { return NO_MATCH };
        self.inst[id as usize] = Inst {
            out1: b.begin,
            ..Inst::new(InstOp::Alt, a.begin)
        };
        let end = self.append(a.end, b.end);
        Frag {
            begin: id,
            end,
            nullable: a.nullable || b.nullable,
        }
    }

    /// An `Alt` looping to or skipping `a`; returns it and its open exit.
    fn loop_alt(&mut self, a: Frag, nongreedy: bool) -> Option<(u32, PatchList)> {
        let id = self.alloc(1)?;
        if nongreedy {
            self.inst[id as usize] = Inst {
                out1: a.begin,
                ..Inst::new(InstOp::Alt, 0)
            };
            Some((id, PatchList::mk(id << 1)))
        } else {
            self.inst[id as usize] = Inst {
                out1: 0,
                ..Inst::new(InstOp::Alt, a.begin)
            };
            Some((id, PatchList::mk((id << 1) | 1)))
        }
    }

    fn plus(&mut self, a: Frag, nongreedy: bool) -> Frag {
        let Some((id, pl)) = self.loop_alt(a, nongreedy) else {
            return NO_MATCH;
        };
        self.patch(a.end, id);
        Frag {
            begin: a.begin,
            end: pl,
            nullable: a.nullable,
        }
    }

    fn star(&mut self, a: Frag, nongreedy: bool) -> Frag {
        if a.nullable {
            let p = self.plus(a, nongreedy);
            return self.quest(p, nongreedy);
        }
        let Some((id, pl)) = self.loop_alt(a, nongreedy) else {
            return NO_MATCH;
        };
        self.patch(a.end, id);
        Frag {
            begin: id,
            end: pl,
            nullable: true,
        }
    }

    fn quest(&mut self, a: Frag, nongreedy: bool) -> Frag {
        if a.begin == 0 {
            return self.nop();
        }
        let Some((id, pl)) = self.loop_alt(a, nongreedy) else {
            return NO_MATCH;
        };
        let end = self.append(pl, a.end);
        Frag {
            begin: id,
            end,
            nullable: true,
        }
    }

    fn byte_range(&mut self, lo: u8, hi: u8, fold: bool) -> Frag {
        let Some(id) = self.alloc(1) else { return NO_MATCH };
        // The case-folding flag does not change the size.
        let _ = fold;
        self.inst[id as usize] = Inst {
            lo,
            hi,
            ..Inst::new(InstOp::ByteRange, 0)
        };
        Frag {
            begin: id,
            end: PatchList::mk(id << 1),
            nullable: false,
        }
    }

    fn nop(&mut self) -> Frag {
        let Some(id) = self.alloc(1) else { return NO_MATCH };
        self.inst[id as usize] = Inst::new(InstOp::Nop, 0);
        Frag {
            begin: id,
            end: PatchList::mk(id << 1),
            nullable: true,
        }
    }

    fn match_(&mut self) -> Frag {
        let Some(id) = self.alloc(1) else { return NO_MATCH };
        self.inst[id as usize] = Inst::new(InstOp::Match, 0);
        Frag {
            begin: id,
            end: PatchList::default(),
            nullable: false,
        }
    }

    fn empty_width(&mut self) -> Frag {
        let Some(id) = self.alloc(1) else { return NO_MATCH };
        self.inst[id as usize] = Inst::new(InstOp::EmptyWidth, 0);
        Frag {
            begin: id,
            end: PatchList::mk(id << 1),
            nullable: true,
        }
    }

    fn capture(&mut self, a: Frag) -> Frag {
        if a.begin == 0 {
            return NO_MATCH;
        }
        let Some(id) = self.alloc(2) else { return NO_MATCH };
        self.inst[id as usize] = Inst::new(InstOp::Capture, a.begin);
        self.inst[id as usize + 1] = Inst::new(InstOp::Capture, 0);
        self.patch(a.end, id + 1);
        Frag {
            begin: id,
            end: PatchList::mk((id + 1) << 1),
            nullable: a.nullable,
        }
    }

    // -- character classes: an Alt chain of byte ranges (Latin-1) ----------

    fn begin_range(&mut self) {
        self.rune_range = NO_MATCH;
    }

    fn add_rune_range(&mut self, lo: u32, hi: u32, fold: bool) {
        if lo > hi || lo > LATIN1_MAX {
            return;
        }
        let f = self.byte_range(lo as u8, hi.min(LATIN1_MAX) as u8, fold);
        self.rune_range.end = self.append(self.rune_range.end, f.end);
        if self.failed {
            return;
        }
        if self.rune_range.begin == 0 {
            self.rune_range.begin = f.begin;
            return;
        }
        let Some(alt) = self.alloc(1) else {
            self.rune_range.begin = 0;
            return;
        };
        self.inst[alt as usize] = Inst {
            out1: f.begin,
            ..Inst::new(InstOp::Alt, self.rune_range.begin)
        };
        self.rune_range.begin = alt;
    }

    fn post_visit(&mut self, re: &Re, kids: &[Frag]) -> Frag {
        if self.failed {
            return NO_MATCH;
        }
        let nongreedy = re.flags & NON_GREEDY != 0;
        match re.op {
            Op::NoMatch => NO_MATCH,
            Op::EmptyMatch => self.nop(),
            Op::Concat => {
                let mut f = kids.first().copied().unwrap_or(NO_MATCH);
                for &k in kids.iter().skip(1) {
                    f = self.cat(f, k);
                }
                f
            }
            Op::Alternate => {
                let mut f = kids.first().copied().unwrap_or(NO_MATCH);
                for &k in kids.iter().skip(1) {
                    f = self.alt(f, k);
                }
                f
            }
            Op::Star => self.star(kids[0], nongreedy),
            Op::Plus => self.plus(kids[0], nongreedy),
            Op::Quest => self.quest(kids[0], nongreedy),
            Op::Literal => self.byte_range(re.rune as u8, re.rune as u8, re.flags & FOLD_CASE != 0),
            Op::LiteralString => {
                let fold = re.flags & FOLD_CASE != 0;
                let mut f = NO_MATCH;
                for (i, &r) in re.runes.iter().enumerate() {
                    let g = self.byte_range(r as u8, r as u8, fold);
                    f = if i == 0 { g } else { self.cat(f, g) };
                }
                if re.runes.is_empty() { self.nop() } else { f }
            }
            Op::AnyChar => {
                self.begin_range();
                self.add_rune_range(0, LATIN1_MAX, false);
                self.rune_range
            }
            Op::AnyByte => self.byte_range(0x00, 0xFF, false),
            Op::CharClass => {
                let Some(cc) = re.class() else {
                    self.failed = true;
                    return NO_MATCH;
                };
                if cc.is_empty() {
                    self.failed = true;
                    return NO_MATCH;
                }
                // (?i)abc: ranges inside A-Z are dropped and the others
                // marked to fold ASCII case.
                let foldascii = cc.folds_ascii;
                self.begin_range();
                let (a, z, lz, la) = (u32::from(b'A'), u32::from(b'z'), u32::from(b'Z'), u32::from(b'a'));
                for &(lo, hi) in &cc.ranges {
                    if foldascii && a <= lo && hi <= lz {
                        continue;
                    }
                    let mut fold = foldascii;
                    if (lo <= a && z <= hi) || hi < a || z < lo || (lz < lo && hi < la) {
                        fold = false;
                    }
                    self.add_rune_range(lo, hi, fold);
                }
                self.rune_range
            }
            Op::Capture => {
                if re.cap < 0 {
                    kids[0]
                } else {
                    self.capture(kids[0])
                }
            }
            Op::BeginLine
            | Op::EndLine
            | Op::BeginText
            | Op::EndText
            | Op::WordBoundary
            | Op::NoWordBoundary => self.empty_width(),
            Op::Repeat | Op::LeftParen | Op::VerticalBar => {
                self.failed = true;
                NO_MATCH
            }
        }
    }

    /// RE2's WalkExponential over the simplified regexp (a DAG: shared
    /// pieces are compiled once per use), iteratively.
    fn walk(&mut self, root: &Re) -> Frag {
        enum Task<'a> {
            Enter(&'a Re),
            Exit(&'a Re, usize),
        }
        let mut visits_left = 2 * MAX_INST;
        let mut results: Vec<Frag> = Vec::new();
        let mut tasks = vec![Task::Enter(root)];
        while let Some(task) = tasks.pop() {
            match task {
                Task::Enter(re) => {
                    if visits_left == 0 {
                        self.failed = true;
                    } else {
                        visits_left -= 1;
                    }
                    if self.failed {
                        results.push(NO_MATCH);
                    } else if re.subs.is_empty() {
                        let f = self.post_visit(re, &[]);
                        results.push(f);
                    } else {
                        tasks.push(Task::Exit(re, results.len()));
                        tasks.extend(re.subs.iter().rev().map(|s| Task::Enter(s)));
                    }
                }
                Task::Exit(re, base) => {
                    let kids = results.split_off(base);
                    let f = self.post_visit(re, &kids);
                    results.push(f);
                }
            }
        }
        results.pop().unwrap_or(NO_MATCH)
    }
}

/// RE2's `ProgramSize()` for a parsed pattern.
pub(super) fn compile_size(re: &Rc<Re>) -> Result<usize, RegexError> {
    let re = required_prefix_suffix(re).unwrap_or_else(|| re.clone());
    let coalesced = coalesce(&re);
    let (_, bound) = min_insts(&coalesced);
    if bound > MAX_EXPANSION {
        return Err(RegexError::ProgramTooLarge {
            reason: format!(
                "with its repetitions expanded, the RE2 program has at least {bound} instructions"
            ),
            limit: MAX_PROGRAM_SIZE,
        });
    }
    let mut sre = simplify(&coalesced);
    let anchor_start = strip_anchor(&mut sre, 0, true);
    strip_anchor(&mut sre, 0, false);

    let mut c = Compiler::new();
    let all = c.walk(&sre);
    if c.failed {
        return Err(RegexError::ProgramTooLarge {
            reason: format!("the RE2 program has more than {MAX_INST} instructions"),
            limit: MAX_PROGRAM_SIZE,
        });
    }
    let m = c.match_();
    let all = c.cat(all, m);
    let start = all.begin;
    let start_unanchored = if anchor_start {
        start
    } else {
        let b = c.byte_range(0x00, 0xFF, false);
        let dot_star = c.star(b, true);
        c.cat(dot_star, all).begin
    };
    if c.failed {
        return Err(RegexError::ProgramTooLarge {
            reason: format!("the RE2 program has more than {MAX_INST} instructions"),
            limit: MAX_PROGRAM_SIZE,
        });
    }
    let mut prog = c.inst;
    if start == 0 && start_unanchored == 0 {
        // No possible match: the Fail instruction only.
        prog.truncate(1);
    }
    // Every successor is in range (a guard: the port never breaks this).
    let n = prog.len() as u32;
    for i in &mut prog {
        if i.out >= n {
            i.out = 0;
        }
        if i.out1 >= n {
            i.out1 = 0;
        }
    }
    if start >= n || start_unanchored >= n {
        return Err(RegexError::Unsupported(
            "internal error compiling the RE2 program".to_string(),
        ));
    }
    optimize(&mut prog, start);
    Ok(flattened_size(&prog, start, start_unanchored))
}
