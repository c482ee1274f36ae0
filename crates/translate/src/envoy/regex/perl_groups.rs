//! The Perl (`\d \s \w`) and POSIX (`[:alpha:]`) classes, after
//! `re2/perl_groups.cc`: ASCII-only in RE2, negated forms included.

const PERL_D: &[(u32, u32)] = &[(0x30, 0x39)];
const PERL_S: &[(u32, u32)] = &[(0x9, 0xa), (0xc, 0xd), (0x20, 0x20)];
const PERL_W: &[(u32, u32)] = &[(0x30, 0x39), (0x41, 0x5a), (0x5f, 0x5f), (0x61, 0x7a)];

/// `\d \D \s \S \w \W` (ASCII-only in RE2).
pub(super) fn perl_group(c: u8) -> Option<(&'static [(u32, u32)], i32)> {
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
pub(super) fn posix_group(name: &str) -> Option<(&'static [(u32, u32)], i32)> {
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
