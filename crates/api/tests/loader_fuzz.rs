//! No-panic property test: thousands of deterministic mutations of valid
//! manifests must load without panicking, and every diagnostic must name the
//! file (and a line inside it, when it has one).
//!
//! `PORTCULLIS_FUZZ_CASES` sets the number of cases (default 2000);
//! `PORTCULLIS_FUZZ_SEED` the PRNG seed.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use api::loader::{Loaded, load_str};
use common::VALID_MANIFESTS;

/// xorshift64* — small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const BYTES: &[u8] = b":-{}[],\"'#&*!|>%@`?\t\n \\0aZ9.";

const VALUES: &[&str] = &[
    "",
    "~",
    "null",
    "true",
    "False",
    "0",
    "-1",
    "80",
    "\"80\"",
    "99999999999999999999999",
    "-9223372036854775809",
    "1.5e308",
    "1e400",
    ".inf",
    "-.inf",
    ".nan",
    "0x1F",
    "0o17",
    "012",
    "[]",
    "{}",
    "[a, 1, {b: c}]",
    "{a: [1, 2], b: {c: d}}",
    "&anchor value",
    "*anchor",
    "*undefined",
    "!!binary aGVsbG8=",
    "!!str 42",
    "!custom tag",
    "|\n  block\n  text",
    ">-\n  folded",
    "\"unterminated",
    "'single ''quoted'''",
    "\"\\u0000\\x7f\\uD800\"",
    "Foo",
    "PathPrefix",
    "RegularExpression",
    "/",
    "*.example.com",
    "é☃𝄞",
    "- a\n- b",
    "a: b: c",
    "---",
    "...",
    "? complex\n: key",
    "<<: {merged: true}",
    "2024-01-01T00:00:00Z",
    "not base64!",
    "aGVsbG8=",
];

fn random_value(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => rng.next().to_string(),
        1 => {
            let len = rng.below(12);
            (0..len)
                .map(|_| char::from(b'a' + (rng.below(26) as u8)))
                .collect()
        }
        _ => (*rng.pick(VALUES)).to_string(),
    }
}

fn lines_of(text: &str) -> Vec<String> {
    text.split('\n').map(str::to_string).collect()
}

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut text = text.to_string();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        text = match rng.below(11) {
            // Flip (replace) one byte; the text may stop being UTF-8, which
            // `from_utf8_lossy` repairs the way a reader would.
            0 => {
                let mut bytes = text.into_bytes();
                if !bytes.is_empty() {
                    let i = rng.below(bytes.len());
                    bytes[i] = if rng.below(4) == 0 {
                        rng.next() as u8
                    } else {
                        *rng.pick(BYTES)
                    };
                }
                String::from_utf8_lossy(&bytes).into_owned()
            }
            // Delete a line.
            1 => {
                let mut lines = lines_of(&text);
                let i = rng.below(lines.len());
                lines.remove(i);
                lines.join("\n")
            }
            // Duplicate a line.
            2 => {
                let mut lines = lines_of(&text);
                let i = rng.below(lines.len());
                let line = lines[i].clone();
                lines.insert(i, line);
                lines.join("\n")
            }
            // Truncate.
            3 => {
                let mut end = rng.below(text.len() + 1);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
                text
            }
            // Replace a value (after `: ` or `- `) with something else.
            4 | 5 => {
                let mut lines = lines_of(&text);
                let i = rng.below(lines.len());
                let value = random_value(rng);
                let line = &lines[i];
                let cut = line
                    .find(": ")
                    .map(|p| p + 2)
                    .or_else(|| line.find("- ").map(|p| p + 2));
                lines[i] = match cut {
                    Some(p) => format!("{}{}", &line[..p], value),
                    None => format!("{line}{value}"),
                };
                lines.join("\n")
            }
            // Insert a document marker.
            6 => {
                let mut lines = lines_of(&text);
                let i = rng.below(lines.len() + 1);
                lines.insert(
                    i,
                    (*rng.pick(&["---", "--- # c", "--- x", "...", "%YAML 1.2"])).to_string(),
                );
                lines.join("\n")
            }
            // Indent or dedent a line.
            7 => {
                let mut lines = lines_of(&text);
                let i = rng.below(lines.len());
                lines[i] = if rng.below(2) == 0 {
                    format!("  {}", lines[i])
                } else {
                    lines[i].trim_start().to_string()
                };
                lines.join("\n")
            }
            // Swap two lines.
            8 => {
                let mut lines = lines_of(&text);
                let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
                lines.swap(a, b);
                lines.join("\n")
            }
            // Deep nesting.
            9 => {
                let depth = 1 + rng.below(300);
                let (open, close) = if rng.below(2) == 0 {
                    ("[", "]")
                } else {
                    ("{a: ", "}")
                };
                let mut lines = lines_of(&text);
                let i = rng.below(lines.len());
                lines[i] = format!("{}{}{}{}", lines[i], open.repeat(depth), "x", close.repeat(depth));
                lines.join("\n")
            }
            // Replace a key with another one.
            _ => {
                let mut lines = lines_of(&text);
                let i = rng.below(lines.len());
                if let Some(p) = lines[i].find(':') {
                    let indent = lines[i].len() - lines[i].trim_start().len();
                    let key = *rng.pick(&[
                        "apiVersion",
                        "kind",
                        "metadata",
                        "name",
                        "namespace",
                        "items",
                        "spec",
                        "status",
                        "stringData",
                        "data",
                        "type",
                        "rules",
                        "matches",
                        "useDefaultGateway",
                        "<<",
                        "x",
                    ]);
                    lines[i] = format!("{}{}{}", &lines[i][..indent], key, &lines[i][p..]);
                }
                lines.join("\n")
            }
        };
    }
    text
}

fn check(name: &str, text: &str, loaded: &Loaded) -> Result<(), String> {
    let line_count = text.split('\n').count();
    for diagnostic in &loaded.diagnostics {
        let Some(file) = &diagnostic.file else {
            return Err(format!("diagnostic without file: {diagnostic:?}"));
        };
        let Some(line) = file.strip_prefix(name).and_then(|rest| rest.strip_prefix(':')) else {
            return Err(format!("diagnostic names another file: {diagnostic:?}"));
        };
        match line.parse::<usize>() {
            Ok(line) if (1..=line_count).contains(&line) => {}
            _ => {
                return Err(format!(
                    "diagnostic line out of range (1..={line_count}): {diagnostic:?}"
                ));
            }
        }
        if diagnostic.message.is_empty() || diagnostic.message.contains('\n') {
            return Err(format!("bad message: {diagnostic:?}"));
        }
    }
    let inputs = &loaded.inputs;
    let sources = inputs
        .gateway_classes
        .iter()
        .map(|s| &s.source)
        .chain(inputs.gateways.iter().map(|s| &s.source))
        .chain(inputs.http_routes.iter().map(|s| &s.source))
        .chain(inputs.grpc_routes.iter().map(|s| &s.source))
        .chain(inputs.reference_grants.iter().map(|s| &s.source))
        .chain(inputs.namespaces.iter().map(|s| &s.source))
        .chain(inputs.services.iter().map(|s| &s.source))
        .chain(inputs.endpoint_slices.iter().map(|s| &s.source))
        .chain(inputs.secrets.iter().map(|s| &s.source));
    for source in sources {
        if source.file != name || !(1..=line_count).contains(&source.line) {
            return Err(format!("bad source {source}"));
        }
    }
    Ok(())
}

#[test]
fn mutated_manifests_never_panic() {
    let cases: usize = std::env::var("PORTCULLIS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let seed: u64 = std::env::var("PORTCULLIS_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED_CAFE_F00D_D00D);
    let mut rng = Rng(seed.max(1));

    // Seeds: each manifest (several are multi-document streams, one is a
    // JSON List), plus two of them in one stream. (A stream of everything
    // would triple the run time: YAML parsing dominates in debug builds.)
    let mut seeds: Vec<(String, String)> = VALID_MANIFESTS
        .iter()
        .map(|(name, text)| (name.to_string(), text.to_string()))
        .collect();
    let pair: Vec<&str> = VALID_MANIFESTS
        .iter()
        .filter(|(name, _)| matches!(*name, "gatewayclass.yaml" | "grant.yaml"))
        .map(|(_, text)| *text)
        .collect();
    seeds.push(("pair.yaml".to_string(), pair.join("---\n")));

    let mut failures = Vec::new();
    let mut loaded_objects = 0usize;
    let mut diagnostics = 0usize;
    for case in 0..cases {
        let (name, seed_text) = rng.pick(&seeds).clone();
        let text = mutate(&mut rng, &seed_text);
        match catch_unwind(AssertUnwindSafe(|| load_str(&name, &text))) {
            Ok(loaded) => {
                if let Err(problem) = check(&name, &text, &loaded) {
                    failures.push(format!("case {case} ({name}): {problem}\n--- input ---\n{text}"));
                }
                if case % 16 == 0 && load_str(&name, &text) != loaded {
                    failures.push(format!(
                        "case {case} ({name}): not deterministic\n--- input ---\n{text}"
                    ));
                }
                loaded_objects += loaded.inputs.len();
                diagnostics += loaded.diagnostics.len();
            }
            Err(_) => failures.push(format!("case {case} ({name}): panicked\n--- input ---\n{text}")),
        }
        if failures.len() >= 5 {
            break;
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // The mutations must leave a good share of inputs loadable and produce
    // diagnostics for others, or the test is not testing much.
    if cases >= 200 {
        assert!(
            loaded_objects > cases / 4,
            "only {loaded_objects} objects loaded in {cases} cases"
        );
        assert!(
            diagnostics > cases / 4,
            "only {diagnostics} diagnostics in {cases} cases"
        );
    }
}
