//! RE2 compatibility of the regular expressions handed to Envoy.
//!
//! Envoy (regex engine `google_re2`) rejects a whole RouteConfiguration when
//! one `safe_regex` is not valid RE2, or when its compiled RE2 program has
//! more instructions than the runtime key `re2.max_program_size.error_level`
//! (default [`MAX_PROGRAM_SIZE`] = 100). [`check`] finds both in-process, so
//! the translator can replace such a route with a guard instead of sending
//! Envoy something it NACKs. [`literal_prefix`] gives the literal text every
//! match of a pattern starts with, for that guard.
//!
//! No RE2 binding builds here and `regex-syntax` is neither a subset nor a
//! superset of RE2, so this module is a port of the parts of RE2 (2025) that
//! decide both answers, with the options of Envoy 1.40 as the real binary
//! shows them: Perl classes and extensions, `\b`, Unicode groups, `^`/`$`
//! at the text ends only, and **Latin-1** encoding: every byte of the
//! pattern is one character (`é` is the two characters `Ã©`, `\x{100}` is an
//! invalid escape, `\pL` is the letters up to U+00FF, `.` is one byte). Ported:
//!
//! * the parser (`re2/parse.cc`), including its alternation factoring
//!   (`abc|abd` becomes `ab[cd]`), which changes the program size;
//! * the simplifier (`re2/simplify.cc`): adjacent repeats of one atom are
//!   coalesced (`a+a*` is `a{1,}`), `x{n,m}` becomes n copies of `x` and
//!   m-n nested `(x)?`;
//! * the compiler (`re2/compile.cc`): one instruction per literal byte and
//!   per byte range of a class, one `Alt` per alternative, class range and
//!   repetition, two per capture group; a required literal prefix after `^`
//!   is taken out of the program, an unanchored program gets a `.*?` loop;
//! * `Prog::Optimize` and `Prog::Flatten` (`re2/prog.cc`): `ProgramSize()`,
//!   which Envoy compares, is the size of the flattened program (the `Alt`s
//!   disappear, each instruction reachable from several lists is copied).
//!
//! The sizes are RE2's own: the test `regex_oracle` compares them with the
//! sizes the real Envoy reports. Where the port gives up it rejects, never
//! accepts: groups nested more than 200 deep, patterns whose expanded
//! repetitions certainly exceed the limit many times over (reported as a
//! lower bound). A false rejection costs one route (it becomes a 500 guard);
//! a false acceptance would make Envoy NACK every route of the listener. If
//! a new Envoy changes RE2's options, `regex_oracle` fails.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Envoy's default `re2.max_program_size.error_level`: a regex whose RE2
/// program has more instructions is rejected.
pub const MAX_PROGRAM_SIZE: usize = 100;

/// Parenthesis nesting beyond which we reject without trying (RE2 itself
/// has no limit; this keeps our recursion bounded).
const MAX_NESTING: usize = 200;
/// Above this lower bound on the program size (repetitions expanded) we
/// report the bound instead of compiling.
const MAX_EXPANSION: u64 = 2000;
/// Instruction budget of the compiler port (RE2's is about 700 000).
const MAX_INST: usize = 100_000;

/// Why Envoy would reject a regular expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegexError {
    /// Envoy requires at least one character.
    #[error("regex is empty")]
    Empty,
    /// Not valid RE2 syntax (or syntax RE2 does not support).
    #[error("{message} at offset {offset}")]
    Syntax { message: String, offset: usize },
    /// Valid RE2 whose compiled program is over Envoy's limit.
    #[error("RE2 program size {size} exceeds Envoy's limit of {limit}")]
    ProgramSize { size: usize, limit: usize },
    /// Valid RE2 whose program is certainly over Envoy's limit (a lower
    /// bound, without compiling it).
    #[error("{reason}, over Envoy's RE2 program size limit of {limit}")]
    ProgramTooLarge { reason: String, limit: usize },
    /// Beyond what this checker handles (and so refused, to be safe).
    #[error("{0}")]
    Unsupported(String),
}

/// Checks `pattern` the way Envoy 1.40 (RE2 engine, default runtime) checks
/// a `safe_regex`: `Ok` when Envoy accepts it.
pub fn check(pattern: &str) -> Result<(), RegexError> {
    let size = program_size(pattern)?;
    if size > MAX_PROGRAM_SIZE {
        return Err(RegexError::ProgramSize {
            size,
            limit: MAX_PROGRAM_SIZE,
        });
    }
    Ok(())
}

/// The size of the RE2 program for `pattern` (what Envoy compares with
/// `re2.max_program_size.error_level`), or why there is none.
pub fn program_size(pattern: &str) -> Result<usize, RegexError> {
    if pattern.is_empty() {
        return Err(RegexError::Empty);
    }
    // Memoised per thread: the same patterns come back in every route that
    // uses them and in every translation of `serve`; parsing and compiling
    // each time showed in profiles. A pure function, so the memo cannot
    // change a result; bounded by clearing it when full.
    const MEMO_ENTRIES: usize = 4096;
    thread_local! {
        static MEMO: std::cell::RefCell<std::collections::HashMap<String, Result<usize, RegexError>>> =
            Default::default();
    }
    if let Some(hit) = MEMO.with(|m| m.borrow().get(pattern).cloned()) {
        return hit;
    }
    let result = parse(pattern)
        .map_err(|e| e.into_regex_error())
        .and_then(|parsed| compile_size(&parsed));
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= MEMO_ENTRIES {
            m.clear();
        }
        m.insert(pattern.to_string(), result.clone());
    });
    result
}

/// The longest literal text that every string `pattern` matches in full
/// (as Envoy matches a path) starts with. Conservative: when unsure it
/// stops earlier; when the pattern does not parse it stops at the first
/// metacharacter (and returns "" when a `|` might be at the top level).
pub fn literal_prefix(pattern: &str) -> String {
    match parse(pattern) {
        Ok(parsed) => {
            // Latin-1 runes are bytes; keep the longest valid UTF-8 text.
            let (runes, _) = required_runes(&parsed, 0);
            let bytes: Vec<u8> = runes.iter().map(|&r| r as u8).collect();
            match std::str::from_utf8(&bytes) {
                Ok(s) => s.to_string(),
                Err(e) => String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned(),
            }
        }
        Err(_) => fallback_prefix(pattern),
    }
}

// ---------------------------------------------------------------------------
// Errors of the parser port.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    BadEscape,
    BadCharRange,
    MissingBracket,
    MissingParen,
    UnexpectedParen,
    TrailingBackslash,
    RepeatArgument,
    RepeatSize,
    RepeatOp,
    BadPerlOp,
    BadNamedCapture,
    TooDeep,
}

#[derive(Debug)]
struct ParseError {
    code: Code,
    /// The offending text, as RE2 reports it.
    arg: String,
    /// Byte offset of the problem in the pattern.
    offset: usize,
}

impl ParseError {
    fn into_regex_error(self) -> RegexError {
        let arg = self.arg.as_str();
        let message = match self.code {
            Code::BadEscape => {
                let b = arg.as_bytes();
                if b.len() == 2 && b[1].is_ascii_digit() && b[1] != b'0' {
                    format!("backreference {arg} is not supported by RE2")
                } else if arg == "\\Z" {
                    "\\Z is not supported by RE2 (use \\z or $)".to_string()
                } else if arg == "\\G" {
                    "\\G is not supported by RE2".to_string()
                } else {
                    format!("invalid escape sequence {arg}")
                }
            }
            Code::BadCharRange => format!("invalid character class or range {arg}"),
            Code::MissingBracket => "missing ] for the character class starting here".to_string(),
            Code::MissingParen => "missing ) for the group starting here".to_string(),
            Code::UnexpectedParen => "unexpected )".to_string(),
            Code::TrailingBackslash => "trailing \\".to_string(),
            Code::RepeatArgument => format!("repetition operator {arg} has nothing to repeat"),
            Code::RepeatSize => format!(
                "invalid repetition size {arg} (RE2 allows at most 1000 copies, nested repetitions included)"
            ),
            Code::RepeatOp => {
                format!(
                    "repetition operator {arg} is not supported by RE2 (no possessive or stacked quantifiers)"
                )
            }
            Code::BadPerlOp => {
                let what = if arg.starts_with("(?=") {
                    "lookahead"
                } else if arg.starts_with("(?!") {
                    "negative lookahead"
                } else if arg.starts_with("(?<=") {
                    "lookbehind"
                } else if arg.starts_with("(?<!") {
                    "negative lookbehind"
                } else if arg.starts_with("(?>") {
                    "atomic group"
                } else if arg.starts_with("(?(") {
                    "conditional"
                } else if arg.starts_with("(?#") {
                    "comment group"
                } else if arg.len() > 2
                    && arg[2..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_digit() || c == 'R' || c == '+' || c == '&')
                {
                    "recursion"
                } else {
                    "group syntax"
                };
                format!(
                    "{what} {arg} is not supported by RE2 (it knows (?:...), (?P<name>...), (?<name>...) and the flags i, m, s, U)"
                )
            }
            Code::BadNamedCapture => format!("invalid named capture group {arg}"),
            Code::TooDeep => format!("groups nested more than {MAX_NESTING} deep (not supported here)"),
        };
        match self.code {
            Code::TooDeep => RegexError::Unsupported(format!("{message} at offset {}", self.offset)),
            _ => RegexError::Syntax {
                message,
                offset: self.offset,
            },
        }
    }
}

type PResult<T> = Result<T, ParseError>;

// ---------------------------------------------------------------------------
// Runes. In Latin-1 mode every byte of the pattern is one rune (0..=0xFF);
// RE2 parses the pattern converted to UTF-8, and so do we.

const RUNE_MAX: u32 = 0x10FFFF;
/// The largest rune in Latin-1 mode.
const LATIN1_MAX: u32 = 0xFF;

fn is_ascii_letter(r: u32) -> bool {
    u8::try_from(r).is_ok_and(|b| b.is_ascii_alphabetic())
}

/// RE2's `AddFoldedRangeLatin1`: the range and the other case of its ASCII
/// letters (Latin-1 mode folds ASCII only).
fn add_folded_range_latin1(cc: &mut Ccb, lo: u32, hi: u32) {
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

// ---------------------------------------------------------------------------
// Character classes: RE2's CharClassBuilder (non-overlapping, non-abutting
// ranges, plus bitmaps of A-Z and a-z) and the frozen CharClass.

const ALPHA_MASK: u32 = (1 << 26) - 1;

#[derive(Clone, Debug, Default)]
struct Ccb {
    ranges: BTreeMap<u32, u32>,
    nrunes: i64,
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
    fn add_range(&mut self, mut lo: u32, mut hi: u32) -> bool {
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

    fn add_char_class(&mut self, other: &Ccb) {
        for (&lo, &hi) in &other.ranges {
            self.add_range(lo, hi);
        }
    }

    fn contains(&self, r: u32) -> bool {
        self.overlapping(r, r).is_some()
    }

    fn negate(&mut self) {
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
    fn remove_above(&mut self, r: u32) {
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
    fn add_range_flags(&mut self, lo: u32, hi: u32, flags: u16) {
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

    fn freeze(&self) -> CharClass {
        CharClass {
            ranges: self.ranges.iter().map(|(&a, &b)| (a, b)).collect(),
            nrunes: self.nrunes,
            folds_ascii: ((self.upper ^ self.lower) & ALPHA_MASK) == 0,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct CharClass {
    ranges: Vec<(u32, u32)>,
    nrunes: i64,
    folds_ascii: bool,
}

impl CharClass {
    fn is_empty(&self) -> bool {
        self.nrunes == 0
    }
    fn is_full(&self) -> bool {
        self.nrunes == i64::from(RUNE_MAX) + 1
    }
}

/// Adds a group (`\d`, `[:alpha:]`, `\p{Greek}`) or its negation.
fn add_ugroup(cc: &mut Ccb, ranges: &[(u32, u32)], sign: i32, flags: u16) {
    if sign > 0 {
        for &(lo, hi) in ranges {
            cc.add_range_flags(lo, hi, flags);
        }
    } else if flags & FOLD_CASE != 0 {
        let mut ccb1 = Ccb::default();
        add_ugroup(&mut ccb1, ranges, 1, flags);
        if flags & CLASS_NL == 0 || flags & NEVER_NL != 0 {
            ccb1.add_range(u32::from(b'\n'), u32::from(b'\n'));
        }
        ccb1.negate();
        cc.add_char_class(&ccb1);
    } else {
        let mut next = 0u32;
        for &(lo, hi) in ranges {
            if next < lo {
                cc.add_range_flags(next, lo - 1, flags);
            }
            next = hi + 1;
        }
        if next <= RUNE_MAX {
            cc.add_range_flags(next, RUNE_MAX, flags);
        }
    }
}

const PERL_D: &[(u32, u32)] = &[(0x30, 0x39)];
const PERL_S: &[(u32, u32)] = &[(0x9, 0xa), (0xc, 0xd), (0x20, 0x20)];
const PERL_W: &[(u32, u32)] = &[(0x30, 0x39), (0x41, 0x5a), (0x5f, 0x5f), (0x61, 0x7a)];

/// `\d \D \s \S \w \W` (ASCII-only in RE2).
fn perl_group(c: u8) -> Option<(&'static [(u32, u32)], i32)> {
    Some(match c {
        b'd' => (PERL_D, 1),
        b'D' => (PERL_D, -1),
        b's' => (PERL_S, 1),
        b'S' => (PERL_S, -1),
        b'w' => (PERL_W, 1),
        b'W' => (PERL_W, -1),
        _ => return None,
    })
}

/// `[:alpha:]`, `[:^alpha:]` and friends (ASCII-only in RE2).
fn posix_group(name: &str) -> Option<(&'static [(u32, u32)], i32)> {
    let (name, sign) = match name.strip_prefix("[:^") {
        Some(rest) => (rest, -1),
        None => (name.strip_prefix("[:")?, 1),
    };
    let ranges: &'static [(u32, u32)] = match name.strip_suffix(":]")? {
        "alnum" => &[(0x30, 0x39), (0x41, 0x5a), (0x61, 0x7a)],
        "alpha" => &[(0x41, 0x5a), (0x61, 0x7a)],
        "ascii" => &[(0x0, 0x7f)],
        "blank" => &[(0x9, 0x9), (0x20, 0x20)],
        "cntrl" => &[(0x0, 0x1f), (0x7f, 0x7f)],
        "digit" => &[(0x30, 0x39)],
        "graph" => &[(0x21, 0x7e)],
        "lower" => &[(0x61, 0x7a)],
        "print" => &[(0x20, 0x7e)],
        "punct" => &[(0x21, 0x2f), (0x3a, 0x40), (0x5b, 0x60), (0x7b, 0x7e)],
        "space" => &[(0x9, 0xd), (0x20, 0x20)],
        "upper" => &[(0x41, 0x5a)],
        "word" => &[(0x30, 0x39), (0x41, 0x5a), (0x5f, 0x5f), (0x61, 0x7a)],
        "xdigit" => &[(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
        _ => return None,
    };
    Some((ranges, sign))
}

const ANY: &[(u32, u32)] = &[(0, LATIN1_MAX)];

/// The runes of `\p{name}` up to 0xFF (all that matters in Latin-1 mode).
fn unicode_group(name: &str) -> Option<&'static [(u32, u32)]> {
    if name == "Any" {
        return Some(ANY);
    }
    let i = UNICODE_GROUPS.binary_search_by(|g| g.0.cmp(name)).ok()?;
    Some(UNICODE_GROUPS[i].1)
}

// ---------------------------------------------------------------------------
// Regexp nodes.

const FOLD_CASE: u16 = 1 << 0;
const CLASS_NL: u16 = 1 << 2;
const DOT_NL: u16 = 1 << 3;
const ONE_LINE: u16 = 1 << 4;
const NON_GREEDY: u16 = 1 << 6;
const PERL_CLASSES: u16 = 1 << 7;
const PERL_B: u16 = 1 << 8;
const PERL_X: u16 = 1 << 9;
const UNICODE_GROUPS_FLAG: u16 = 1 << 10;
const NEVER_NL: u16 = 1 << 11;
const WAS_DOLLAR: u16 = 1 << 13;
const LATIN1: u16 = 1 << 5;
/// Envoy 1.40's parse flags: `LikePerl`, `ClassNL` and Latin-1 encoding.
const ENVOY_FLAGS: u16 = CLASS_NL | ONE_LINE | PERL_CLASSES | PERL_B | PERL_X | UNICODE_GROUPS_FLAG | LATIN1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
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
struct Re {
    op: Op,
    flags: u16,
    subs: Vec<Rc<Re>>,
    rune: u32,
    runes: Vec<u32>,
    min: i32,
    max: i32,
    cap: i32,
    name: Option<String>,
    cc: Option<Rc<CharClass>>,
    ccb: Option<Box<Ccb>>,
    /// Offset of `(` for LeftParen markers.
    pos: usize,
}

impl Re {
    fn new(op: Op, flags: u16) -> Re {
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
    fn rc(op: Op, flags: u16) -> Rc<Re> {
        Rc::new(Re::new(op, flags))
    }
    fn with_subs(op: Op, flags: u16, subs: Vec<Rc<Re>>) -> Rc<Re> {
        let mut re = Re::new(op, flags);
        re.subs = subs;
        Rc::new(re)
    }
    fn literal(r: u32, flags: u16) -> Rc<Re> {
        let mut re = Re::new(Op::Literal, flags);
        re.rune = r;
        Rc::new(re)
    }
    fn literal_string(runes: &[u32], flags: u16) -> Rc<Re> {
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
    fn char_class(cc: CharClass, flags: u16) -> Rc<Re> {
        let mut re = Re::new(Op::CharClass, flags);
        re.cc = Some(Rc::new(cc));
        Rc::new(re)
    }
    fn repeat(sub: Rc<Re>, flags: u16, min: i32, max: i32) -> Re {
        let mut re = Re::new(Op::Repeat, flags);
        re.subs = vec![sub];
        re.min = min;
        re.max = max;
        re
    }
    fn is_marker(&self) -> bool {
        matches!(self.op, Op::LeftParen | Op::VerticalBar)
    }
    fn class(&self) -> Option<&CharClass> {
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

fn equal(a: &Re, b: &Re) -> bool {
    top_equal(a, b) && a.subs.len() == b.subs.len() && a.subs.iter().zip(&b.subs).all(|(x, y)| equal(x, y))
}

fn concat_or_alternate(
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

fn concat(subs: Vec<Rc<Re>>, flags: u16) -> Rc<Re> {
    concat_or_alternate(Op::Concat, subs, flags, false, &mut FactorDepth::default())
}

/// Tracks how deep alternation factoring recursed (bounded, to keep our
/// recursion bounded).
#[derive(Default)]
struct FactorDepth {
    exceeded: bool,
}

// ---------------------------------------------------------------------------
// Alternation factoring (RE2's FactorAlternation): common literal prefixes,
// then common leading simple pieces, then runs of literals and classes
// merged into one class.

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

fn factor_alternation(mut sub: Vec<Rc<Re>>, flags: u16, fd: &mut FactorDepth, depth: usize) -> Vec<Rc<Re>> {
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

// ---------------------------------------------------------------------------
// The parser (RE2's Regexp::Parse and ParseState).

struct Parser<'a> {
    whole: &'a str,
    flags: u16,
    stack: Vec<Rc<Re>>,
    ncap: i32,
    nesting: usize,
    factor: FactorDepth,
}

fn err(code: Code, arg: &str, offset: usize) -> ParseError {
    ParseError {
        code,
        arg: arg.to_string(),
        offset,
    }
}

/// Parses like RE2 with Envoy's options. In Latin-1 mode each byte of the
/// pattern is a rune: `é` is the two runes `Ã` and `©`.
fn parse(pattern: &str) -> PResult<Rc<Re>> {
    let latin1: String = pattern.bytes().map(char::from).collect();
    parse_latin1(&latin1).map_err(|mut e| {
        // Offsets and texts back in terms of the original pattern.
        e.offset = latin1.get(..e.offset).map_or(0, |s| s.chars().count());
        e.arg =
            String::from_utf8_lossy(&e.arg.chars().map(|c| c as u32 as u8).collect::<Vec<u8>>()).into_owned();
        e
    })
}

fn parse_latin1(pattern: &str) -> PResult<Rc<Re>> {
    let mut p = Parser {
        whole: pattern,
        flags: ENVOY_FLAGS,
        stack: Vec::new(),
        ncap: 0,
        nesting: 0,
        factor: FactorDepth::default(),
    };
    let re = p.run()?;
    if p.factor.exceeded {
        return Err(err(Code::TooDeep, "", 0));
    }
    Ok(re)
}

fn next_char(t: &mut &str) -> Option<u32> {
    let c = t.chars().next()?;
    *t = &t[c.len_utf8()..];
    Some(c as u32)
}

fn is_hex(c: u32) -> bool {
    char::from_u32(c).is_some_and(|c| c.is_ascii_hexdigit())
}

fn unhex(c: u32) -> u32 {
    char::from_u32(c).and_then(|c| c.to_digit(16)).unwrap_or(0)
}

/// `{n}`, `{n,}`, `{n,m}`: (min, max or -1, rest). No leading zeros.
fn maybe_parse_repetition(s: &str) -> Option<(i32, i32, &str)> {
    fn integer(s: &mut &str) -> Option<i32> {
        let b = s.as_bytes();
        if b.is_empty() || !b[0].is_ascii_digit() {
            return None;
        }
        if b.len() >= 2 && b[0] == b'0' && b[1].is_ascii_digit() {
            return None;
        }
        let mut n: i32 = 0;
        let mut i = 0;
        while i < b.len() && b[i].is_ascii_digit() {
            if n >= 100_000_000 {
                return None;
            }
            n = n * 10 + i32::from(b[i] - b'0');
            i += 1;
        }
        *s = &s[i..];
        Some(n)
    }
    let mut s = s.strip_prefix('{')?;
    let lo = integer(&mut s)?;
    let hi;
    if let Some(rest) = s.strip_prefix(',') {
        s = rest;
        if let Some(rest) = s.strip_prefix('}') {
            return Some((lo, -1, rest));
        }
        hi = integer(&mut s)?;
    } else {
        hi = lo;
    }
    let rest = s.strip_prefix('}')?;
    Some((lo, hi, rest))
}

/// RE2's RepetitionWalker: the number of copies still allowed under the
/// budget after the nested repetitions of `re`.
fn repetition_budget(re: &Re, parent: i32) -> i32 {
    let mut arg = parent;
    if re.op == Op::Repeat {
        let m = if re.max < 0 { re.min } else { re.max };
        if m > 0 {
            arg /= m;
        }
    }
    let pre = arg;
    let mut out = pre;
    for s in &re.subs {
        out = out.min(repetition_budget(s, pre));
    }
    out
}

impl Parser<'_> {
    fn offset(&self, t: &str) -> usize {
        self.whole.len() - t.len()
    }

    fn run(&mut self) -> PResult<Rc<Re>> {
        let whole = self.whole;
        let mut t = whole;
        let mut lastunary: Option<usize> = None;
        while !t.is_empty() {
            let mut isunary = None;
            let pos = self.offset(t);
            let b = t.as_bytes();
            match b[0] {
                b'(' => {
                    if self.flags & PERL_X != 0 && b.len() >= 2 && b[1] == b'?' {
                        self.parse_perl_flags(&mut t)?;
                    } else {
                        self.do_left_paren(None, pos)?;
                        t = &t[1..];
                    }
                }
                b'|' => {
                    self.do_vertical_bar();
                    t = &t[1..];
                }
                b')' => {
                    self.do_right_paren(pos)?;
                    t = &t[1..];
                }
                b'^' => {
                    let op = if self.flags & ONE_LINE != 0 {
                        Op::BeginText
                    } else {
                        Op::BeginLine
                    };
                    self.push_simple_op(op);
                    t = &t[1..];
                }
                b'$' => {
                    if self.flags & ONE_LINE != 0 {
                        self.push_regexp(Re::rc(Op::EndText, self.flags | WAS_DOLLAR));
                    } else {
                        self.push_simple_op(Op::EndLine);
                    }
                    t = &t[1..];
                }
                b'.' => {
                    self.push_dot();
                    t = &t[1..];
                }
                b'[' => {
                    let re = self.parse_char_class(&mut t)?;
                    self.push_regexp(re);
                }
                b'*' | b'+' | b'?' => {
                    let op = match b[0] {
                        b'*' => Op::Star,
                        b'+' => Op::Plus,
                        _ => Op::Quest,
                    };
                    t = &t[1..];
                    let mut nongreedy = false;
                    if self.flags & PERL_X != 0 {
                        if let Some(rest) = t.strip_prefix('?') {
                            nongreedy = true;
                            t = rest;
                        }
                        if let Some(lu) = lastunary {
                            let end = self.offset(t);
                            return Err(err(Code::RepeatOp, &whole[lu..end], lu));
                        }
                    }
                    let opstr = &whole[pos..self.offset(t)];
                    self.push_repeat_op(op, opstr, pos, nongreedy)?;
                    isunary = Some(pos);
                }
                b'{' => match maybe_parse_repetition(t) {
                    None => {
                        self.push_literal(u32::from(b'{'));
                        t = &t[1..];
                    }
                    Some((lo, hi, rest)) => {
                        t = rest;
                        let mut nongreedy = false;
                        if self.flags & PERL_X != 0 {
                            if let Some(rest) = t.strip_prefix('?') {
                                nongreedy = true;
                                t = rest;
                            }
                            if let Some(lu) = lastunary {
                                let end = self.offset(t);
                                return Err(err(Code::RepeatOp, &whole[lu..end], lu));
                            }
                        }
                        let opstr = &whole[pos..self.offset(t)];
                        self.push_repetition(lo, hi, opstr, pos, nongreedy)?;
                        isunary = Some(pos);
                    }
                },
                b'\\' => self.parse_backslash(&mut t)?,
                _ => {
                    if let Some(r) = next_char(&mut t) {
                        self.push_literal(r);
                    }
                }
            }
            lastunary = isunary;
        }
        self.do_finish()
    }

    fn parse_backslash(&mut self, t: &mut &str) -> PResult<()> {
        let b = t.as_bytes();
        if self.flags & PERL_B != 0 && b.len() >= 2 && (b[1] == b'b' || b[1] == b'B') {
            self.push_simple_op(if b[1] == b'b' {
                Op::WordBoundary
            } else {
                Op::NoWordBoundary
            });
            *t = &t[2..];
            return Ok(());
        }
        if self.flags & PERL_X != 0 && b.len() >= 2 {
            match b[1] {
                b'A' => {
                    self.push_simple_op(Op::BeginText);
                    *t = &t[2..];
                    return Ok(());
                }
                b'z' => {
                    self.push_simple_op(Op::EndText);
                    *t = &t[2..];
                    return Ok(());
                }
                b'C' => {
                    self.push_simple_op(Op::AnyByte);
                    *t = &t[2..];
                    return Ok(());
                }
                b'Q' => {
                    *t = &t[2..];
                    while !t.is_empty() {
                        if let Some(rest) = t.strip_prefix("\\E") {
                            *t = rest;
                            break;
                        }
                        if let Some(r) = next_char(t) {
                            self.push_literal(r);
                        }
                    }
                    return Ok(());
                }
                _ => {}
            }
        }
        if b.len() >= 2 && (b[1] == b'p' || b[1] == b'P') {
            let mut ccb = Ccb::default();
            if self.parse_unicode_group(t, &mut ccb)? {
                self.push_class(ccb);
                return Ok(());
            }
        }
        if let Some((ranges, sign)) = self.maybe_parse_perl_cc_escape(t) {
            let mut ccb = Ccb::default();
            add_ugroup(&mut ccb, ranges, sign, self.flags);
            self.push_class(ccb);
            return Ok(());
        }
        let r = self.parse_escape(t)?;
        self.push_literal(r);
        Ok(())
    }

    fn push_class(&mut self, ccb: Ccb) {
        let mut re = Re::new(Op::CharClass, self.flags & !FOLD_CASE);
        re.ccb = Some(Box::new(ccb));
        self.push_regexp(Rc::new(re));
    }

    fn maybe_parse_perl_cc_escape(&self, t: &mut &str) -> Option<(&'static [(u32, u32)], i32)> {
        if self.flags & PERL_CLASSES == 0 {
            return None;
        }
        let b = t.as_bytes();
        if b.len() < 2 || b[0] != b'\\' {
            return None;
        }
        let g = perl_group(b[1])?;
        *t = &t[2..];
        Some(g)
    }

    /// `\p{Name}`, `\pL`, `\P{^Name}`... `Ok(false)`: not a group.
    fn parse_unicode_group(&mut self, t: &mut &str, cc: &mut Ccb) -> PResult<bool> {
        if self.flags & UNICODE_GROUPS_FLAG == 0 {
            return Ok(false);
        }
        let b = t.as_bytes();
        if b.len() < 2 || b[0] != b'\\' || (b[1] != b'p' && b[1] != b'P') {
            return Ok(false);
        }
        let mut sign = if b[1] == b'P' { -1 } else { 1 };
        let seq_start = self.offset(t);
        let whole = self.whole;
        let mut s = &t[2..];
        let name: &str;
        match s.chars().next() {
            None => return Err(err(Code::BadCharRange, &whole[seq_start..], seq_start)),
            Some('{') => {
                let Some(end) = s.find('}') else {
                    return Err(err(Code::BadCharRange, &whole[seq_start..], seq_start));
                };
                name = &s[1..end];
                s = &s[end + 1..];
            }
            Some(c) => {
                name = &s[..c.len_utf8()];
                s = &s[c.len_utf8()..];
            }
        }
        let seq = &whole[seq_start..self.offset(s)];
        let name = match name.strip_prefix('^') {
            Some(n) => {
                sign = -sign;
                n
            }
            None => name,
        };
        let Some(ranges) = unicode_group(name) else {
            return Err(err(Code::BadCharRange, seq, seq_start));
        };
        add_ugroup(cc, ranges, sign, self.flags);
        *t = s;
        Ok(true)
    }

    fn parse_escape(&self, t: &mut &str) -> PResult<u32> {
        let begin = self.offset(t);
        let whole = self.whole;
        let bad = |t: &str| err(Code::BadEscape, &whole[begin..whole.len() - t.len()], begin);
        if t.len() == 1 {
            return Err(err(Code::TrailingBackslash, "", begin));
        }
        *t = &t[1..];
        let Some(c) = next_char(t) else {
            return Err(err(Code::TrailingBackslash, "", begin));
        };
        let octal = |c: u8| (b'0'..=b'7').contains(&c);
        match char::from_u32(c).unwrap_or('\u{FFFD}') {
            d @ '0'..='7' => {
                if d != '0' && !t.as_bytes().first().is_some_and(|&c| octal(c)) {
                    return Err(bad(t));
                }
                let mut code = c - u32::from(b'0');
                for _ in 0..2 {
                    match t.as_bytes().first() {
                        Some(&c) if octal(c) => {
                            code = code * 8 + u32::from(c - b'0');
                            *t = &t[1..];
                        }
                        _ => break,
                    }
                }
                if code > LATIN1_MAX {
                    return Err(bad(t));
                }
                Ok(code)
            }
            'x' => {
                let Some(c) = next_char(t) else { return Err(bad(t)) };
                if c == u32::from(b'{') {
                    let Some(mut c) = next_char(t) else {
                        return Err(bad(t));
                    };
                    let mut nhex = 0;
                    let mut code: u32 = 0;
                    while is_hex(c) {
                        nhex += 1;
                        code = code * 16 + unhex(c);
                        if code > LATIN1_MAX {
                            return Err(bad(t));
                        }
                        match next_char(t) {
                            Some(n) => c = n,
                            None => return Err(bad(t)),
                        }
                    }
                    if c != u32::from(b'}') || nhex == 0 {
                        return Err(bad(t));
                    }
                    return Ok(code);
                }
                let Some(c1) = next_char(t) else {
                    return Err(bad(t));
                };
                if !is_hex(c) || !is_hex(c1) {
                    return Err(bad(t));
                }
                Ok(unhex(c) * 16 + unhex(c1))
            }
            'n' => Ok(u32::from(b'\n')),
            'r' => Ok(u32::from(b'\r')),
            't' => Ok(u32::from(b'\t')),
            'a' => Ok(0x07),
            'f' => Ok(0x0C),
            'v' => Ok(0x0B),
            ch if ch.is_ascii() && !ch.is_ascii_alphanumeric() => Ok(c),
            _ => Err(bad(t)),
        }
    }

    fn parse_cc_character(&self, t: &mut &str, class_start: usize) -> PResult<u32> {
        if t.is_empty() {
            return Err(err(Code::MissingBracket, &self.whole[class_start..], class_start));
        }
        if t.starts_with('\\') {
            return self.parse_escape(t);
        }
        Ok(next_char(t).unwrap_or(0))
    }

    fn parse_cc_range(&self, t: &mut &str, class_start: usize) -> PResult<(u32, u32)> {
        let start = self.offset(t);
        let lo = self.parse_cc_character(t, class_start)?;
        let b = t.as_bytes();
        if b.len() >= 2 && b[0] == b'-' && b[1] != b']' {
            *t = &t[1..];
            let hi = self.parse_cc_character(t, class_start)?;
            if hi < lo {
                return Err(err(Code::BadCharRange, &self.whole[start..self.offset(t)], start));
            }
            return Ok((lo, hi));
        }
        Ok((lo, lo))
    }

    fn parse_char_class(&mut self, t: &mut &str) -> PResult<Rc<Re>> {
        let class_start = self.offset(t);
        let mut ccb = Ccb::default();
        *t = &t[1..];
        let mut negated = false;
        if let Some(rest) = t.strip_prefix('^') {
            *t = rest;
            negated = true;
            if self.flags & CLASS_NL == 0 || self.flags & NEVER_NL != 0 {
                ccb.add_range(u32::from(b'\n'), u32::from(b'\n'));
            }
        }
        let mut first = true;
        while !t.is_empty() && (!t.starts_with(']') || first) {
            // "-" is fine anywhere with Perl extensions (always on here).
            first = false;
            if t.len() > 2 && t.starts_with("[:") {
                // Look for the closing ":]".
                if let Some(q) = t[2..].find(":]") {
                    let name = &t[..q + 4];
                    let Some((ranges, sign)) = posix_group(name) else {
                        return Err(err(Code::BadCharRange, name, self.offset(t)));
                    };
                    add_ugroup(&mut ccb, ranges, sign, self.flags);
                    *t = &t[name.len()..];
                    continue;
                }
            }
            let b = t.as_bytes();
            if t.len() > 2
                && b[0] == b'\\'
                && (b[1] == b'p' || b[1] == b'P')
                && self.parse_unicode_group(t, &mut ccb)?
            {
                continue;
            }
            if let Some((ranges, sign)) = self.maybe_parse_perl_cc_escape(t) {
                add_ugroup(&mut ccb, ranges, sign, self.flags);
                continue;
            }
            let (lo, hi) = self.parse_cc_range(t, class_start)?;
            ccb.add_range_flags(lo, hi, self.flags | CLASS_NL);
        }
        if t.is_empty() {
            return Err(err(Code::MissingBracket, &self.whole[class_start..], class_start));
        }
        *t = &t[1..];
        if negated {
            ccb.negate();
        }
        let mut re = Re::new(Op::CharClass, self.flags & !FOLD_CASE);
        re.ccb = Some(Box::new(ccb));
        Ok(Rc::new(re))
    }

    fn parse_perl_flags(&mut self, s: &mut &str) -> PResult<()> {
        let whole = self.whole;
        let start = self.offset(s);
        let t = *s;
        let b = t.as_bytes();
        // Look-around: reported as such (RE2 issue 468).
        if (b.len() > 3 && (b[2] == b'=' || b[2] == b'!'))
            || (b.len() > 4 && b[2] == b'<' && (b[3] == b'=' || b[3] == b'!'))
        {
            let n = if b[2] == b'<' { 4 } else { 3 };
            return Err(err(Code::BadPerlOp, &t[..n], start));
        }
        // Named captures: (?P<name>expr) and (?<name>expr).
        if (b.len() > 4 && b[2] == b'P' && b[3] == b'<') || (b.len() > 3 && b[2] == b'<') {
            let begin = if b[2] == b'P' { 4 } else { 3 };
            let Some(end) = t[begin..].find('>').map(|e| e + begin) else {
                return Err(err(Code::BadNamedCapture, t, start));
            };
            let capture = &t[..=end];
            let name = &t[begin..end];
            // Letters, marks, digits and connectors: in Latin-1, ASCII ones,
            // _ and the letters ª µ º À-Ö Ø-ö ø-ÿ.
            let valid = |c: char| {
                c.is_ascii_alphanumeric()
                    || c == '_'
                    || matches!(c, '\u{AA}' | '\u{B5}' | '\u{BA}' | '\u{C0}'..='\u{D6}' | '\u{D8}'..='\u{F6}' | '\u{F8}'..='\u{FF}')
            };
            if name.is_empty() || !name.chars().all(valid) {
                return Err(err(Code::BadNamedCapture, capture, start));
            }
            self.do_left_paren(Some(name.to_string()), start)?;
            *s = &t[capture.len()..];
            return Ok(());
        }
        let mut t = &t[2..];
        let mut negated = false;
        let mut sawflags = false;
        let mut nflags = self.flags;
        let bad = |t: &str| err(Code::BadPerlOp, &whole[start..whole.len() - t.len()], start);
        loop {
            let Some(c) = next_char(&mut t) else {
                return Err(bad(t));
            };
            match char::from_u32(c).unwrap_or('\u{FFFD}') {
                'i' => {
                    sawflags = true;
                    if negated {
                        nflags &= !FOLD_CASE;
                    } else {
                        nflags |= FOLD_CASE;
                    }
                }
                'm' => {
                    sawflags = true;
                    if negated {
                        nflags |= ONE_LINE;
                    } else {
                        nflags &= !ONE_LINE;
                    }
                }
                's' => {
                    sawflags = true;
                    if negated {
                        nflags &= !DOT_NL;
                    } else {
                        nflags |= DOT_NL;
                    }
                }
                'U' => {
                    sawflags = true;
                    if negated {
                        nflags &= !NON_GREEDY;
                    } else {
                        nflags |= NON_GREEDY;
                    }
                }
                '-' => {
                    if negated {
                        return Err(bad(t));
                    }
                    negated = true;
                    sawflags = false;
                }
                ':' => {
                    self.do_left_paren_no_capture(start)?;
                    break;
                }
                ')' => break,
                _ => return Err(bad(t)),
            }
        }
        if negated && !sawflags {
            return Err(bad(t));
        }
        self.flags = nflags;
        *s = t;
        Ok(())
    }

    // -- stack operations ---------------------------------------------------

    fn push_regexp(&mut self, mut re: Rc<Re>) {
        self.maybe_concat_string(None, 0);
        if re.op == Op::CharClass
            && re.ccb.is_some()
            && let Some(ccb) = Rc::make_mut(&mut re).ccb.as_deref_mut()
        {
            ccb.remove_above(LATIN1_MAX);
        }
        if re.op == Op::CharClass
            && let Some(ccb) = re.ccb.as_deref()
        {
            if ccb.nrunes == 1 {
                let r = ccb.ranges.keys().next().copied().unwrap_or(0);
                re = Re::literal(r, self.flags);
            } else if ccb.nrunes == 2 {
                let r = ccb.ranges.keys().next().copied().unwrap_or(0);
                if (u32::from(b'A')..=u32::from(b'Z')).contains(&r) && ccb.contains(r + 32) {
                    re = Re::literal(r + 32, self.flags | FOLD_CASE);
                }
            }
        }
        self.stack.push(re);
    }

    fn push_literal(&mut self, r: u32) {
        if self.flags & FOLD_CASE != 0 && is_ascii_letter(r) {
            let mut ccb = Ccb::default();
            add_folded_range_latin1(&mut ccb, r, r);
            let mut re = Re::new(Op::CharClass, self.flags & !FOLD_CASE);
            re.ccb = Some(Box::new(ccb));
            self.push_regexp(Rc::new(re));
            return;
        }
        if self.maybe_concat_string(Some(r), self.flags) {
            return;
        }
        self.push_regexp(Re::literal(r, self.flags));
    }

    fn push_simple_op(&mut self, op: Op) {
        self.push_regexp(Re::rc(op, self.flags));
    }

    fn push_dot(&mut self) {
        if self.flags & DOT_NL != 0 && self.flags & NEVER_NL == 0 {
            self.push_simple_op(Op::AnyChar);
            return;
        }
        let mut ccb = Ccb::default();
        ccb.add_range(0, u32::from(b'\n') - 1);
        ccb.add_range(u32::from(b'\n') + 1, LATIN1_MAX);
        self.push_class(ccb);
    }

    fn top_is_argument(&self) -> bool {
        self.stack.last().is_some_and(|r| !r.is_marker())
    }

    fn push_repeat_op(&mut self, op: Op, opstr: &str, pos: usize, nongreedy: bool) -> PResult<()> {
        if !self.top_is_argument() {
            return Err(err(Code::RepeatArgument, opstr, pos));
        }
        let fl = if nongreedy {
            self.flags ^ NON_GREEDY
        } else {
            self.flags
        };
        let Some(top) = self.stack.last_mut() else {
            return Err(err(Code::RepeatArgument, opstr, pos));
        };
        if op == top.op && fl == top.flags {
            return Ok(());
        }
        if matches!(top.op, Op::Star | Op::Plus | Op::Quest) && fl == top.flags {
            Rc::make_mut(top).op = Op::Star;
            return Ok(());
        }
        let sub = self.pop_finished();
        self.stack.push(Re::with_subs(op, fl, vec![sub]));
        Ok(())
    }

    fn push_repetition(
        &mut self,
        min: i32,
        max: i32,
        opstr: &str,
        pos: usize,
        nongreedy: bool,
    ) -> PResult<()> {
        if (max != -1 && max < min) || min > 1000 || max > 1000 {
            return Err(err(Code::RepeatSize, opstr, pos));
        }
        if !self.top_is_argument() {
            return Err(err(Code::RepeatArgument, opstr, pos));
        }
        let fl = if nongreedy {
            self.flags ^ NON_GREEDY
        } else {
            self.flags
        };
        let sub = self.pop_finished();
        let re = Rc::new(Re::repeat(sub, fl, min, max));
        let ok = !(min >= 2 || max >= 2) || repetition_budget(&re, 1000) != 0;
        self.stack.push(re);
        if !ok {
            return Err(err(Code::RepeatSize, opstr, pos));
        }
        Ok(())
    }

    fn pop_finished(&mut self) -> Rc<Re> {
        let re = self
            .stack
            .pop()
            .unwrap_or_else(|| Re::rc(Op::EmptyMatch, self.flags));
        finish_regexp(re)
    }

    fn do_left_paren(&mut self, name: Option<String>, pos: usize) -> PResult<()> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(err(Code::TooDeep, "", pos));
        }
        let mut re = Re::new(Op::LeftParen, self.flags);
        self.ncap += 1;
        re.cap = self.ncap;
        re.name = name;
        re.pos = pos;
        self.push_regexp(Rc::new(re));
        Ok(())
    }

    fn do_left_paren_no_capture(&mut self, pos: usize) -> PResult<()> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(err(Code::TooDeep, "", pos));
        }
        let mut re = Re::new(Op::LeftParen, self.flags);
        re.cap = -1;
        re.pos = pos;
        self.push_regexp(Rc::new(re));
        Ok(())
    }

    fn do_vertical_bar(&mut self) {
        self.maybe_concat_string(None, 0);
        self.do_concatenation();
        let n = self.stack.len();
        if n >= 2 && self.stack[n - 2].op == Op::VerticalBar {
            if n >= 3 {
                let r1 = self.stack[n - 1].op;
                let r3 = self.stack[n - 3].op;
                let subsumable = |op: Op| matches!(op, Op::Literal | Op::CharClass | Op::AnyChar);
                if r3 == Op::AnyChar && subsumable(r1) {
                    // AnyChar below the bar subsumes r1.
                    self.stack.pop();
                    return;
                }
                if r1 == Op::AnyChar && subsumable(r3) {
                    // r1 replaces r3 below the bar.
                    let r1 = self
                        .stack
                        .pop()
                        .unwrap_or_else(|| Re::rc(Op::AnyChar, self.flags));
                    self.stack[n - 3] = r1;
                    return;
                }
            }
            // Swap r1 below the vertical bar.
            self.stack.swap(n - 1, n - 2);
            return;
        }
        self.push_simple_op(Op::VerticalBar);
    }

    fn do_right_paren(&mut self, pos: usize) -> PResult<()> {
        self.do_alternation();
        let n = self.stack.len();
        if n < 2 || self.stack[n - 2].op != Op::LeftParen {
            return Err(err(Code::UnexpectedParen, ")", pos));
        }
        self.nesting = self.nesting.saturating_sub(1);
        let r1 = self
            .stack
            .pop()
            .unwrap_or_else(|| Re::rc(Op::EmptyMatch, self.flags));
        let paren = self
            .stack
            .pop()
            .unwrap_or_else(|| Re::rc(Op::LeftParen, self.flags));
        self.flags = paren.flags;
        let re = if paren.cap > 0 {
            let mut re = Re::new(Op::Capture, paren.flags);
            re.cap = paren.cap;
            re.name = paren.name.clone();
            re.subs = vec![finish_regexp(r1)];
            Rc::new(re)
        } else {
            r1
        };
        self.push_regexp(re);
        Ok(())
    }

    fn do_finish(&mut self) -> PResult<Rc<Re>> {
        self.do_alternation();
        if self.stack.len() > 1 {
            let pos = self
                .stack
                .iter()
                .rev()
                .find(|r| r.op == Op::LeftParen)
                .map_or(0, |r| r.pos);
            return Err(err(Code::MissingParen, "", pos));
        }
        let re = self
            .stack
            .pop()
            .unwrap_or_else(|| Re::rc(Op::EmptyMatch, self.flags));
        Ok(finish_regexp(re))
    }

    fn do_concatenation(&mut self) {
        if !self.top_is_argument() {
            self.push_regexp(Re::rc(Op::EmptyMatch, self.flags));
        }
        self.do_collapse(Op::Concat);
    }

    fn do_alternation(&mut self) {
        self.do_vertical_bar();
        // The top is now the vertical bar.
        self.stack.pop();
        self.do_collapse(Op::Alternate);
    }

    fn do_collapse(&mut self, op: Op) {
        let start = self
            .stack
            .iter()
            .rposition(|r| r.is_marker())
            .map_or(0, |i| i + 1);
        if self.stack.len() - start == 1 {
            return;
        }
        let items: Vec<Rc<Re>> = self.stack.drain(start..).collect();
        let mut subs = Vec::with_capacity(items.len());
        for item in items {
            if item.op == op {
                subs.extend(item.subs.iter().cloned());
            } else {
                subs.push(finish_regexp(item));
            }
        }
        let re = concat_or_alternate(op, subs, self.flags, true, &mut self.factor);
        self.stack.push(re);
    }

    /// Glues the two literals on top of the stack into a string. With
    /// `Some(r)`, reuses the top for the literal `r` and returns true.
    fn maybe_concat_string(&mut self, r: Option<u32>, flags: u16) -> bool {
        let n = self.stack.len();
        if n < 2 {
            return false;
        }
        let is_lit = |re: &Re| matches!(re.op, Op::Literal | Op::LiteralString);
        let (re1, re2) = (&self.stack[n - 1], &self.stack[n - 2]);
        if !is_lit(re1) || !is_lit(re2) || (re1.flags & FOLD_CASE) != (re2.flags & FOLD_CASE) {
            return false;
        }
        let mut re1 = self.stack.pop().unwrap_or_else(|| Re::rc(Op::EmptyMatch, 0));
        {
            let (re1m, re2m) = (Rc::make_mut(&mut re1), Rc::make_mut(&mut self.stack[n - 2]));
            if re2m.op == Op::Literal {
                re2m.op = Op::LiteralString;
                re2m.runes = vec![re2m.rune];
            }
            if re1m.op == Op::Literal {
                re2m.runes.push(re1m.rune);
            } else {
                re2m.runes.append(&mut re1m.runes);
            }
            if let Some(r) = r {
                re1m.op = Op::Literal;
                re1m.rune = r;
                re1m.flags = flags;
            }
        }
        if r.is_some() {
            self.stack.push(re1);
            return true;
        }
        false
    }
}

/// Turns a class builder into a class.
fn finish_regexp(mut re: Rc<Re>) -> Rc<Re> {
    if re.op == Op::CharClass && re.ccb.is_some() {
        let m = Rc::make_mut(&mut re);
        if let Some(ccb) = m.ccb.take() {
            m.cc = Some(Rc::new(ccb.freeze()));
        }
    }
    re
}

// ---------------------------------------------------------------------------
// Simplification (RE2's CoalesceWalker and SimplifyWalker).

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

fn coalesce(re: &Rc<Re>) -> Rc<Re> {
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

fn simplify(re: &Rc<Re>) -> Rc<Re> {
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

/// RE2's `RequiredPrefix`: for `^literal...`, the regexp after the literal
/// (compiled unanchored: RE2 matches the prefix itself).
fn required_prefix_suffix(re: &Rc<Re>) -> Option<Rc<Re>> {
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

// ---------------------------------------------------------------------------
// The compiler (RE2's Compiler: forward programs, Latin-1).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InstOp {
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
struct Inst {
    op: InstOp,
    out: u32,
    out1: u32,
    lo: u8,
    hi: u8,
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
fn compile_size(re: &Rc<Re>) -> Result<usize, RegexError> {
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

// ---------------------------------------------------------------------------
// Prog::Optimize and Prog::Flatten (only what decides the size).

/// An insertion-ordered set of instruction ids.
struct Workq {
    seen: Vec<bool>,
    order: Vec<u32>,
}

impl Workq {
    fn new(n: usize) -> Workq {
        Workq {
            seen: vec![false; n],
            order: Vec::new(),
        }
    }
    fn add(&mut self, id: u32) {
        if id != 0 && !self.seen[id as usize] {
            self.seen[id as usize] = true;
            self.order.push(id);
        }
    }
}

fn is_match(prog: &[Inst], mut id: u32) -> bool {
    for _ in 0..prog.len() {
        let ip = prog[id as usize];
        match ip.op {
            InstOp::Capture | InstOp::Nop => id = ip.out,
            InstOp::Match => return true,
            _ => return false,
        }
    }
    false
}

/// Follows `id` past Nop instructions.
fn skip_nops(prog: &[Inst], mut j: u32) -> u32 {
    for _ in 0..prog.len() {
        if j == 0 || prog[j as usize].op != InstOp::Nop {
            break;
        }
        j = prog[j as usize].out;
    }
    j
}

fn optimize(prog: &mut [Inst], start: u32) {
    // Skip nops.
    let mut q = Workq::new(prog.len());
    q.add(start);
    let mut i = 0;
    while i < q.order.len() {
        let id = q.order[i] as usize;
        i += 1;
        let j = skip_nops(prog, prog[id].out);
        prog[id].out = j;
        q.add(j);
        if prog[id].op == InstOp::Alt {
            let j = skip_nops(prog, prog[id].out1);
            prog[id].out1 = j;
            q.add(j);
        }
    }
    // Alt with a .* loop on one side and a match on the other: AltMatch.
    let mut q = Workq::new(prog.len());
    q.add(start);
    let mut i = 0;
    while i < q.order.len() {
        let id = q.order[i];
        i += 1;
        let ip = prog[id as usize];
        q.add(ip.out);
        if ip.op == InstOp::Alt {
            q.add(ip.out1);
            let (j, k) = (prog[ip.out as usize], prog[ip.out1 as usize]);
            let any_loop = |x: Inst| x.op == InstOp::ByteRange && x.out == id && x.lo == 0x00 && x.hi == 0xFF;
            if (any_loop(j) && is_match(prog, ip.out1)) || (is_match(prog, ip.out) && any_loop(k)) {
                prog[id as usize].op = InstOp::AltMatch;
            }
        }
    }
}

/// A set of instruction ids that clears in O(1) and iterates in insertion
/// order.
struct Marks {
    stamp: Vec<u32>,
    epoch: u32,
    order: Vec<u32>,
}

impl Marks {
    fn new(n: usize) -> Marks {
        Marks {
            stamp: vec![0; n],
            epoch: 1,
            order: Vec::new(),
        }
    }
    fn clear(&mut self) {
        self.epoch += 1;
        self.order.clear();
    }
    fn contains(&self, id: u32) -> bool {
        self.stamp[id as usize] == self.epoch
    }
    fn insert(&mut self, id: u32) {
        self.stamp[id as usize] = self.epoch;
        self.order.push(id);
    }
}

/// The number of instructions of the flattened program: one list per
/// "root", each holding the non-Alt instructions reachable from it by empty
/// transitions, and a Nop for each other root reached.
fn flattened_size(prog: &[Inst], start: u32, start_unanchored: u32) -> usize {
    let n = prog.len();
    let mut is_root = vec![false; n];
    let mut roots: Vec<u32> = Vec::new();
    fn mark_root(id: u32, is_root: &mut [bool], roots: &mut Vec<u32>) {
        if let Some(r) = is_root.get_mut(id as usize)
            && !*r
        {
            *r = true;
            roots.push(id);
        }
    }
    mark_root(0, &mut is_root, &mut roots);
    mark_root(start_unanchored, &mut is_root, &mut roots);
    mark_root(start, &mut is_root, &mut roots);

    // Successor roots and predecessors.
    let mut preds: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut reachable = Marks::new(n);
    let mut stk = vec![start_unanchored];
    while let Some(mut id) = stk.pop() {
        loop {
            if reachable.contains(id) {
                break;
            }
            reachable.insert(id);
            let ip = prog[id as usize];
            match ip.op {
                InstOp::Alt | InstOp::AltMatch => {
                    for out in [ip.out, ip.out1] {
                        preds.entry(out).or_default().push(id);
                    }
                    stk.push(ip.out1);
                    id = ip.out;
                }
                InstOp::ByteRange | InstOp::Capture | InstOp::EmptyWidth => {
                    mark_root(ip.out, &mut is_root, &mut roots);
                    id = ip.out;
                }
                InstOp::Nop => id = ip.out,
                InstOp::Match | InstOp::Fail => break,
            }
        }
    }

    // Dominator roots, from the highest successor root down.
    let mut sorted = roots.clone();
    sorted.sort_unstable();
    for &root in sorted.iter().skip(1).rev() {
        if root == start_unanchored || root == start {
            continue;
        }
        reachable.clear();
        let mut stk = vec![root];
        while let Some(mut id) = stk.pop() {
            loop {
                if reachable.contains(id) {
                    break;
                }
                reachable.insert(id);
                if id != root && is_root[id as usize] {
                    break;
                }
                let ip = prog[id as usize];
                match ip.op {
                    InstOp::Alt | InstOp::AltMatch => {
                        stk.push(ip.out1);
                        id = ip.out;
                    }
                    InstOp::Nop => id = ip.out,
                    _ => break,
                }
            }
        }
        let order = reachable.order.clone();
        for id in order {
            if let Some(ps) = preds.get(&id)
                && ps.iter().any(|&p| !reachable.contains(p))
            {
                mark_root(id, &mut is_root, &mut roots);
            }
        }
    }

    // Emit (count) the lists.
    let mut size = 0;
    for &root in &roots {
        reachable.clear();
        let mut stk = vec![root];
        while let Some(mut id) = stk.pop() {
            loop {
                if reachable.contains(id) {
                    break;
                }
                reachable.insert(id);
                if id != root && is_root[id as usize] {
                    size += 1; // Nop to the other list
                    break;
                }
                let ip = prog[id as usize];
                match ip.op {
                    InstOp::AltMatch | InstOp::Alt => {
                        if ip.op == InstOp::AltMatch {
                            size += 1;
                        }
                        stk.push(ip.out1);
                        id = ip.out;
                    }
                    InstOp::Nop => id = ip.out,
                    InstOp::ByteRange
                    | InstOp::Capture
                    | InstOp::EmptyWidth
                    | InstOp::Match
                    | InstOp::Fail => {
                        size += 1;
                        break;
                    }
                }
            }
        }
    }
    size
}

// ---------------------------------------------------------------------------
// Literal prefixes.

/// The runes every match of `re` starts with, and whether `re` matches
/// exactly those runes (so that what follows extends the prefix).
fn required_runes(re: &Re, depth: usize) -> (Vec<u32>, bool) {
    if depth > 4 * MAX_NESTING {
        return (Vec::new(), false);
    }
    let fixed = |r: u32, flags: u16| flags & FOLD_CASE == 0 || !is_ascii_letter(r);
    match re.op {
        Op::Literal => {
            if fixed(re.rune, re.flags) {
                (vec![re.rune], true)
            } else {
                (Vec::new(), false)
            }
        }
        Op::LiteralString => {
            let k = re.runes.iter().take_while(|&&r| fixed(r, re.flags)).count();
            (re.runes[..k].to_vec(), k == re.runes.len())
        }
        Op::Concat => {
            let mut acc = Vec::new();
            for s in &re.subs {
                let (p, exact) = required_runes(s, depth + 1);
                acc.extend(p);
                if !exact {
                    return (acc, false);
                }
            }
            (acc, true)
        }
        Op::Alternate => {
            let mut it = re.subs.iter().map(|s| required_runes(s, depth + 1));
            let Some((mut common, mut exact)) = it.next() else {
                return (Vec::new(), false);
            };
            for (p, e) in it {
                let same = common.iter().zip(&p).take_while(|(a, b)| a == b).count();
                exact = exact && e && same == common.len() && same == p.len();
                common.truncate(same);
            }
            (common, exact)
        }
        Op::Capture => required_runes(&re.subs[0], depth + 1),
        Op::Plus => (required_runes(&re.subs[0], depth + 1).0, false),
        Op::Repeat => {
            if re.max == 0 {
                return (Vec::new(), true);
            }
            if re.min <= 0 {
                return (Vec::new(), false);
            }
            let (p, exact) = required_runes(&re.subs[0], depth + 1);
            if !exact {
                return (p, false);
            }
            let mut acc = Vec::new();
            for _ in 0..re.min {
                acc.extend_from_slice(&p);
            }
            (acc, re.min == re.max)
        }
        Op::EmptyMatch
        | Op::BeginLine
        | Op::EndLine
        | Op::BeginText
        | Op::EndText
        | Op::WordBoundary
        | Op::NoWordBoundary => (Vec::new(), true),
        _ => (Vec::new(), false),
    }
}

/// For patterns RE2 cannot parse: the literal text before the first
/// metacharacter, less a last character a quantifier may remove; "" when a
/// top-level `|` may make the prefix wrong.
fn fallback_prefix(pattern: &str) -> String {
    // Any `|` outside brackets at depth 0 (or unbalanced parentheses).
    let mut depth: i64 = 0;
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' if !in_class => {
                in_class = true;
                // A leading ] (or ^]) is a literal.
                if chars.peek() == Some(&'^') {
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    chars.next();
                }
            }
            ']' if in_class => in_class = false,
            '(' if !in_class => depth += 1,
            ')' if !in_class => depth -= 1,
            '|' if !in_class && depth <= 0 => return String::new(),
            _ => {}
        }
    }
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    if chars.peek() == Some(&'^') {
        chars.next();
    }
    while let Some(c) = chars.next() {
        let lit = match c {
            '\\' => match chars.peek() {
                Some(&n) if n.is_ascii_punctuation() => {
                    chars.next();
                    n
                }
                _ => break,
            },
            '.' | '[' | ']' | '(' | ')' | '{' | '}' | '|' | '*' | '+' | '?' | '^' | '$' => {
                if matches!(c, '?' | '*' | '{') {
                    out.pop();
                }
                return out;
            }
            c => c,
        };
        out.push(lit);
    }
    out
}
// ---------------------------------------------------------------------------
// Unicode groups for `\p{...}`, from RE2's re2/unicode_groups.cc (Unicode
// 15.1), cut at 0xFF: in Latin-1 mode RE2 drops every rune above.

#[rustfmt::skip]
static UNICODE_GROUPS: &[(&str, &[(u32, u32)])] = &[
    ("Adlam", &[]),
    ("Ahom", &[]),
    ("Anatolian_Hieroglyphs", &[]),
    ("Arabic", &[]),
    ("Armenian", &[]),
    ("Avestan", &[]),
    ("Balinese", &[]),
    ("Bamum", &[]),
    ("Bassa_Vah", &[]),
    ("Batak", &[]),
    ("Bengali", &[]),
    ("Bhaiksuki", &[]),
    ("Bopomofo", &[]),
    ("Brahmi", &[]),
    ("Braille", &[]),
    ("Buginese", &[]),
    ("Buhid", &[]),
    ("C", &[(0, 31), (127, 159), (173, 173)]),
    ("Canadian_Aboriginal", &[]),
    ("Carian", &[]),
    ("Caucasian_Albanian", &[]),
    ("Cc", &[(0, 31), (127, 159)]),
    ("Cf", &[(173, 173)]),
    ("Chakma", &[]),
    ("Cham", &[]),
    ("Cherokee", &[]),
    ("Chorasmian", &[]),
    ("Co", &[]),
    ("Common", &[(0, 64), (91, 96), (123, 169), (171, 185), (187, 191), (215, 215), (247, 247)]),
    ("Coptic", &[]),
    ("Cs", &[]),
    ("Cuneiform", &[]),
    ("Cypriot", &[]),
    ("Cypro_Minoan", &[]),
    ("Cyrillic", &[]),
    ("Deseret", &[]),
    ("Devanagari", &[]),
    ("Dives_Akuru", &[]),
    ("Dogra", &[]),
    ("Duployan", &[]),
    ("Egyptian_Hieroglyphs", &[]),
    ("Elbasan", &[]),
    ("Elymaic", &[]),
    ("Ethiopic", &[]),
    ("Georgian", &[]),
    ("Glagolitic", &[]),
    ("Gothic", &[]),
    ("Grantha", &[]),
    ("Greek", &[]),
    ("Gujarati", &[]),
    ("Gunjala_Gondi", &[]),
    ("Gurmukhi", &[]),
    ("Han", &[]),
    ("Hangul", &[]),
    ("Hanifi_Rohingya", &[]),
    ("Hanunoo", &[]),
    ("Hatran", &[]),
    ("Hebrew", &[]),
    ("Hiragana", &[]),
    ("Imperial_Aramaic", &[]),
    ("Inherited", &[]),
    ("Inscriptional_Pahlavi", &[]),
    ("Inscriptional_Parthian", &[]),
    ("Javanese", &[]),
    ("Kaithi", &[]),
    ("Kannada", &[]),
    ("Katakana", &[]),
    ("Kawi", &[]),
    ("Kayah_Li", &[]),
    ("Kharoshthi", &[]),
    ("Khitan_Small_Script", &[]),
    ("Khmer", &[]),
    ("Khojki", &[]),
    ("Khudawadi", &[]),
    ("L", &[(65, 90), (97, 122), (170, 170), (181, 181), (186, 186), (192, 214), (216, 246), (248, 255)]),
    ("Lao", &[]),
    ("Latin", &[(65, 90), (97, 122), (170, 170), (186, 186), (192, 214), (216, 246), (248, 255)]),
    ("Lepcha", &[]),
    ("Limbu", &[]),
    ("Linear_A", &[]),
    ("Linear_B", &[]),
    ("Lisu", &[]),
    ("Ll", &[(97, 122), (181, 181), (223, 246), (248, 255)]),
    ("Lm", &[]),
    ("Lo", &[(170, 170), (186, 186)]),
    ("Lt", &[]),
    ("Lu", &[(65, 90), (192, 214), (216, 222)]),
    ("Lycian", &[]),
    ("Lydian", &[]),
    ("M", &[]),
    ("Mahajani", &[]),
    ("Makasar", &[]),
    ("Malayalam", &[]),
    ("Mandaic", &[]),
    ("Manichaean", &[]),
    ("Marchen", &[]),
    ("Masaram_Gondi", &[]),
    ("Mc", &[]),
    ("Me", &[]),
    ("Medefaidrin", &[]),
    ("Meetei_Mayek", &[]),
    ("Mende_Kikakui", &[]),
    ("Meroitic_Cursive", &[]),
    ("Meroitic_Hieroglyphs", &[]),
    ("Miao", &[]),
    ("Mn", &[]),
    ("Modi", &[]),
    ("Mongolian", &[]),
    ("Mro", &[]),
    ("Multani", &[]),
    ("Myanmar", &[]),
    ("N", &[(48, 57), (178, 179), (185, 185), (188, 190)]),
    ("Nabataean", &[]),
    ("Nag_Mundari", &[]),
    ("Nandinagari", &[]),
    ("Nd", &[(48, 57)]),
    ("New_Tai_Lue", &[]),
    ("Newa", &[]),
    ("Nko", &[]),
    ("Nl", &[]),
    ("No", &[(178, 179), (185, 185), (188, 190)]),
    ("Nushu", &[]),
    ("Nyiakeng_Puachue_Hmong", &[]),
    ("Ogham", &[]),
    ("Ol_Chiki", &[]),
    ("Old_Hungarian", &[]),
    ("Old_Italic", &[]),
    ("Old_North_Arabian", &[]),
    ("Old_Permic", &[]),
    ("Old_Persian", &[]),
    ("Old_Sogdian", &[]),
    ("Old_South_Arabian", &[]),
    ("Old_Turkic", &[]),
    ("Old_Uyghur", &[]),
    ("Oriya", &[]),
    ("Osage", &[]),
    ("Osmanya", &[]),
    ("P", &[(33, 35), (37, 42), (44, 47), (58, 59), (63, 64), (91, 93), (95, 95), (123, 123), (125, 125), (161, 161), (167, 167), (171, 171), (182, 183), (187, 187), (191, 191)]),
    ("Pahawh_Hmong", &[]),
    ("Palmyrene", &[]),
    ("Pau_Cin_Hau", &[]),
    ("Pc", &[(95, 95)]),
    ("Pd", &[(45, 45)]),
    ("Pe", &[(41, 41), (93, 93), (125, 125)]),
    ("Pf", &[(187, 187)]),
    ("Phags_Pa", &[]),
    ("Phoenician", &[]),
    ("Pi", &[(171, 171)]),
    ("Po", &[(33, 35), (37, 39), (42, 42), (44, 44), (46, 47), (58, 59), (63, 64), (92, 92), (161, 161), (167, 167), (182, 183), (191, 191)]),
    ("Ps", &[(40, 40), (91, 91), (123, 123)]),
    ("Psalter_Pahlavi", &[]),
    ("Rejang", &[]),
    ("Runic", &[]),
    ("S", &[(36, 36), (43, 43), (60, 62), (94, 94), (96, 96), (124, 124), (126, 126), (162, 166), (168, 169), (172, 172), (174, 177), (180, 180), (184, 184), (215, 215), (247, 247)]),
    ("Samaritan", &[]),
    ("Saurashtra", &[]),
    ("Sc", &[(36, 36), (162, 165)]),
    ("Sharada", &[]),
    ("Shavian", &[]),
    ("Siddham", &[]),
    ("SignWriting", &[]),
    ("Sinhala", &[]),
    ("Sk", &[(94, 94), (96, 96), (168, 168), (175, 175), (180, 180), (184, 184)]),
    ("Sm", &[(43, 43), (60, 62), (124, 124), (126, 126), (172, 172), (177, 177), (215, 215), (247, 247)]),
    ("So", &[(166, 166), (169, 169), (174, 174), (176, 176)]),
    ("Sogdian", &[]),
    ("Sora_Sompeng", &[]),
    ("Soyombo", &[]),
    ("Sundanese", &[]),
    ("Syloti_Nagri", &[]),
    ("Syriac", &[]),
    ("Tagalog", &[]),
    ("Tagbanwa", &[]),
    ("Tai_Le", &[]),
    ("Tai_Tham", &[]),
    ("Tai_Viet", &[]),
    ("Takri", &[]),
    ("Tamil", &[]),
    ("Tangsa", &[]),
    ("Tangut", &[]),
    ("Telugu", &[]),
    ("Thaana", &[]),
    ("Thai", &[]),
    ("Tibetan", &[]),
    ("Tifinagh", &[]),
    ("Tirhuta", &[]),
    ("Toto", &[]),
    ("Ugaritic", &[]),
    ("Vai", &[]),
    ("Vithkuqi", &[]),
    ("Wancho", &[]),
    ("Warang_Citi", &[]),
    ("Yezidi", &[]),
    ("Yi", &[]),
    ("Z", &[(32, 32), (160, 160)]),
    ("Zanabazar_Square", &[]),
    ("Zl", &[]),
    ("Zp", &[]),
    ("Zs", &[(32, 32), (160, 160)]),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes the real Envoy 1.40 reports (runtime error level 0 makes it
    /// print every program size).
    #[test]
    fn program_sizes_match_envoy() {
        let cases: &[(&str, usize)] = &[
            ("a", 5),
            ("^abc", 4),
            (".*", 6),
            ("[^a]", 6),
            ("é", 6),
            ("[é]", 6),
            ("(?i)k", 5),
            ("\\pL", 11),
            ("\\P{L}", 12),
            ("\\p{Greek}", 1),
            ("[^\\x00-\\xff]", 1),
            ("(?s).", 5),
            ("/api/v[0-9]+/users/[a-z0-9-]+", 23),
            ("a{98}$", 102),
            ("^a{98}", 100),
            ("a{99}", 103),
            ("a{1000}", 1004),
        ];
        for &(pattern, size) in cases {
            assert_eq!(program_size(pattern), Ok(size), "{pattern}");
        }
    }

    #[test]
    fn envoy_limit() {
        assert_eq!(check("^a{98}"), Ok(()));
        assert_eq!(
            check("a{99}"),
            Err(RegexError::ProgramSize {
                size: 103,
                limit: 100
            })
        );
        let e = check("a{1000}").expect_err("too large");
        assert_eq!(
            e.to_string(),
            "RE2 program size 1004 exceeds Envoy's limit of 100"
        );
        assert!(check("(abc|def|ghi|jkl){1,30}").is_err());
        assert!(check("[a-z]{20}").is_ok());
        assert!(check("/api/v[0-9]+/users/[a-z0-9-]+").is_ok());
        // A lower bound when the expansion is huge.
        let e = check("a{1000}b{1000}c{1000}").expect_err("too large");
        assert!(matches!(e, RegexError::ProgramTooLarge { .. }), "{e}");
    }

    #[test]
    fn re2_syntax() {
        for ok in [
            "(?i)abc",
            "(?s).",
            "(?m)^a$",
            "(?U)a*",
            "(?i-s:a)",
            "(?P<name>a)",
            "(?<name>a)",
            "\\Qa.b\\E",
            "\\Qa.b",
            "\\C",
            "\\pL",
            "\\p{Greek}",
            "\\PN",
            "[[:alpha:]]",
            "[[:^space:]]",
            "\\b\\B\\A\\z",
            "a{1000}b",
            "a{,5}",
            "a{",
            "\\x41\\x{ff}\\101\\0",
            "[]a]",
            "a|",
            "()",
            "\\_",
            "\\012",
        ] {
            let r = check(ok);
            assert!(!matches!(r, Err(RegexError::Syntax { .. })), "{ok}: {r:?}");
        }
        for (bad, message) in [
            (
                "/a/(b)\\1",
                "backreference \\1 is not supported by RE2 at offset 6",
            ),
            ("a\\Z", "\\Z is not supported by RE2 (use \\z or $) at offset 1"),
            ("\\Ga", "\\G is not supported by RE2 at offset 0"),
            ("a(?=b)", "lookahead (?= is not supported by RE2"),
            ("a(?!b)", "negative lookahead (?! is not supported by RE2"),
            ("(?<=a)b", "lookbehind (?<= is not supported by RE2"),
            ("(?<!a)b", "negative lookbehind (?<! is not supported by RE2"),
            ("(?>a)", "atomic group (?> is not supported by RE2"),
            ("(?(1)a|b)", "conditional (?( is not supported by RE2"),
            ("(?R)", "recursion (?R is not supported by RE2"),
            ("(?x)a", "group syntax (?x is not supported by RE2"),
            ("a++", "repetition operator ++ is not supported by RE2"),
            ("a*+", "repetition operator *+ is not supported by RE2"),
            ("a?+", "repetition operator ?+ is not supported by RE2"),
            ("a**", "repetition operator ** is not supported by RE2"),
            ("a{1001}", "invalid repetition size {1001}"),
            ("(a{100}){11}", "invalid repetition size {11}"),
            ("\\x{100}", "invalid escape sequence \\x{100 at offset 0"),
            ("\\777", "invalid escape sequence \\777"),
            ("\\8", "backreference \\8 is not supported by RE2"),
            ("\\q", "invalid escape sequence \\q"),
            ("\\é", "invalid escape sequence \\"),
            ("\\p{greek}", "invalid character class or range \\p{greek}"),
            ("[z-a]", "invalid character class or range z-a"),
            ("[[:foo:]]", "invalid character class or range [:foo:]"),
            (
                "[a",
                "missing ] for the character class starting here at offset 0",
            ),
            ("/(a", "missing ) for the group starting here at offset 1"),
            ("a)", "unexpected ) at offset 1"),
            ("a\\", "trailing \\ at offset 1"),
            ("*a", "repetition operator * has nothing to repeat at offset 0"),
            ("(?P<a-b>x)", "invalid named capture group (?P<a-b>"),
            ("(?P<é>x)", "invalid named capture group"),
            ("(?P=n)", "group syntax (?P"),
        ] {
            let e = check(bad).expect_err(bad).to_string();
            assert!(e.starts_with(message), "{bad}: {e}");
        }
        assert_eq!(check(""), Err(RegexError::Empty));
    }

    #[test]
    fn literal_prefixes() {
        for (pattern, prefix) in [
            ("/api/v[0-9]+", "/api/v"),
            ("/api/v[0-9]+/users/[a-z0-9-]+", "/api/v"),
            ("/foo(bar|baz)", "/fooba"),
            ("/foo(bar|qux)", "/foo"),
            ("/a.b", "/a"),
            ("/x?", "/"),
            ("(/a|/b)", "/"),
            ("/ab?", "/a"),
            ("/ab*", "/a"),
            ("/ab+", "/ab"),
            ("/ab{0,3}", "/a"),
            ("/ab{2,3}", "/abb"),
            ("/(?:ab){2}c", "/ababc"),
            ("/(?:ab){2,}c", "/abab"),
            ("/a{0}b", "/b"),
            ("^/api/.*$", "/api/"),
            ("\\A/api\\z", "/api"),
            ("/api\\b/x", "/api/x"),
            ("(?i)/api", "/"),
            ("/caf(?i)E", "/caf"),
            ("/caf(?i:E)/x", "/caf"),
            ("/(?i)1-2", "/1-2"),
            ("\\Q/a.b\\E.*", "/a.b"),
            ("/a\\.b\\/c", "/a.b/c"),
            ("/\\x41\\x{42}", "/AB"),
            ("/[a]", "/a"),
            ("/[.]x", "/.x"),
            ("/[Aa]x", "/"),
            ("/é", "/é"),
            ("/é+", "/é"),
            ("/é?", "/"),
            ("/(é|è)", "/"),
            ("/a|/b", "/"),
            ("/api/v1|/api/v2", "/api/v"),
            ("a|b", ""),
            ("", ""),
            (".*", ""),
            ("/a$b", "/ab"),
            ("/a(?:)b", "/ab"),
            // Not RE2: the text before the first metacharacter, less a
            // character a quantifier may remove.
            ("/foo(?=bar)", "/foo"),
            ("/foo/(a)\\1", "/foo/"),
            ("/a++", "/a"),
            ("/ab?+", "/a"),
            ("/a{1001}", "/"),
            ("/api/v1/[", "/api/v1/"),
            ("/a\\.b(", "/a.b"),
            ("/api|(?=x)", ""),
            ("(?x)/api", ""),
            ("/a\\Z", "/a"),
        ] {
            assert_eq!(literal_prefix(pattern), prefix, "{pattern}");
        }
    }

    /// A minimized DFA of `\A(?:pattern)\z` over bytes, as RE2 in Latin-1
    /// mode reads ASCII patterns; `None` when regex-automata cannot build it.
    fn dfa(pattern: &str) -> Option<regex_automata::dfa::dense::DFA<Vec<u32>>> {
        use regex_automata::dfa::{StartKind, dense};
        use regex_automata::util::syntax;
        dense::Builder::new()
            .syntax(syntax::Config::new().unicode(false).utf8(false))
            .configure(
                dense::Config::new()
                    .minimize(true)
                    .start_kind(StartKind::Anchored),
            )
            .build(&format!("\\A(?:{pattern})\\z"))
            .ok()
    }

    /// Every string the pattern matches in full starts with `prefix`: from
    /// the start, no byte but the next of the prefix leads anywhere, and no
    /// shorter string matches.
    fn assert_conservative(pattern: &str, prefix: &str) {
        use regex_automata::dfa::Automaton;
        use regex_automata::util::start;
        let Some(dfa) = dfa(pattern) else { return };
        let Ok(mut s) = dfa.start_state(&start::Config::new().anchored(regex_automata::Anchored::Yes)) else {
            return;
        };
        for &b in prefix.as_bytes() {
            assert!(
                !dfa.is_match_state(dfa.next_eoi_state(s)),
                "{pattern:?} matches less than {prefix:?}"
            );
            for c in 0..=255u8 {
                if c != b {
                    let t = dfa.next_state(s, c);
                    assert!(
                        dfa.is_dead_state(t),
                        "{pattern:?} matches something not starting with {prefix:?}"
                    );
                }
            }
            s = dfa.next_state(s, b);
        }
    }

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    /// Random ASCII patterns built from pieces regex-automata reads like RE2.
    fn structured(rng: &mut Rng, depth: u32) -> String {
        const ATOMS: &[&str] = &[
            "a", "b", "/", "-", "ab", "/api", "v1", "\\.", "[0-9]", "[a-z]", "[^/]", "\\d", "\\w", ".",
            "[ab]", "x", "(?i:k)", "\\b", "^", "$",
        ];
        const QUANTS: &[&str] = &["*", "+", "?", "{2}", "{0,3}", "{1,2}", "{2,}", "*?", "??"];
        let mut s = match rng.below(10) {
            0..=3 => (0..1 + rng.below(3)).map(|_| rng.pick(ATOMS)).collect(),
            4..=6 if depth < 3 => (0..2).map(|_| structured(rng, depth + 1)).collect(),
            7..=8 if depth < 3 => {
                let alts: Vec<String> = (0..2 + rng.below(2))
                    .map(|_| structured(rng, depth + 1))
                    .collect();
                format!("({})", alts.join("|"))
            }
            _ => rng.pick(ATOMS).to_string(),
        };
        if rng.below(3) == 0 {
            s = format!("(?:{s}){}", rng.pick(QUANTS));
        }
        s
    }

    #[test]
    fn literal_prefix_is_conservative() {
        for pattern in [
            "/api/v[0-9]+",
            "/foo(bar|baz)",
            "/a.b",
            "/x?",
            "(/a|/b)",
            "/ab?",
            "/ab{2,3}",
            "/(?:ab){2,}c",
            "/a{0}b",
            "^/api/.*$",
            "(?i)/api",
            "/caf(?i)E",
            "/api/v1|/api/v2",
            "/a(?:)b",
            "/api\\b/x",
            "(?:/a|/a)+b",
            "/a(?:bc|bd)*",
            "/[Aa]x",
            "/(?:a?){3}b",
        ] {
            assert_conservative(pattern, &literal_prefix(pattern));
        }
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut checked = 0;
        for _ in 0..400 {
            let mut p = structured(&mut rng, 0);
            if rng.below(2) == 0 {
                p = format!("/{}{p}", rng.pick(&["api/", "v1/", "a", ""]));
            }
            if dfa(&p).is_some() {
                checked += 1;
                assert_conservative(&p, &literal_prefix(&p));
            }
        }
        assert!(checked > 250, "only {checked} patterns checked");
    }

    #[test]
    fn never_panics() {
        const PIECES: &[&str] = &[
            "a", "é", "☃", "\u{0}", "\n", "(", ")", "(?", "(?P<", ">", "[", "]", "^", "$", "|", "*", "+",
            "?", "{", "}", ",", "1", "0", "9", "1000", "1001", "\\", "\\p", "\\P", "{L}", "{Greek}", "\\Q",
            "\\E", "\\x", "\\x{", "ff", "\\C", "\\b", "\\z", "\\1", "\\d", ".", "-", ":", "[:", ":]",
            "alpha", "i", "s", "m", "U", "=", "!", "<", "'", "#",
        ];
        let mut rng = Rng(42);
        for _ in 0..20_000 {
            let n = 1 + rng.below(24);
            let p: String = (0..n).map(|_| rng.pick(PIECES)).collect();
            let _ = check(&p);
            let prefix = literal_prefix(&p);
            assert!(p.len() + 8 >= prefix.len());
        }
        // Deep and large inputs stay bounded (and fail safe).
        for p in [
            "(".repeat(5000),
            ")".repeat(5000),
            format!("{}a{}", "(".repeat(1000), ")".repeat(1000)),
            format!("{}a{}", "(?:".repeat(150), ")*".repeat(150)),
            "a{1000}".repeat(50),
            "(?:a{0,1000})".repeat(3),
            "((a{10}){10}){10}".to_string(),
            "[a-z]{1000}".to_string(),
            "\\d\\d\\d\\d\\d\\d\\d\\d\\dx|".repeat(300),
            format!("{}x|{}y", "\\d".repeat(400), "\\d".repeat(400)),
            "x*".repeat(3000),
            "(?i)\\P{L}".repeat(200),
        ] {
            let _ = check(&p);
            let _ = literal_prefix(&p);
        }
        assert!(check(&"(".repeat(300)).is_err());
    }
}
