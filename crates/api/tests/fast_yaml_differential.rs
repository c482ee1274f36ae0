//! The fast YAML reader (`src/loader/fast_yaml.rs`) against serde-saphyr:
//! for every document the fast reader accepts, its tree must be exactly the
//! one serde-saphyr reads (the loader's spanless read), and serde-saphyr
//! must accept the document too (a document the fast reader took but
//! serde-saphyr refuses would lose its diagnostic). Whole loads must be
//! equal with and without the fast reader (objects and diagnostics).
//!
//! Inputs: every translator fixture (input and expected output) and
//! rejection case, the conformance manifests under /work/shared/conformance
//! when present, a table of tricky scalars in every position, and generated
//! documents (random trees in random styles, then randomly mutated).

use std::path::{Path, PathBuf};

use api::loader::{
    ReadBothWays, load_str, load_str_reference_decode, load_str_without_fast_yaml, read_both_ways,
};

const MARKER: &str = "# ---- expected output";

#[derive(Default, Debug)]
struct Tally {
    documents: usize,
    accepted: usize,
}

/// Checks every document of `text`; panics on the first divergence.
fn check(what: &str, text: &str, tally: &mut Tally) {
    for ReadBothWays {
        first_line,
        fast,
        saphyr,
    } in read_both_ways(text)
    {
        tally.documents += 1;
        let Some(fast) = fast else { continue };
        tally.accepted += 1;
        match saphyr {
            Ok(saphyr) => assert_eq!(
                fast, saphyr,
                "{what}: the fast reader and serde-saphyr differ on the document at line {first_line}:\n{text}"
            ),
            Err(error) => panic!(
                "{what}: the fast reader accepted the document at line {first_line}, serde-saphyr refuses it ({error}):\n{text}"
            ),
        }
    }
}

/// The whole load, objects and diagnostics, is the same with and without
/// the fast reader, and with and without the direct typed decode
/// (`src/loader/decode.rs`, which the fast path uses for the trees of the
/// fast reader and of JSON files; `load_str_reference_decode` decodes them
/// through `serde_json::Value` as before).
fn check_load(file: &str, text: &str) {
    let loaded = load_str(file, text);
    assert_eq!(
        loaded,
        load_str_without_fast_yaml(file, text),
        "{file}: loads differ with and without the fast YAML reader"
    );
    assert_eq!(
        loaded,
        load_str_reference_decode(file, text),
        "{file}: loads differ with and without the direct typed decode"
    );
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            out.push(path);
        }
    }
    out.sort();
}

fn translate_tests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../translate/tests")
}

#[test]
fn fixtures_and_rejections_read_the_same() {
    let mut files = Vec::new();
    yaml_files(&translate_tests().join("fixtures"), &mut files);
    let fixtures = files.len();
    yaml_files(&translate_tests().join("rejections"), &mut files);
    assert!(
        fixtures > 50 && files.len() > fixtures + 50,
        "expected the translator's fixtures and rejections under {}",
        translate_tests().display()
    );
    let mut tally = Tally::default();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("fixture text");
        let name = path.display().to_string();
        // A fixture's input, and its expected output (YAML too).
        let (input, output) = match text.split_once(MARKER) {
            Some((input, output)) => (input, output),
            None => (text.as_str(), ""),
        };
        check(&name, input, &mut tally);
        check(&format!("{name} (expected output)"), output, &mut tally);
        check_load(&name, input);
    }
    eprintln!("fixtures and rejections: {tally:?}");
    // The reader must actually be exercised: nearly all of these documents
    // are in its subset.
    assert!(
        tally.accepted * 10 >= tally.documents * 9,
        "the fast reader accepted too few documents: {tally:?}"
    );
}

#[test]
fn conformance_manifests_read_the_same() {
    let dir = Path::new("/work/shared/conformance");
    if !dir.is_dir() {
        eprintln!("SKIPPED: no conformance manifests at {}", dir.display());
        return;
    }
    let mut files = Vec::new();
    yaml_files(dir, &mut files);
    let mut tally = Tally::default();
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let name = path.display().to_string();
        check(&name, &text, &mut tally);
        check_load(&name, &text);
    }
    eprintln!("conformance manifests: {} files, {tally:?}", files.len());
}

/// Scalars whose resolution is easy to get wrong, written plain.
const TRICKY_PLAIN: &[&str] = &[
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "Yes",
    "NO",
    "On",
    "OFF",
    "true",
    "True",
    "TRUE",
    "tRue",
    "false",
    "False",
    "FALSE",
    "~",
    "null",
    "Null",
    "NULL",
    "nULL",
    "0",
    "-0",
    "+0",
    "00",
    "012",
    "-012",
    "+012",
    "0x1F",
    "0X1f",
    "-0x10",
    "0o17",
    "0O17",
    "0b101",
    "-0b1",
    "0x",
    "0xG",
    "0o8",
    "1_000",
    "1__0",
    "_1",
    "1_",
    "0x_1",
    "1e3",
    "1E3",
    "1e+3",
    "-1.5e-3",
    "1.",
    ".5",
    "-.5",
    "+.5",
    ".",
    "1.2.3",
    "10.0.0.1",
    "1e999",
    "-1e999",
    ".inf",
    ".Inf",
    ".INF",
    "-.inf",
    "+.inf",
    ".nan",
    ".NaN",
    ".NAN",
    "-.nan",
    "inf",
    "-inf",
    "nan",
    "NaN",
    "infinity",
    "Infinity",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "-9223372036854775809",
    "9223372036854775807",
    "170141183460469231731687303715884105728",
    "1:2",
    "a:b",
    "http://x/y",
    "a#b",
    "a b",
    "a  b",
    "-a",
    "--a",
    "-1a",
    "+a",
    "10s",
    "1Gi",
    "2001:db8::1",
    "*.example.com",
    "a,b",
    "a[0]",
    "x{y}",
    "é",
    "日本語",
    "😀",
    "a'b",
    "a\"b",
    "=",
    "<<",
    "@x",
    "`x",
    "%x",
    "?x",
    ":x",
    "!x",
    "&x",
    "*x",
    "|",
    ">",
    "-",
    "--- x",
    "...",
];

/// Strings written quoted (the text inside the quotes).
const TRICKY_DOUBLE: &[&str] = &[
    "",
    "yes",
    "1",
    "null",
    "~",
    "a\\nb",
    "\\t",
    "\\0",
    "\\a\\b\\v\\f\\r\\e",
    "\\ ",
    "\\/",
    "\\\\",
    "\\\"",
    "\\N\\_\\L\\P",
    "\\x41\\xe9\\xff",
    "\\u00e9\\u2028",
    "\\U0001F600",
    "\\ud800",
    "\\q",
    "\\x4",
    "\\u12",
    "a'b",
    "# not a comment",
    "a: b",
    "- x",
    "é日😀",
];
const TRICKY_SINGLE: &[&str] = &["", "yes", "a''b", "''", "\\n", "a: b", "#x", "- x", "é"];

#[test]
fn tricky_scalars_read_the_same_in_every_position() {
    let mut scalars: Vec<String> = TRICKY_PLAIN.iter().map(|s| s.to_string()).collect();
    scalars.extend(TRICKY_DOUBLE.iter().map(|s| format!("\"{s}\"")));
    scalars.extend(TRICKY_SINGLE.iter().map(|s| format!("'{s}'")));
    let mut tally = Tally::default();
    for scalar in &scalars {
        let docs = [
            format!("k: {scalar}\n"),
            format!("k: {scalar} # comment\n"),
            format!("{scalar}: v\n"),
            format!("- {scalar}\n"),
            format!("a:\n  - {scalar}\n  - x\n"),
            format!("a: {{k: {scalar}}}\n"),
            format!("a: [{scalar}, x]\n"),
            format!("a: {{{scalar}: v}}\n"),
            format!("- k: {scalar}\n  j: 1\n"),
            format!("{scalar}\n"),
            // JSON-like: a value right after a key's `:`.
            format!("a: {{{scalar}:1, b:[], \"c\":{{}}, \"d\":[{scalar}]}}\n"),
            format!("a: {{\"k\":{scalar}}}\n"),
            format!("a: [{scalar}:1]\n"),
        ];
        for doc in &docs {
            check("tricky scalar", doc, &mut tally);
            check_load("tricky.yaml", doc);
        }
    }
    eprintln!("tricky scalars: {tally:?}");
    // The resolution cases must be the fast reader's, or the comparison
    // above proves nothing about them.
    for must in [
        "yes",
        "no",
        "on",
        "off",
        "~",
        "null",
        "0x1F",
        "0o17",
        "1e3",
        "1_000",
        "012",
        "-012",
        ".inf",
        "-.Inf",
        ".nan",
        "1e999",
        "18446744073709551616",
        "-9223372036854775809",
        "10.0.0.1",
        "\"a\\nb\"",
        "\"\\U0001F600\"",
        "'a''b'",
        "\"\"",
        "''",
    ] {
        let doc = format!("k: {must}\n");
        let read = read_both_ways(&doc);
        assert!(
            read.first().is_some_and(|r| r.fast.is_some()),
            "the fast reader should read {doc:?}"
        );
    }
}

#[test]
fn comments_and_blank_lines_read_the_same() {
    let mut tally = Tally::default();
    for n in [1, 16, 17, 31, 32, 33, 100] {
        let before = tally.accepted;
        let comments = "# c\n".repeat(n);
        let indented = "  # c\n".repeat(n);
        let blanks = "\n".repeat(n);
        for doc in [
            format!("{comments}a: 1\n"),
            format!("a: 1\n{comments}b: 2\n"),
            format!("a:\n{indented}  b: 2\n{comments}"),
            format!("a:\n{blanks}- x\n{blanks}- y # c\n{indented}"),
            format!("a: |\n  x\n{comments}b: 1\n"),
        ] {
            check("comments", &doc, &mut tally);
            check_load("comments.yaml", &doc);
        }
        // Short runs of comments are the fast reader's (serde-saphyr
        // refuses more than 32 in some places: those are not).
        if n <= 16 {
            assert_eq!(tally.accepted - before, 5, "{n} comments");
        }
    }
    eprintln!("comments: {tally:?}");
}

#[test]
fn block_scalars_read_the_same() {
    let mut tally = Tally::default();
    for header in ["|", "|-", "|+", ">", ">-", ">+", "|2", "| # c", "|-  # c", ">#c"] {
        for body in [
            "  a\n  b\n",
            "  a\n\n  b\n",
            "  a\n  b\n\n\n",
            "  a\n    b\n  c\n",
            "  # not a comment\n  x\n",
            "\n  a\n",
            "  a\n \n  b\n",
            "  a\n   \n  b\n",
            "  a\n  b",
            "  a: b\n  - c\n",
            "  a\n # trailing comment\n",
            "    a\n    b\n  ",
        ] {
            for doc in [
                format!("k: {header}\n{body}"),
                format!("k: {header}\n{body}j: 1\n"),
                format!("- {header}\n{body}- x\n"),
                format!("a:\n  k: {header}\n  {}", body.replace('\n', "\n  ")),
            ] {
                check("block scalar", &doc, &mut tally);
                check_load("block.yaml", &doc);
            }
        }
    }
    eprintln!("block scalars: {tally:?}");
    assert!(tally.accepted > 50, "{tally:?}");
}

/// xorshift64*: a fixed-seed generator, so a failure is reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

enum Tree {
    Scalar(String),
    Seq(Vec<Tree>),
    Map(Vec<(String, Tree)>),
}

fn scalar(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => format!("\"{}\"", rng.pick(TRICKY_DOUBLE)),
        1 => format!("'{}'", rng.pick(TRICKY_SINGLE)),
        _ => rng.pick(TRICKY_PLAIN).to_string(),
    }
}

fn key(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => scalar(rng),
        1 => format!("\"k{}\"", rng.below(5)),
        _ => rng
            .pick(&[
                "name", "kind", "spec", "a", "b", "ports", "x-y", "a.b/c", "é", "port",
            ])
            .to_string(),
    }
}

fn tree(rng: &mut Rng, depth: usize) -> Tree {
    if depth > 3 || rng.chance(35) {
        return Tree::Scalar(scalar(rng));
    }
    let len = rng.below(4);
    if rng.chance(50) {
        Tree::Seq((0..len).map(|_| tree(rng, depth + 1)).collect())
    } else {
        Tree::Map((0..len).map(|_| (key(rng), tree(rng, depth + 1))).collect())
    }
}

fn flow(tree: &Tree, out: &mut String) {
    match tree {
        Tree::Scalar(s) => out.push_str(s),
        Tree::Seq(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                flow(item, out);
            }
            out.push(']');
        }
        Tree::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(k);
                out.push_str(": ");
                flow(v, out);
            }
            out.push('}');
        }
    }
}

/// Renders `tree` as the value after a key or `-` at indentation `indent`:
/// on the same line (a scalar, a flow collection) or on the next lines.
fn block_value(rng: &mut Rng, tree: &Tree, indent: usize, out: &mut String) {
    let flowing = matches!(tree, Tree::Scalar(_)) || rng.chance(20);
    if flowing {
        out.push(' ');
        flow(tree, out);
        if rng.chance(10) {
            out.push_str(" # c");
        }
        out.push('\n');
        return;
    }
    match tree {
        Tree::Seq(items) if items.is_empty() => out.push_str(" []\n"),
        Tree::Map(entries) if entries.is_empty() => out.push_str(" {}\n"),
        _ => {
            out.push('\n');
            if rng.chance(10) {
                out.push_str(&" ".repeat(indent + 2));
                out.push_str("# comment\n");
            }
            // A sequence may sit at its key's indentation.
            let child = if matches!(tree, Tree::Seq(_)) && rng.chance(40) {
                indent
            } else {
                indent + 1 + rng.below(3)
            };
            block(rng, tree, child, out);
        }
    }
}

fn block(rng: &mut Rng, tree: &Tree, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match tree {
        Tree::Scalar(s) => {
            out.push_str(&pad);
            out.push_str(s);
            out.push('\n');
        }
        Tree::Seq(items) => {
            for item in items {
                out.push_str(&pad);
                out.push('-');
                if let Tree::Map(entries) = item
                    && !entries.is_empty()
                    && rng.chance(60)
                {
                    // Compact: `- key: value`.
                    out.push(' ');
                    let mut inner = String::new();
                    block(rng, item, indent + 2, &mut inner);
                    out.push_str(inner.trim_start_matches(' '));
                } else {
                    block_value(rng, item, indent, out);
                }
            }
            if items.is_empty() {
                out.push_str(&pad);
                out.push_str("[]\n");
            }
        }
        Tree::Map(entries) => {
            for (k, v) in entries {
                out.push_str(&pad);
                out.push_str(k);
                out.push(':');
                block_value(rng, v, indent, out);
            }
            if entries.is_empty() {
                out.push_str(&pad);
                out.push_str("{}\n");
            }
        }
    }
}

/// Random edits: the documents that result are often broken or outside the
/// subset, which is the point (the reader must refuse them or agree).
fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(chars.len() + 1);
        match rng.below(4) {
            0 if at < chars.len() => {
                chars.remove(at);
            }
            1 => {
                let c = *rng.pick(&[
                    ' ', ' ', '\t', ':', '-', '#', '"', '\'', '{', '}', '[', ']', ',', '\n', '|', '>', '&',
                    '*', '!', '?', 'é', '\\', '\r', '%', '~', '0', '.',
                ]);
                chars.insert(at.min(chars.len()), c);
            }
            2 => {
                // Re-indent a line.
                let start = chars[..at.min(chars.len())]
                    .iter()
                    .rposition(|&c| c == '\n')
                    .map_or(0, |p| p + 1);
                if rng.chance(50) {
                    chars.insert(start, ' ');
                } else if chars.get(start) == Some(&' ') {
                    chars.remove(start);
                }
            }
            _ => {
                // Duplicate a line.
                let lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let line = rng.below(lines.len());
                    let mut out = lines.clone();
                    out.insert(line, lines[line]);
                    return out.join("\n") + "\n";
                }
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn generated_and_mutated_documents_read_the_same() {
    let cases: usize = std::env::var("FAST_YAML_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(3000);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut generated = Tally::default();
    let mut mutated = Tally::default();
    for case in 0..cases {
        let t = match tree(&mut rng, 0) {
            // Mostly mappings at the top, as manifests are.
            Tree::Scalar(_) if rng.chance(80) => Tree::Map(vec![(key(&mut rng), tree(&mut rng, 1))]),
            t => t,
        };
        let mut text = String::new();
        let indent = rng.below(2);
        block(&mut rng, &t, indent, &mut text);
        if rng.chance(20) {
            text = format!("# head\n{text}---\n{text}");
        }
        check(&format!("generated case {case}"), &text, &mut generated);
        let broken = mutate(&mut rng, &text);
        check(&format!("mutated case {case}"), &broken, &mut mutated);
        if case % 10 == 0 {
            check_load("generated.yaml", &text);
            check_load("mutated.yaml", &broken);
        }
    }
    eprintln!("generated: {generated:?}; mutated: {mutated:?}");
    assert!(
        generated.accepted * 3 >= generated.documents,
        "the fast reader accepted too few generated documents: {generated:?}"
    );
    assert!(mutated.accepted > 0, "{mutated:?}");
}

/// Typed documents, clean and broken, through the direct decode and the
/// reference decode: every fixture's documents as YAML and as `.json`
/// files, then with one value changed at a time (another type, another
/// enum value, an unknown key, a removed line), so that both paths meet
/// unknown fields, wrong types, missing fields, unknown enum values and
/// nulls in every kind the fixtures hold.
#[test]
fn typed_documents_decode_the_same_directly() {
    let mut files = Vec::new();
    yaml_files(&translate_tests().join("fixtures"), &mut files);
    let replacements = [
        "null",
        "[]",
        "{}",
        "[1]",
        "{x: 1}",
        "7",
        "-1",
        "1.5",
        "true",
        "\"\"",
        "bogus",
        "PathPrefix",
        "Exact",
        "RegularExpression",
        "\"80\"",
        "0x10",
        "\"a b\"",
    ];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut documents, mut mutated) = (0usize, 0usize);
    for path in &files {
        let text = std::fs::read_to_string(path).expect("fixture text");
        let input = text.split(MARKER).next().unwrap_or_default();
        let name = path.display().to_string();
        for (index, document) in input.split("\n---\n").enumerate() {
            documents += 1;
            check_load(&format!("{name}.{index}.yaml"), document);
            if let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(document)
                && !value.is_null()
            {
                let json = serde_json::to_string_pretty(&value).expect("JSON");
                check_load(&format!("{name}.{index}.json"), &json);
            }
            let lines: Vec<&str> = document.lines().collect();
            for _ in 0..6 {
                let Some(at) = (0..lines.len()).map(|_| rng.below(lines.len().max(1))).next() else {
                    break;
                };
                let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                let line = &lines[at];
                match rng.below(4) {
                    // Another value after a key's `: `.
                    0 | 1 => match line.split_once(": ") {
                        Some((key, _)) => {
                            edited[at] = format!("{key}: {}", rng.pick(&replacements));
                        }
                        None => continue,
                    },
                    // An unknown key beside this one.
                    2 => {
                        let indent = line.len() - line.trim_start_matches([' ', '-']).len();
                        if indent == 0 && !line.contains(':') {
                            continue;
                        }
                        edited.insert(
                            at + 1,
                            format!("{}bogusField: {}", " ".repeat(indent), rng.pick(&replacements)),
                        );
                    }
                    // A line removed.
                    _ => {
                        edited.remove(at);
                    }
                }
                let edited = edited.join("\n") + "\n";
                mutated += 1;
                check_load(&format!("{name}.{index}.mutated.yaml"), &edited);
                if let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(&edited)
                    && !value.is_null()
                {
                    let json = serde_json::to_string(&value).expect("JSON");
                    check_load(&format!("{name}.{index}.mutated.json"), &json);
                }
            }
        }
    }
    eprintln!("typed documents: {documents}, mutated: {mutated}");
    assert!(documents > 200 && mutated > 1000, "{documents} {mutated}");
}
