//! `translate::envoy::regex::check` against the real Envoy (`envoy --mode
//! validate`), the oracle for what Envoy NACKs.
//!
//! A corpus of hand-written patterns (realistic paths, every RE2 feature and
//! non-feature, sizes around the limit of 100) and a deterministic generated
//! one. Patterns `check` accepts are validated together in one bootstrap (a
//! rejected batch is bisected to find the culprits); each pattern `check`
//! rejects is validated alone. The test fails on any pattern `check`
//! accepts and Envoy rejects (a NACK), on more than 5% false rejections, and
//! when the program size `check` computes differs from the size Envoy
//! reports for a pattern it rejects as too large.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use translate::envoy::regex::{self, RegexError};

/// Hand-written patterns.
const CORPUS: &[&str] = &[
    r#"/api/v[0-9]+/users/[a-z0-9-]+"#,
    r#"/foo(bar|baz)"#,
    r#"/a.b"#,
    r#"/x?"#,
    r#"(/a|/b)"#,
    r#"/ab?"#,
    r#"^/api/.*$"#,
    r#"/static/.*\.(css|js|png|jpg|svg)"#,
    r#"/users/[0-9]{1,10}"#,
    r#"/users/\d+/posts/\d+"#,
    r#"/v[12]/.*"#,
    r#"/(en|fr|de|es|it|nl|pt|ja|zh|ko)/docs/.*"#,
    r#"/[a-zA-Z0-9_-]+/settings"#,
    r#"/files/[^/]+/download"#,
    r#"(?i)/api/v1/.*"#,
    r#"/api/(?P<version>v[0-9]+)/items"#,
    r#"/api/(?<version>v[0-9]+)/items"#,
    r#"/\Q.well-known\E/acme-challenge/[A-Za-z0-9_-]+"#,
    r#"/health(z)?"#,
    r#"/a++"#,
    r#"/a*+"#,
    r#"/a?+"#,
    r#"/(?=foo)"#,
    r#"/(?!foo)"#,
    r#"/(?<=foo)bar"#,
    r#"/(?<!foo)bar"#,
    r#"/(?>foo)"#,
    r#"/foo\Z"#,
    r#"/foo\z"#,
    r#"\Gfoo"#,
    r#"(a)\1"#,
    r#"a{1001}"#,
    r#"a{1000}"#,
    r#"a{0,1000}"#,
    r#"a{2,1000}"#,
    r#"(a{10}){100}"#,
    r#"(a{10}){101}"#,
    r#"((a{2}){2}){250}"#,
    r#"(?x) a"#,
    r#"(?i)abc"#,
    r#"(?s).*"#,
    r#"(?m)^a$"#,
    r#"(?U)a*"#,
    r#"(?i:a)b"#,
    r#"(?-i)a"#,
    r#"(?i-s)a"#,
    r#"(?)"#,
    r#"(?-)"#,
    r#"(?i-)"#,
    r#"(?P<name>a)"#,
    r#"(?P<na-me>a)"#,
    r#"(?P<>a)"#,
    r#"(?P<name"#,
    r#"(?P=name)"#,
    r#"(?'n'a)"#,
    r#"(?#comment)"#,
    r#"(?(1)a|b)"#,
    r#"(?R)"#,
    r#"(?1)"#,
    r#"\C"#,
    r#"\Qa.b\E"#,
    r#"\Qa.b"#,
    r#"\pL"#,
    r#"\p{L}"#,
    r#"\p{Lu}"#,
    r#"\p{Greek}"#,
    r#"\p{greek}"#,
    r#"\p{Latin}"#,
    r#"\p{Han}"#,
    r#"\PL"#,
    r#"\P{^L}"#,
    r#"\p{^L}"#,
    r#"\pN"#,
    r#"\p{Any}"#,
    r#"\P{Any}"#,
    r#"\p{Foo}"#,
    r#"\pX"#,
    r#"[[:alpha:]]"#,
    r#"[[:^alpha:]]"#,
    r#"[[:word:]]"#,
    r#"[[:foo:]]"#,
    r#"[[:alpha:]"#,
    r#"[[:alpha]"#,
    r#"\b"#,
    r#"\B"#,
    r#"\A"#,
    r#"\z"#,
    r#"a\b"#,
    r#"\bword\b"#,
    r#"[a-z]{20}"#,
    r#"[a-z]{30}"#,
    r#"(abc|def|ghi|jkl){1,30}"#,
    r#"(abc|def|ghi|jkl){1,8}"#,
    r#"a{100}"#,
    r#"a{96}"#,
    r#"a{97}"#,
    r#"a{98}"#,
    r#"^a{98}"#,
    r#"^a{99}"#,
    r#"a{95}$"#,
    r#"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"#,
    r#"/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"#,
    r#"/api/v[0-9]+/orgs/[^/]+/repos/[^/]+/issues/[0-9]+/comments"#,
    r#"(?i)[a-z]+"#,
    r#"(?i)[k]"#,
    r#"(?i)Straße"#,
    r#"\x41"#,
    r#"\x{41}"#,
    r#"\x{ff}"#,
    r#"\x{100}"#,
    r#"\x{10FFFF}"#,
    r#"\x{}"#,
    r#"\x4"#,
    r#"\xZZ"#,
    r#"\0"#,
    r#"\01"#,
    r#"\012"#,
    r#"\0123"#,
    r#"\8"#,
    r#"\9"#,
    r#"\1"#,
    r#"\12"#,
    r#"\_"#,
    r#"\-"#,
    r#"\/"#,
    r#"\."#,
    r#"\é"#,
    r#"\n\t\r\f\v\a"#,
    r#"\e"#,
    r#"\cA"#,
    r#"\u0041"#,
    r#"\N{LATIN SMALL LETTER A}"#,
    r#"\k<n>"#,
    r#"\g1"#,
    r#"[\d\s\w]"#,
    r#"[\D]"#,
    r#"[^\W]"#,
    r#"[a-\d]"#,
    r#"[\d-z]"#,
    r#"[z-a]"#,
    r#"[]a]"#,
    r#"[^]a]"#,
    r#"[]"#,
    r#"[^]"#,
    r#"[a"#,
    r#"a]"#,
    r#"a)"#,
    r#"(a"#,
    r#"((a)"#,
    r#"a|"#,
    r#"|a"#,
    r#"|"#,
    r#"a||b"#,
    r#"()"#,
    r#"(|)"#,
    r#"*a"#,
    r#"+a"#,
    r#"?a"#,
    r#"{2}"#,
    r#"a{2"#,
    r#"a{2,"#,
    r#"a{,2}"#,
    r#"a{02}"#,
    r#"a{2,1}"#,
    r#"a{1000,}"#,
    r#"a{1001,}"#,
    r#"x{3}{4}"#,
    r#"a**"#,
    r#"a*?"#,
    r#"a+?"#,
    r#"a??"#,
    r#"a{2}?"#,
    r#"a{2}{3}"#,
    r#"(a*)*"#,
    r#"(?:a*)*"#,
    r#"(?:a+)?"#,
    r#"(a|b|c|d|e|f|g|h|i|j)"#,
    r#"(abc|abd|aef|bcx|bcy)"#,
    r#"(foo|foobar|fo)"#,
    r#"(.|a)"#,
    r#"(a|.)"#,
    r#"[ab]|c|d"#,
    r#"a.*b.*c.*d.*e.*f"#,
    r#".*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*"#,
    r#"(a|b)*c{5,10}"#,
    r#"((a|b)c){2,3}"#,
    r#"[\x00-\xff]+"#,
    r#"[^\x00-\xff]"#,
    r#"(?s)[^\n]"#,
    r#"é+"#,
    r#"(é)+"#,
    r#"[é]+"#,
    r#"ñ{50}"#,
    r#"日本語"#,
    r#"/日本/[^/]+"#,
    r#"(?P<ê>x)"#,
    r#"(?P<é>x)"#,
    r#"\Qa\Eb*"#,
    r#"a\Q*\E"#,
    r#"$a"#,
    r#"a^"#,
    r#"^*"#,
    r#"$*"#,
    r#"\b*"#,
    r#"(?i)ǅ"#,
    r#"a{1,100}"#,
    r#"a{50,100}"#,
    r#"(a|b){50}"#,
    r#"[abc]{33}"#,
    r#"(ab){48}"#,
    r#"(ab){49}"#,
    r#"(ab){50}"#,
    r#"x{10}y{10}z{10}w{10}v{10}u{10}t{10}s{10}r{10}"#,
    r#"(?:x{2}|y{2}){20}"#,
    r#"(a?){30}"#,
    r#"(a*){30}"#,
    r#"(a+){30}"#,
    r#"(a?b?c?){10}"#,
    r#"(?i)(a?b?c?){10}"#,
    r#"((a?)*)*"#,
    r#"(a*|b*)*"#,
    r#"(|a)*"#,
    r#"(a|)+"#,
    r#"(?:(?:a*)*b)*"#,
    r#"(\b)*"#,
    r#"(^)*"#,
    r#"($)+"#,
    r#"(a?){3}"#,
    r#"a{0}"#,
    r#"(a){0}"#,
    r#"(){5}"#,
    r#"(?:){5}"#,
    r#"(?:^|/)foo"#,
    r#"(?m)^$"#,
    r#"(?m)^a|b$"#,
    r#"\b{2}"#,
    r#"(?:\b\B){3}"#,
    r#"(^$){2,5}"#,
    r#"x*y*x*y*"#,
    r#"a*a+a?a{2}a{3,}"#,
    r#"a+a+a+a+"#,
    r#"(?:ab)*(?:ab)+"#,
    r#"a*?a*"#,
    r#"[a]*[a]+"#,
    r#"\d*\d+\d?"#,
    r#".*.+.?"#,
    r#"(?s).*.+"#,
    r#"a|a|a"#,
    r#"ab|ab"#,
    r#"abc|abd|aef|bcx|bcy"#,
    r#"(?i)abc|ABD"#,
    r#"\d{2}|\d{3}"#,
    r#"\d{2}a|\d{2}b"#,
    r#"[ab]|[cd]|e"#,
    r#"a|[^a]"#,
    r#".|\n"#,
    r#"(?s:.)|a"#,
    r#"a?|b?"#,
    r#"(a|b|)c"#,
    r#"(?:a|b)*?c"#,
    r#"(?U)a*b+c?"#,
    r#"(?U)a*?"#,
    r#"(?U:(?:a|b)+?)"#,
    r#"((((((((((a))))))))))"#,
    r#"(?:(?:(?:(?:(?:a)*)*)*)*)*"#,
    r#"(?P<a>x)(?P<b>y)(?P<c>z)"#,
    r#"(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)"#,
    r#"^abc$"#,
    r#"^abc"#,
    r#"^(abc)"#,
    r#"^(?:abc)def"#,
    r#"^^abc"#,
    r#"\Aabc"#,
    r#"\A\Aabc"#,
    r#"^a*"#,
    r#"^(a|b)"#,
    r#"abc$"#,
    r#"(abc)$"#,
    r#"(?:abc$)"#,
    r#"a$$"#,
    r#"^$"#,
    r#"^"#,
    r#"$"#,
    r#"(?i)^abc"#,
    r#"^(?i)abc"#,
    r#"^é"#,
    r#"^é?"#,
    r#"[^\x00-\x7f]+"#,
    r#"[\x80-\xff]{10}"#,
    r#"(?i)[\x80-\xff]"#,
    r#"\xff+"#,
    r#"\C+"#,
    r#"\C*a"#,
    r#"(?s:.*)a"#,
    r#"a(?s:.*)"#,
    r#"(?:.|\n)*"#,
    r#"/api/(?:v1|v2|v3)/(?:users|groups|roles)/[^/]+(?:/[^/]+)*"#,
    r#"/api/v\d+(?:\.\d+){0,2}/.*"#,
    r#"/(?:[a-z]{2}(?:-[A-Z]{2})?)/products/(?:\d{1,8})"#,
    r#"/blog/\d{4}/\d{2}/\d{2}/[a-z0-9-]+/?"#,
    r#"/search\?q=.*"#,
    r#"/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/0/1/2/3/4/5/6/7/8/9"#,
    r#"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"#,
    r#"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"#,
    r#"^/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"#,
    r#"/[a-z]+/[a-z]+/[a-z]+/[a-z]+/[a-z]+/[a-z]+/[a-z]+/[a-z]+/[a-z]+/[a-z]+/[a-z]+/[a-z]+"#,
    r#"/(foo|bar|baz|qux|quux|corge|grault|garply|waldo|fred|plugh|xyzzy|thud)/.*"#,
    "",
    "\u{0}",
    "a\nb",
    "(?m)^a\n$",
    "[\t ]+",
];

/// A bootstrap whose one listener has a route per pattern.
fn bootstrap(patterns: &[&str]) -> Value {
    let routes: Vec<Value> = patterns
        .iter()
        .map(|p| json!({"match": {"safe_regex": {"regex": p}}, "direct_response": {"status": 200}}))
        .collect();
    json!({
        "static_resources": {
            "listeners": [{
                "name": "regex",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10000}},
                "filter_chains": [{
                    "filters": [{
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                            "stat_prefix": "regex",
                            "route_config": {
                                "name": "regex",
                                "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": routes}]
                            },
                            "http_filters": [{
                                "name": "envoy.filters.http.router",
                                "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
                            }]
                        }
                    }]
                }]
            }]
        }
    })
}

fn envoy(patterns: &[&str]) -> Result<(), String> {
    testkit::envoy::validate(&bootstrap(patterns))
}

/// `f` over `items` on two threads (Envoy's validation is CPU-bound).
fn parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let out = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    out.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
                }
            });
        }
    });
    let mut out = out.into_inner().unwrap_or_else(|e| e.into_inner());
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// The patterns of `batch` that Envoy rejects, with its message: bisects.
fn rejected_by_envoy(batch: &[&str]) -> Vec<(String, String)> {
    match envoy(batch) {
        Ok(()) => Vec::new(),
        Err(e) if batch.len() == 1 => vec![(batch[0].to_string(), e)],
        Err(_) => {
            let (a, b) = batch.split_at(batch.len() / 2);
            let mut out = rejected_by_envoy(a);
            out.extend(rejected_by_envoy(b));
            out
        }
    }
}

/// The size in Envoy's "RE2 program size of N > max program size" message.
fn envoy_size(message: &str) -> Option<usize> {
    let rest = message.split("RE2 program size of ").nth(1)?;
    rest.split(' ').next()?.parse().ok()
}

#[derive(Default)]
struct Report {
    total: usize,
    accepted: usize,
    false_accepts: Vec<(String, String)>,
    false_rejects: Vec<(String, String)>,
    size_mismatches: Vec<(String, usize, usize)>,
}

fn compare(name: &str, patterns: &[String]) -> Report {
    let mut report = Report {
        total: patterns.len(),
        ..Report::default()
    };
    let mut accepted: Vec<&str> = Vec::new();
    let mut rejected: Vec<(&str, RegexError)> = Vec::new();
    for p in patterns {
        match regex::check(p) {
            Ok(()) => accepted.push(p),
            Err(e) => rejected.push((p, e)),
        }
    }
    report.accepted = accepted.len();
    report.false_accepts = rejected_by_envoy(&accepted);
    let verdicts = parallel(&rejected, |(p, _)| envoy(&[*p]));
    for ((p, ours), theirs) in rejected.iter().zip(verdicts) {
        match theirs {
            Ok(()) => report.false_rejects.push((p.to_string(), ours.to_string())),
            Err(msg) => {
                if let (RegexError::ProgramSize { size, .. }, Some(envoy)) = (ours, envoy_size(&msg))
                    && *size != envoy
                {
                    report.size_mismatches.push((p.to_string(), *size, envoy));
                }
            }
        }
    }
    println!(
        "{name}: {} patterns, {} accepted and {} rejected by check(); {} false accepts, {} false rejects, {} size mismatches",
        report.total,
        report.accepted,
        report.total - report.accepted,
        report.false_accepts.len(),
        report.false_rejects.len(),
        report.size_mismatches.len()
    );
    for (p, e) in &report.false_accepts {
        println!("  FALSE ACCEPT (Envoy NACKs) {p:?}: {e}");
    }
    for (p, e) in &report.false_rejects {
        println!("  false reject {p:?}: {e}");
    }
    for (p, ours, envoy) in &report.size_mismatches {
        println!("  size mismatch {p:?}: check() {ours}, Envoy {envoy}");
    }
    report
}

fn assert_agreement(report: &Report) {
    assert!(
        report.false_accepts.is_empty(),
        "check() accepts regexes Envoy rejects: {:?}",
        report.false_accepts
    );
    assert!(
        report.false_rejects.len() * 20 <= report.total,
        "more than 5% false rejections: {:?}",
        report.false_rejects
    );
    assert!(
        report.size_mismatches.is_empty(),
        "program sizes differ from Envoy's: {:?}",
        report.size_mismatches
    );
}

#[test]
fn hand_written_corpus_agrees_with_envoy() {
    let patterns: Vec<String> = CORPUS.iter().map(|p| p.to_string()).collect();
    assert!(patterns.len() >= 150);
    let report = compare("hand-written corpus", &patterns);
    assert_agreement(&report);
    // The corpus exercises both sides of the limit.
    assert!(report.accepted >= 100 && report.total - report.accepted >= 60);
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// A random, mostly valid pattern: atoms, concatenations, alternations,
/// groups, quantifiers.
fn structured(rng: &mut Rng, depth: u32) -> String {
    const ATOMS: &[&str] = &[
        "a",
        "b",
        "c",
        "/",
        "-",
        "_",
        "x",
        "é",
        "\\.",
        "\\/",
        "[0-9]",
        "[a-z]",
        "[A-Z]",
        "[a-zA-Z]",
        "[^/]",
        "[^a-z]",
        "\\d",
        "\\w",
        "\\s",
        "\\D",
        "\\W",
        ".",
        "[[:alpha:]]",
        "[[:digit:]]",
        "\\pL",
        "\\p{Lu}",
        "\\PN",
        "\\p{Greek}",
        "\\C",
        "[abc]",
        "[a-c]",
        "[xyz0-9_-]",
        "\\x41",
        "\\xe9",
        "[é]",
        "(?i:k)",
        "(?s:.)",
        "\\b",
        "^",
        "$",
        "\\A",
        "\\z",
    ];
    const QUANTS: &[&str] = &[
        "*", "+", "?", "*?", "+?", "??", "{2}", "{3}", "{1,3}", "{0,4}", "{2,}", "{5}", "{0,2}", "{10}",
        "{1,12}",
    ];
    const GROUPS: &[&str] = &["", "?:", "?P<g>", "?i:", "?-i:"];
    let r = rng.below(20);
    let mut s = if depth > 3 || r < 7 {
        (0..1 + rng.below(4)).map(|_| rng.pick(ATOMS)).collect()
    } else if r < 12 {
        (0..2 + rng.below(2))
            .map(|_| structured(rng, depth + 1))
            .collect()
    } else if r < 16 {
        let open = rng.pick(GROUPS);
        let alts: Vec<String> = (0..2 + rng.below(3))
            .map(|_| structured(rng, depth + 1))
            .collect();
        format!("({open}{})", alts.join("|"))
    } else {
        format!("(?:{})", structured(rng, depth + 1))
    };
    if rng.below(20) < 7 {
        s = format!("(?:{s}){}", rng.pick(QUANTS));
    }
    s
}

/// Random symbol soup: mostly invalid patterns.
fn soup(rng: &mut Rng) -> String {
    const SYMBOLS: &[&str] = &[
        "a",
        "b",
        "(",
        ")",
        "|",
        "*",
        "+",
        "?",
        "{",
        "}",
        "[",
        "]",
        "^",
        "$",
        ".",
        "\\",
        "-",
        ",",
        "0",
        "1",
        "2",
        "3",
        ":",
        "=",
        "!",
        "<",
        ">",
        "P",
        "i",
        "U",
        "\\d",
        "\\b",
        "(?:",
        "(?i)",
        "(?P<n>",
        "{2}",
        "{1,2}",
        "[^",
        "[:alpha:]",
        "\\Q",
        "\\E",
        "\\x",
        "é",
        "\\p",
        "{1000}",
        "{1001}",
    ];
    (0..1 + rng.below(10)).map(|_| rng.pick(SYMBOLS)).collect()
}

#[test]
fn generated_corpus_agrees_with_envoy() {
    let mut rng = Rng(0x5EED_0FC0_FFEE);
    let mut patterns = Vec::new();
    while patterns.len() < 300 {
        let mut p = structured(&mut rng, 0);
        match rng.below(10) {
            0 => p = format!("(?i){p}"),
            1 => p = format!("^{p}"),
            2 | 3 => p = format!("/api/{p}"),
            _ => {}
        }
        if !patterns.contains(&p) {
            patterns.push(p);
        }
    }
    while patterns.len() < 400 {
        let p = soup(&mut rng);
        if !patterns.contains(&p) {
            patterns.push(p);
        }
    }
    let report = compare("generated corpus", &patterns);
    assert_agreement(&report);
}
