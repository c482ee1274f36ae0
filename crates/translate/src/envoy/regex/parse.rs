//! The parser, after `re2/parse.cc` (`Regexp::Parse` and its
//! `ParseState`), with Envoy's flags and Latin-1 input.
//!
//! Checks RE2's syntax: escapes, classes and ranges, Perl flags and named
//! groups, repetition operators and sizes (RE2's limit of 1000 and its
//! `RepetitionWalker` budget on nested repetitions), parenthesis balance and
//! our nesting bound. Its errors carry RE2's status codes (`re2/regexp.h`)
//! and RE2's messages, mapped to [`RegexError::Syntax`] with the offset in
//! the original pattern. Alternations are factored on the way
//! ([`super::factor`]).

use std::rc::Rc;

use super::factor::FactorDepth;
use super::perl_groups::{perl_group, posix_group};
use super::regexp::{
    CLASS_NL, Ccb, DOT_NL, ENVOY_FLAGS, FOLD_CASE, LATIN1_MAX, NEVER_NL, NON_GREEDY, ONE_LINE, Op, PERL_B,
    PERL_CLASSES, PERL_X, RUNE_MAX, Re, UNICODE_GROUPS_FLAG, WAS_DOLLAR, add_folded_range_latin1,
    concat_or_alternate, is_ascii_letter,
};
use super::unicode_groups::unicode_group;
use super::{MAX_NESTING, RegexError};

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
pub(super) struct ParseError {
    code: Code,
    /// The offending text, as RE2 reports it.
    arg: String,
    /// Byte offset of the problem in the pattern.
    offset: usize,
}

impl ParseError {
    pub(super) fn into_regex_error(self) -> RegexError {
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

pub(super) type PResult<T> = Result<T, ParseError>;

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
pub(super) fn parse(pattern: &str) -> PResult<Rc<Re>> {
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
