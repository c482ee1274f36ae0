//! Literal prefixes (ours, not RE2's): the text every match of a pattern
//! starts with, for the guard that replaces a route whose regex Envoy
//! would refuse. From the parsed tree when the pattern parses
//! ([`required_runes`]), else from the text before its first metacharacter
//! ([`fallback_prefix`]). Conservative: when unsure it stops earlier.

use super::MAX_NESTING;
use super::regexp::{FOLD_CASE, Op, Re, is_ascii_letter};

/// The runes every match of `re` starts with, and whether `re` matches
/// exactly those runes (so that what follows extends the prefix).
pub(super) fn required_runes(re: &Re, depth: usize) -> (Vec<u32>, bool) {
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
pub(super) fn fallback_prefix(pattern: &str) -> String {
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
