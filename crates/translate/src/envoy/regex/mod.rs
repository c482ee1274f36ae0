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
//! invalid escape, `\pL` is the letters up to U+00FF, `.` is one byte).
//!
//! One file per RE2 source file it ports, in the order a pattern goes
//! through them:
//!
//! * `regexp` (`re2/regexp.h`, `regexp.cc`): the parsed tree (`Re`), its
//!   flags, character classes (`CharClassBuilder`) and `RequiredPrefix`;
//! * `parse` (`re2/parse.cc`): the parser, with its errors (RE2's status
//!   codes) and the Perl, POSIX and Unicode classes it looks up in
//!   `perl_groups` (`re2/perl_groups.cc`) and `unicode_groups`
//!   (`re2/unicode_groups.cc`);
//! * `factor` (`re2/parse.cc`, `FactorAlternation`): `abc|abd` becomes
//!   `ab[cd]` while parsing, which changes the program size;
//! * `simplify` (`re2/simplify.cc`): adjacent repeats of one atom are
//!   coalesced (`a+a*` is `a{1,}`), `x{n,m}` becomes n copies of `x` and
//!   m-n nested `(x)?`;
//! * `compile` (`re2/compile.cc`): one instruction per literal byte and
//!   per byte range of a class, one `Alt` per alternative, class range and
//!   repetition, two per capture group; a required literal prefix after `^`
//!   is taken out of the program, an unanchored program gets a `.*?` loop;
//! * `prog` (`re2/prog.cc`, `Prog::Optimize` and `Prog::Flatten`):
//!   `ProgramSize()`, which Envoy compares, is the size of the flattened
//!   program (the `Alt`s disappear, each instruction reachable from several
//!   lists is copied);
//! * `prefix` (not RE2's): the literal prefix for [`literal_prefix`].
//!
//! The sizes are RE2's own: the test `regex_oracle` compares them with the
//! sizes the real Envoy reports. Where the port gives up it rejects, never
//! accepts: groups nested more than 200 deep, patterns whose expanded
//! repetitions certainly exceed the limit many times over (reported as a
//! lower bound). A false rejection costs one route (it becomes a 500 guard);
//! a false acceptance would make Envoy NACK every route of the listener. If
//! a new Envoy changes RE2's options, `regex_oracle` fails.

mod compile;
mod factor;
mod parse;
mod perl_groups;
mod prefix;
mod prog;
mod regexp;
mod simplify;
mod unicode_groups;

use compile::compile_size;
use parse::parse;
use prefix::{fallback_prefix, required_runes};

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
