//! Property test: mutated manifests never make the loader or translator
//! panic, and whatever they produce is accepted by the real Envoy (the
//! translator's promise: a mistake never reaches Envoy as a NACK).
//!
//! Seeds are the golden fixtures' inputs. Each case applies a few random
//! structural mutations (values swapped for hostile ones, keys deleted,
//! list items duplicated, strings mangled). `PORTCULLIS_PROPERTY_CASES`
//! sets the number of cases (default 500); `PORTCULLIS_PROPERTY_SEED` the seed.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use serde_json::{Value, json};
use translate::output::bootstrap;

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
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Values that have broken control planes before.
fn hostile(rng: &mut Rng) -> Value {
    let pool: &[Value] = &[
        json!(""),
        json!("*"),
        json!("/"),
        json!("//"),
        json!("/a b"),
        json!("/%"),
        json!("100%"),
        json!("%REQ(x)%"),
        json!("(a"),
        json!("a{1000}"),
        json!("(abc|def|ghi|jkl){1,30}"),
        json!("\\1"),
        json!("(?=x)"),
        json!("a++"),
        json!("bad header"),
        json!(":authority"),
        json!("Host"),
        json!("x\ny"),
        json!("*.example.com"),
        // Sizes and numbers at and past Envoy's and the CRDs' limits.
        json!("x".repeat(1025)),
        json!(format!("x-{}", "a".repeat(16400))),
        json!(2_000_000_000u64),
        json!(4_294_967_296u64),
        json!(-1),
        json!("*.*.com"),
        json!("EXAMPLE.com"),
        json!("1.2.3.4"),
        json!("-a.com"),
        json!("a".repeat(300)),
        json!(0),
        json!(-1),
        json!(65536),
        json!(i64::MAX),
        json!(1.5),
        json!(true),
        json!(null),
        json!([]),
        json!({}),
        json!(["x"]),
        json!("0s"),
        json!("99999h"),
        json!("1ms"),
        json!("Exact"),
        json!("PathPrefix"),
        json!("RegularExpression"),
        json!("ReplacePrefixMatch"),
        json!("ReplaceFullPath"),
        json!("HTTPS"),
        json!("TCP"),
        json!("Selector"),
        json!("web"),
        json!("gw"),
        json!("infra"),
        json!("app"),
        json!("Service"),
        json!("Secret"),
        json!(""),
    ];
    pool[rng.below(pool.len())].clone()
}

/// Every path to a value in the document.
fn paths(v: &Value, prefix: &mut Vec<PathSeg>, out: &mut Vec<Vec<PathSeg>>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                prefix.push(PathSeg::Key(k.clone()));
                out.push(prefix.clone());
                paths(c, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                prefix.push(PathSeg::Index(i));
                out.push(prefix.clone());
                paths(c, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum PathSeg {
    Key(String),
    Index(usize),
}

fn get_mut<'a>(v: &'a mut Value, path: &[PathSeg]) -> Option<&'a mut Value> {
    let mut cur = v;
    for seg in path {
        cur = match (seg, cur) {
            (PathSeg::Key(k), Value::Object(m)) => m.get_mut(k)?,
            (PathSeg::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn mutate(doc: &mut Value, rng: &mut Rng) {
    let mut all = Vec::new();
    paths(doc, &mut Vec::new(), &mut all);
    // Keep apiVersion/kind mostly intact so the mutation reaches the translator.
    all.retain(|p| !matches!(p.first(), Some(PathSeg::Key(k)) if k == "apiVersion" || k == "kind"));
    if all.is_empty() {
        return;
    }
    let path = all[rng.below(all.len())].clone();
    let op = rng.below(6);
    if op == 0 {
        // Delete the key / item.
        let (last, parent) = match path.split_last() {
            Some(x) => x,
            None => return,
        };
        if let Some(p) = get_mut(doc, parent) {
            match (last, p) {
                (PathSeg::Key(k), Value::Object(m)) => {
                    m.remove(k);
                }
                (PathSeg::Index(i), Value::Array(a)) if *i < a.len() => {
                    a.remove(*i);
                }
                _ => {}
            }
        }
    } else if op == 1 {
        // Duplicate a list item.
        if let Some((PathSeg::Index(i), parent)) = path.split_last()
            && let Some(Value::Array(a)) = get_mut(doc, parent)
            && let Some(item) = a.get(*i).cloned()
        {
            a.push(item);
        }
    } else if op == 2 {
        // Mangle a string.
        if let Some(Value::String(s)) = get_mut(doc, &path) {
            let n = rng.below(4);
            *s = match n {
                0 => s.to_uppercase(),
                1 => format!("{s}{s}"),
                2 => s.chars().rev().collect(),
                _ => format!("{s}(\\"),
            };
        }
    } else if let Some(v) = get_mut(doc, &path) {
        *v = hostile(rng);
    }
}

fn seeds() -> Vec<Vec<Value>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).expect("read fixture");
            let input = text
                .split("# ---- expected output")
                .next()
                .unwrap_or("")
                .to_string();
            serde_saphyr::from_multiple::<Value>(&input)
                .unwrap_or_default()
                .into_iter()
                .filter(|d| d.is_object())
                .collect()
        })
        .filter(|docs: &Vec<Value>| !docs.is_empty())
        .collect()
}

#[test]
fn mutated_inputs_never_panic_and_never_nack() {
    let cases: usize = std::env::var("PORTCULLIS_PROPERTY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let seed: u64 = std::env::var("PORTCULLIS_PROPERTY_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x005e_ed0f_9a7e);
    let seeds = seeds();
    assert!(seeds.len() >= 30, "expected the fixtures as seeds");
    let mut rng = Rng(seed | 1);
    let mut failures = Vec::new();
    let mut validated = 0usize;
    for case in 0..cases {
        let mut docs = seeds[rng.below(seeds.len())].clone();
        for _ in 0..=rng.below(4) {
            let i = rng.below(docs.len());
            mutate(&mut docs[i], &mut rng);
        }
        let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": docs}))
            .unwrap_or_default();
        let result = catch_unwind(AssertUnwindSafe(|| {
            let loaded = api::loader::load_str("case.json", &text);
            let out = translate::translate(&loaded.inputs, &translate::Settings::default());
            (loaded, out)
        }));
        let (loaded, out) = match result {
            Ok(x) => x,
            Err(_) => {
                failures.push(format!("case {case}: panic on input {text}"));
                continue;
            }
        };
        if loaded
            .diagnostics
            .iter()
            .chain(&out.diagnostics)
            .any(|d| d.file.is_none())
        {
            failures.push(format!("case {case}: a diagnostic names no file"));
        }
        for (key, gw) in &out.gateways {
            validated += 1;
            let b = bootstrap::static_bootstrap(gw, key, &Default::default());
            if let Err(e) = testkit::envoy::validate(&b) {
                failures.push(format!(
                    "case {case}: Envoy rejected Gateway {key}: {e}\ninput: {text}"
                ));
            }
        }
    }
    println!(
        "{cases} cases, {validated} Gateway outputs validated by Envoy, {} failures",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.iter().take(5).cloned().collect::<Vec<_>>().join("\n\n")
    );
}
