//! The parsed regular expression, after `re2/regexp.h` and `re2/regexp.cc`.
//!
//! * Runes: in Latin-1 mode every byte of the pattern is one rune
//!   (0..=0xFF); RE2 parses the pattern converted to UTF-8, and so do we.
//! * Character classes: RE2's `CharClassBuilder` ([`Ccb`]: non-overlapping,
//!   non-abutting ranges, plus bitmaps of A-Z and a-z) and the frozen
//!   [`CharClass`].
//! * Nodes ([`Re`]): RE2's `Regexp` with its ops and parse flags (Envoy's
//!   are [`ENVOY_FLAGS`]), structural equality (`TopEqual`, `Equal`), the
//!   `Concat`/`Alternate` constructors, and `RequiredPrefix`.
//!
//! Nothing here rejects a pattern; it is the data every other file reads.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::factor::{FactorDepth, factor_alternation};

pub(super) const RUNE_MAX: u32 = 0x10FFFF;
/// The largest rune in Latin-1 mode.
pub(super) const LATIN1_MAX: u32 = 0xFF;

pub(super) fn is_ascii_letter(r: u32) -> bool {
    u8::try_from(r).is_ok_and(|b| b.is_ascii_alphabetic())
}

/// RE2's `AddFoldedRangeLatin1`: the range and the other case of its ASCII
/// letters (Latin-1 mode folds ASCII only).
pub(super) fn add_folded_range_latin1(cc: &mut Ccb, lo: u32, hi: u32) {
    if lo > hi {
        return;
    }
    cc.add_range(lo, hi);
    for r in lo..=hi.min(u32::from(b'z')) {
        if is_ascii_letter(r) {
            let other = r ^ 0x20;
            cc.add_range(other, other);
        }
    }
}

const ALPHA_MASK: u32 = (1 << 26) - 1;

#[derive(Clone, Debug, Default)]
pub(super) struct Ccb {
    pub(super) ranges: BTreeMap<u32, u32>,
    pub(super) nrunes: i64,
    upper: u32,
    lower: u32,
}

impl Ccb {
    /// A range overlapping `lo..=hi`, if any.
    fn overlapping(&self, lo: u32, hi: u32) -> Option<(u32, u32)> {
        self.ranges
            .range(..=hi)
            .next_back()
            .map(|(&a, &b)| (a, b))
            .filter(|&(_, b)| b >= lo)
    }

    fn take(&mut self, lo: u32) {
        if let Some(hi) = self.ranges.remove(&lo) {
            self.nrunes -= i64::from(hi - lo + 1);
        }
    }

    /// Adds `lo..=hi`; returns whether the class got bigger.
    pub(super) fn add_range(&mut self, mut lo: u32, mut hi: u32) -> bool {
        if hi < lo {
            return false;
        }
        if lo <= u32::from(b'z') && hi >= u32::from(b'A') {
            let (a, z) = (u32::from(b'A'), u32::from(b'Z'));
            let (lo1, hi1) = (lo.max(a), hi.min(z));
            if lo1 <= hi1 {
                self.upper |= ((1u32 << (hi1 - lo1 + 1)) - 1) << (lo1 - a);
            }
            let (a, z) = (u32::from(b'a'), u32::from(b'z'));
            let (lo1, hi1) = (lo.max(a), hi.min(z));
            if lo1 <= hi1 {
                self.lower |= ((1u32 << (hi1 - lo1 + 1)) - 1) << (lo1 - a);
            }
        }
        if let Some((a, b)) = self.overlapping(lo, lo)
            && a <= lo
            && hi <= b
        {
            return false;
        }
        if lo > 0
            && let Some((a, b)) = self.overlapping(lo - 1, lo - 1)
        {
            lo = a;
            hi = hi.max(b);
            self.take(a);
        }
        if hi < RUNE_MAX
            && let Some((a, b)) = self.overlapping(hi + 1, hi + 1)
        {
            hi = b;
            self.take(a);
        }
        while let Some((a, _)) = self.overlapping(lo, hi) {
            self.take(a);
        }
        self.nrunes += i64::from(hi - lo + 1);
        self.ranges.insert(lo, hi);
        true
    }

    pub(super) fn add_char_class(&mut self, other: &Ccb) {
        for (&lo, &hi) in &other.ranges {
            self.add_range(lo, hi);
        }
    }

    pub(super) fn contains(&self, r: u32) -> bool {
        self.overlapping(r, r).is_some()
    }

    pub(super) fn negate(&mut self) {
        let mut v = Vec::with_capacity(self.ranges.len() + 1);
        let mut next = 0u32;
        for (&lo, &hi) in &self.ranges {
            if lo > next {
                v.push((next, lo - 1));
            }
            next = hi + 1;
        }
        if next <= RUNE_MAX {
            v.push((next, RUNE_MAX));
        }
        self.ranges = v.into_iter().collect();
        self.upper = ALPHA_MASK & !self.upper;
        self.lower = ALPHA_MASK & !self.lower;
        self.nrunes = i64::from(RUNE_MAX) + 1 - self.nrunes;
    }

    /// Drops the runes above `r` (above 0xFF in Latin-1 mode: `[^a]` and
    /// `\\P{L}` stop there).
    pub(super) fn remove_above(&mut self, r: u32) {
        if r >= RUNE_MAX {
            return;
        }
        let (z, a) = (u32::from(b'z'), u32::from(b'Z'));
        if r < z {
            if r < u32::from(b'a') {
                self.lower = 0;
            } else {
                self.lower &= ALPHA_MASK >> (z - r);
            }
        }
        if r < a {
            if r < u32::from(b'A') {
                self.upper = 0;
            } else {
                self.upper &= ALPHA_MASK >> (a - r);
            }
        }
        while let Some((lo, _)) = self.overlapping(r + 1, RUNE_MAX) {
            self.take(lo);
            if lo <= r {
                self.ranges.insert(lo, r);
                self.nrunes += i64::from(r - lo + 1);
            }
        }
    }

    /// Adds a range, leaving out `\n` if the flags say so and folding case
    /// if they say so.
    pub(super) fn add_range_flags(&mut self, lo: u32, hi: u32, flags: u16) {
        let cutnl = flags & CLASS_NL == 0 || flags & NEVER_NL != 0;
        let nl = u32::from(b'\n');
        if cutnl && lo <= nl && nl <= hi {
            if lo < nl {
                self.add_range_flags(lo, nl - 1, flags);
            }
            if hi > nl {
                self.add_range_flags(nl + 1, hi, flags);
            }
            return;
        }
        if flags & FOLD_CASE != 0 {
            add_folded_range_latin1(self, lo, hi);
        } else {
            self.add_range(lo, hi);
        }
    }

    pub(super) fn freeze(&self) -> CharClass {
        CharClass {
            ranges: self.ranges.iter().map(|(&a, &b)| (a, b)).collect(),
            nrunes: self.nrunes,
            folds_ascii: ((self.upper ^ self.lower) & ALPHA_MASK) == 0,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(super) struct CharClass {
    pub(super) ranges: Vec<(u32, u32)>,
    nrunes: i64,
    pub(super) folds_ascii: bool,
}

impl CharClass {
    pub(super) fn is_empty(&self) -> bool {
        self.nrunes == 0
    }
    pub(super) fn is_full(&self) -> bool {
        self.nrunes == i64::from(RUNE_MAX) + 1
    }
}

pub(super) const FOLD_CASE: u16 = 1 << 0;
pub(super) const CLASS_NL: u16 = 1 << 2;
pub(super) const DOT_NL: u16 = 1 << 3;
pub(super) const ONE_LINE: u16 = 1 << 4;
pub(super) const NON_GREEDY: u16 = 1 << 6;
pub(super) const PERL_CLASSES: u16 = 1 << 7;
pub(super) const PERL_B: u16 = 1 << 8;
pub(super) const PERL_X: u16 = 1 << 9;
pub(super) const UNICODE_GROUPS_FLAG: u16 = 1 << 10;
pub(super) const NEVER_NL: u16 = 1 << 11;
pub(super) const WAS_DOLLAR: u16 = 1 << 13;
const LATIN1: u16 = 1 << 5;
/// Envoy 1.40's parse flags: `LikePerl`, `ClassNL` and Latin-1 encoding.
pub(super) const ENVOY_FLAGS: u16 =
    CLASS_NL | ONE_LINE | PERL_CLASSES | PERL_B | PERL_X | UNICODE_GROUPS_FLAG | LATIN1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    NoMatch,
    EmptyMatch,
    Literal,
    LiteralString,
    Concat,
    Alternate,
    Star,
    Plus,
    Quest,
    Repeat,
    Capture,
    AnyChar,
    AnyByte,
    BeginLine,
    EndLine,
    WordBoundary,
    NoWordBoundary,
    BeginText,
    EndText,
    CharClass,
    /// Parser stack marker.
    LeftParen,
    /// Parser stack marker.
    VerticalBar,
}

#[derive(Clone, Debug)]
pub(super) struct Re {
    pub(super) op: Op,
    pub(super) flags: u16,
    pub(super) subs: Vec<Rc<Re>>,
    pub(super) rune: u32,
    pub(super) runes: Vec<u32>,
    pub(super) min: i32,
    pub(super) max: i32,
    pub(super) cap: i32,
    pub(super) name: Option<String>,
    pub(super) cc: Option<Rc<CharClass>>,
    pub(super) ccb: Option<Box<Ccb>>,
    /// Offset of `(` for LeftParen markers.
    pub(super) pos: usize,
}

impl Re {
    pub(super) fn new(op: Op, flags: u16) -> Re {
        Re {
            op,
            flags,
            subs: Vec::new(),
            rune: 0,
            runes: Vec::new(),
            min: 0,
            max: 0,
            cap: 0,
            name: None,
            cc: None,
            ccb: None,
            pos: 0,
        }
    }
    pub(super) fn rc(op: Op, flags: u16) -> Rc<Re> {
        Rc::new(Re::new(op, flags))
    }
    pub(super) fn with_subs(op: Op, flags: u16, subs: Vec<Rc<Re>>) -> Rc<Re> {
        let mut re = Re::new(op, flags);
        re.subs = subs;
        Rc::new(re)
    }
    pub(super) fn literal(r: u32, flags: u16) -> Rc<Re> {
        let mut re = Re::new(Op::Literal, flags);
        re.rune = r;
        Rc::new(re)
    }
    pub(super) fn literal_string(runes: &[u32], flags: u16) -> Rc<Re> {
        match runes.len() {
            0 => Re::rc(Op::EmptyMatch, flags),
            1 => Re::literal(runes[0], flags),
            _ => {
                let mut re = Re::new(Op::LiteralString, flags);
                re.runes = runes.to_vec();
                Rc::new(re)
            }
        }
    }
    pub(super) fn char_class(cc: CharClass, flags: u16) -> Rc<Re> {
        let mut re = Re::new(Op::CharClass, flags);
        re.cc = Some(Rc::new(cc));
        Rc::new(re)
    }
    pub(super) fn repeat(sub: Rc<Re>, flags: u16, min: i32, max: i32) -> Re {
        let mut re = Re::new(Op::Repeat, flags);
        re.subs = vec![sub];
        re.min = min;
        re.max = max;
        re
    }
    pub(super) fn is_marker(&self) -> bool {
        matches!(self.op, Op::LeftParen | Op::VerticalBar)
    }
    pub(super) fn class(&self) -> Option<&CharClass> {
        self.cc.as_deref()
    }
}

impl Drop for Re {
    /// Iterative, so that deep trees (`x{0,1000}` nests a thousand `?`)
    /// do not overflow the stack when dropped.
    fn drop(&mut self) {
        let mut stack = std::mem::take(&mut self.subs);
        while let Some(rc) = stack.pop() {
            if let Ok(mut re) = Rc::try_unwrap(rc) {
                stack.append(&mut re.subs);
            }
        }
    }
}

/// RE2's `TopEqual`: equality of everything but the sub-expressions.
fn top_equal(a: &Re, b: &Re) -> bool {
    if a.op != b.op {
        return false;
    }
    match a.op {
        Op::EndText => (a.flags ^ b.flags) & WAS_DOLLAR == 0,
        Op::Literal => a.rune == b.rune && (a.flags ^ b.flags) & FOLD_CASE == 0,
        Op::LiteralString => a.runes == b.runes && (a.flags ^ b.flags) & FOLD_CASE == 0,
        Op::Alternate | Op::Concat => a.subs.len() == b.subs.len(),
        Op::Star | Op::Plus | Op::Quest => (a.flags ^ b.flags) & NON_GREEDY == 0,
        Op::Repeat => (a.flags ^ b.flags) & NON_GREEDY == 0 && a.min == b.min && a.max == b.max,
        Op::Capture => a.cap == b.cap && a.name == b.name,
        Op::CharClass => match (a.class(), b.class()) {
            (Some(x), Some(y)) => x.nrunes == y.nrunes && x.ranges == y.ranges,
            _ => false,
        },
        _ => true,
    }
}

pub(super) fn equal(a: &Re, b: &Re) -> bool {
    top_equal(a, b) && a.subs.len() == b.subs.len() && a.subs.iter().zip(&b.subs).all(|(x, y)| equal(x, y))
}

pub(super) fn concat_or_alternate(
    op: Op,
    mut subs: Vec<Rc<Re>>,
    flags: u16,
    can_factor: bool,
    depth: &mut FactorDepth,
) -> Rc<Re> {
    if subs.len() == 1 {
        return subs.pop().unwrap_or_else(|| Re::rc(Op::NoMatch, flags));
    }
    if subs.is_empty() {
        return Re::rc(
            if op == Op::Alternate {
                Op::NoMatch
            } else {
                Op::EmptyMatch
            },
            flags,
        );
    }
    if op == Op::Alternate && can_factor {
        subs = factor_alternation(subs, flags, depth, 0);
        if subs.len() == 1 {
            return subs.pop().unwrap_or_else(|| Re::rc(Op::NoMatch, flags));
        }
    }
    Re::with_subs(op, flags, subs)
}

pub(super) fn concat(subs: Vec<Rc<Re>>, flags: u16) -> Rc<Re> {
    concat_or_alternate(Op::Concat, subs, flags, false, &mut FactorDepth::default())
}

/// RE2's `RequiredPrefix`: for `^literal...`, the regexp after the literal
/// (compiled unanchored: RE2 matches the prefix itself).
pub(super) fn required_prefix_suffix(re: &Rc<Re>) -> Option<Rc<Re>> {
    if re.op != Op::Concat {
        return None;
    }
    let i = re.subs.iter().take_while(|s| s.op == Op::BeginText).count();
    if i == 0 || i >= re.subs.len() {
        return None;
    }
    if !matches!(re.subs[i].op, Op::Literal | Op::LiteralString) {
        return None;
    }
    if i + 1 < re.subs.len() {
        return Some(concat(re.subs[i + 1..].to_vec(), re.flags));
    }
    Some(Re::rc(Op::EmptyMatch, re.flags))
}
