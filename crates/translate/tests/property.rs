//! Property test: mutated manifests never make the loader or translator
//! panic, and whatever they produce is accepted by the real Envoy (the
//! translator's promise: a mistake never reaches Envoy as a NACK).
//!
//! Seeds are the golden fixtures' inputs. Each case applies a few random
//! structural mutations (values swapped for hostile ones, keys deleted,
//! list items duplicated, strings mangled). `PORTCULLIS_PROPERTY_CASES`
//! sets the number of cases (default 500); `PORTCULLIS_PROPERTY_SEED` the seed.

mod common;
#[path = "support/fence.rs"]
mod fence;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use serde_json::{Value, json};
use translate::output::bootstrap;

#[path = "support/random_edits.rs"]
mod random_edits;
use random_edits::Rng;

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
        // Control characters Envoy refuses in a virtual host's domains.
        json!("a\nb.example.com"),
        json!("a\rb.example.com"),
        json!("a\u{0}b.example.com"),
        json!("a\tb.example.com"),
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
    let op = rng.below(7);
    if op == 6 {
        // Explode a list past Envoy's count limits (1,000 header
        // mutations on a route) and the u32 weight total: 1,001 copies of
        // its first item, each with a CRD-maximum weight where it has one.
        for cut in (0..path.len()).rev() {
            if let PathSeg::Index(_) = path[cut]
                && let Some(Value::Array(a)) = get_mut(doc, &path[..cut])
                && let Some(mut first) = a.first().cloned()
                && first.to_string().len() < 300
            {
                if let Some(w) = first.get_mut("weight") {
                    *w = json!(1_000_000);
                }
                *a = vec![first; 1001];
                return;
            }
        }
        return;
    }
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
    // Fenced means fenced on generated inputs too: the first cases whose
    // output fences something are asked for through the real Envoy at
    // every path variant (bounded: an Envoy start per case).
    let fence_cases: usize = (cases / 10).max(10);
    let mut fenced = fence::Tally::default();
    let mut fence_checked = 0usize;
    let backend = fence::responder();
    let fence_dir = std::env::temp_dir().join(format!("portcullis-property-fence-{}", std::process::id()));
    std::fs::create_dir_all(&fence_dir).expect("temp dir");
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
            } else if fence_checked < fence_cases {
                let before = fenced.asserted;
                fence::check_gateway(&format!("case {case}"), key, gw, backend, &fence_dir, &mut fenced);
                if fenced.asserted > before {
                    fence_checked += 1;
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&fence_dir);
    println!(
        "fence: {} fenced routes in {fence_checked} cases asserted with {} variants; skipped {:?}",
        fenced.asserted, fenced.variants, fenced.skipped
    );
    println!(
        "{} NACK/panic failures, {} requests escaped a fence",
        failures.len(),
        fenced.failures.len()
    );
    failures.extend(fenced.failures.iter().take(5).cloned());
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

/// Loads and translates one generated case, and asks the real Envoy about
/// every Gateway's output: a panic or a rejection is a failure (named by
/// `label`, with `detail` after Envoy's message). `None` after a panic.
fn translate_case(
    text: &str,
    label: &str,
    detail: &str,
    failures: &mut Vec<String>,
) -> Option<translate::Output> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let loaded = api::loader::load_str("case.json", text);
        translate::translate(&loaded.inputs, &translate::Settings::default())
    }));
    let Ok(out) = result else {
        failures.push(format!("{label}: panic{detail}"));
        return None;
    };
    for (key, gw) in &out.gateways {
        let b = bootstrap::static_bootstrap(gw, key, &Default::default());
        if let Err(e) = testkit::envoy::validate(&b) {
            let e: String = e.chars().take(600).collect();
            failures.push(format!("{label}: Envoy rejected Gateway {key}: {e}{detail}"));
        }
    }
    Some(out)
}

/// Pieces of TrafficPolicies, valid and not: what users get wrong.
const CEL: &[&str] = &[
    "request.headers['x-user'] == 'admin'",
    "request.path.startsWith('/api') || request.method == 'POST'",
    "has(request.headers.authorization)",
    "request.size > 100 && source.address != '10.0.0.1'",
    "request.headers['x-user'] in ['a', 'b', 'c']",
    "size(request.path) < 1000u",
    "request.headers['x'] ==",
    "request.headers.all(h, h != '')",
    "Foo{a: 1}",
    "((((((((((((((((((((((((((((((((((1))))))))))))))))))))))))))))))))))",
    "'\\q'",
    "b'\\xff' == request.headers['x']",
    "request.time > timestamp('2020-01-01T00:00:00Z')",
    "!(!(!true))",
    "-9223372036854775808",
    "1.5e308 * 10.0",
    "nosuchfn(request.path) == 1",
    "string(1) == '1'",
    "request.path.matches('a(')",
    "request.path.size(1) == 1",
];
const FORMATS: &[&str] = &[
    "%REQ(x-user)%",
    "%DOWNSTREAM_REMOTE_ADDRESS%",
    "100%",
    "%%",
    "%START_TIME(%Y)%",
    "%NOT_A_COMMAND%",
    "%REQ(x-a?x-b):5%",
    "%PROTOCOL(x)%",
    "plain",
    "%REQ(",
];
const ORIGINS: &[&str] = &[
    "https://a.example",
    "*",
    "https://*.example.com",
    "http://a.example:8080",
    "a.example",
    "https://*.",
    "ftp://x",
];
const DURATIONS: &[&str] = &["1s", "10ms", "50ms", "0s", "1h", "99999h", "abc", "1m30s"];
const NUMBERS: &[i64] = &[0, 1, 5, 1000, 1001, -1, 4_294_967_295, 4_294_967_296];
const HEADERS: &[&str] = &["x-ok", "bad header", "host", ":path", "X-Mixed-Case"];

fn pick<'a, T>(rng: &mut Rng, from: &'a [T]) -> &'a T {
    &from[rng.below(from.len())]
}

fn random_policy(rng: &mut Rng, i: usize, rule_names: &[&str]) -> Value {
    let mut spec = serde_json::Map::new();
    let mut target = json!({"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "r"});
    if rng.below(2) == 0 {
        target["sectionName"] = json!(pick(rng, rule_names));
    }
    spec.insert("targetRefs".into(), json!([target]));
    let n = 1 + rng.below(4);
    for _ in 0..n {
        match rng.below(8) {
            0 => {
                let exprs: Vec<&str> = (0..=rng.below(3)).map(|_| *pick(rng, CEL)).collect();
                let action = if rng.below(2) == 0 { "Allow" } else { "Deny" };
                spec.insert(
                    "rbac".into(),
                    json!({"action": action, "matchExpressions": exprs}),
                );
            }
            1 => {
                let v = *pick(rng, FORMATS);
                let h = *pick(rng, HEADERS);
                spec.insert(
                    "transformation".into(),
                    json!({"request": {"set": [{"name": h, "value": v}]}, "response": {"add": [{"name": "x-r", "value": v}]}}),
                );
            }
            2 => {
                let origins: Vec<&str> = (0..=rng.below(2)).map(|_| *pick(rng, ORIGINS)).collect();
                spec.insert(
                    "cors".into(),
                    json!({"allowOrigins": origins, "allowMethods": ["GET"], "maxAge": pick(rng, NUMBERS),
                           "allowCredentials": rng.below(2) == 0}),
                );
            }
            3 => {
                spec.insert(
                    "localRateLimit".into(),
                    json!({"tokenBucket": {"maxTokens": pick(rng, NUMBERS), "tokensPerFill": pick(rng, NUMBERS),
                                           "fillInterval": pick(rng, DURATIONS)}}),
                );
            }
            4 => {
                spec.insert(
                    "timeouts".into(),
                    json!({"request": pick(rng, DURATIONS), "idle": pick(rng, DURATIONS)}),
                );
            }
            5 => {
                spec.insert(
                    "retry".into(),
                    json!({"attempts": pick(rng, NUMBERS), "statusCodes": [pick(rng, NUMBERS)],
                           "perTryTimeout": pick(rng, DURATIONS), "backoffBaseInterval": pick(rng, DURATIONS)}),
                );
            }
            6 => {
                let name = if rng.below(3) == 0 { "missing" } else { "auth" };
                spec.insert("extAuth".into(), json!({"extensionRef": {"name": name}}));
            }
            _ => {
                let h = *pick(rng, HEADERS);
                spec.insert(
                    "headerModifiers".into(),
                    json!({"request": {"set": [{"name": h, "value": pick(rng, FORMATS)}], "remove": [h]}}),
                );
            }
        }
    }
    json!({
        "apiVersion": "gateway.portcullis.dev/v1alpha1",
        "kind": "TrafficPolicy",
        "metadata": {"name": format!("p{i}"), "namespace": "app"},
        "spec": spec,
    })
}

/// Random policy sets on a fixed route set: every output passes the real
/// Envoy's validation, whatever the policies say.
#[test]
fn random_policies_never_nack() {
    let cases: usize = std::env::var("PORTCULLIS_PROPERTY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(150, |n: usize| (n / 3).max(1));
    let base: Vec<Value> = seeds_named("policy-features.yaml")
        .into_iter()
        .filter(|d| d["kind"] != "TrafficPolicy")
        .collect();
    assert!(base.iter().any(|d| d["kind"] == "HTTPRoute"), "base routes");
    let mut rng = Rng(0x0b0c_a11e | 1);
    let mut failures = Vec::new();
    let (mut replaced, mut clean) = (0usize, 0usize);
    for case in 0..cases {
        let mut docs = base.clone();
        for i in 0..=rng.below(3) {
            docs.push(random_policy(&mut rng, i, &["admin", "missing-rule"]));
        }
        let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": docs}))
            .unwrap_or_default();
        let Some(out) = translate_case(
            &text,
            &format!("case {case}"),
            &format!("\ninput: {text}"),
            &mut failures,
        ) else {
            continue;
        };
        if out.replacements.is_empty() {
            clean += 1;
        } else {
            replaced += 1;
        }
    }
    println!(
        "{cases} policy cases ({clean} clean, {replaced} with replaced rules), {} failures",
        failures.len()
    );
    // Both kinds of case must occur, or the generator tests nothing.
    assert!(clean > 0 && replaced > 0, "clean {clean}, replaced {replaced}");
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.iter().take(3).cloned().collect::<Vec<_>>().join("\n\n")
    );
}

fn seeds_named(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(path).expect("read fixture");
    let input = text.split("# ---- expected output").next().unwrap_or("");
    serde_saphyr::from_multiple::<Value>(input)
        .unwrap_or_default()
        .into_iter()
        .filter(|d| d.is_object())
        .collect()
}

/// Counts and sums at Envoy's route limits: header additions around 1,000
/// (rule, backend and TrafficPolicy levels, merged on one route) and
/// backend weights whose total, invalid backends included, crosses u32.
/// Every output passes the real Envoy's validation; both kinds of case
/// (clean, replaced) must occur.
#[test]
fn random_limits_never_nack() {
    let cases: usize = std::env::var("PORTCULLIS_PROPERTY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(40, |n: usize| (n / 10).max(1));
    let base: Vec<Value> = seeds_named("basic-http.yaml")
        .into_iter()
        .filter(|d| d["kind"] != "HTTPRoute")
        .collect();
    let backend = base
        .iter()
        .find(|d| d["kind"] == "Service")
        .and_then(|d| d["metadata"]["name"].as_str())
        .unwrap_or("web")
        .to_string();
    let port = base
        .iter()
        .find(|d| d["kind"] == "Service")
        .and_then(|d| d["spec"]["ports"][0]["port"].as_i64())
        .unwrap_or(80);
    const COUNTS: &[usize] = &[0, 1, 400, 600, 999, 1000, 1001];
    let headers = |n: usize, p: &str| -> Value {
        (0..n)
            .map(|i| json!({"name": format!("x-{p}-{i}"), "value": "v"}))
            .collect()
    };
    let mut rng = Rng(0x11_1117 | 1);
    let mut failures = Vec::new();
    let (mut replaced, mut clean) = (0usize, 0usize);
    for case in 0..cases {
        let mut docs = base.clone();
        let dir = if rng.below(2) == 0 { "request" } else { "response" };
        let filter = |n: usize, p: &str| {
            let (t, k) = if dir == "request" {
                ("RequestHeaderModifier", "requestHeaderModifier")
            } else {
                ("ResponseHeaderModifier", "responseHeaderModifier")
            };
            json!({"type": t, k: {"set": headers(n, p)}})
        };
        let rule_n = *pick(&mut rng, COUNTS);
        let backend_n = *pick(&mut rng, COUNTS);
        let policy_n = *pick(&mut rng, COUNTS);
        // Weights: a few large backends, some of them invalid (missing).
        let mut refs = Vec::new();
        let big = rng.below(2) == 0;
        let n_backends = if big {
            4290 + rng.below(10)
        } else {
            1 + rng.below(3)
        };
        for i in 0..n_backends {
            let name = if i % 7 == 3 {
                "missing".to_string()
            } else {
                backend.clone()
            };
            let mut r = json!({"name": name, "port": port, "weight": 1_000_000});
            if i == 0 {
                r["filters"] = json!([filter(backend_n, "b")]);
            }
            refs.push(r);
        }
        docs.push(json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "limits", "namespace": base.iter().find(|d| d["kind"] == "Service").and_then(|d| d["metadata"]["namespace"].as_str()).unwrap_or("default")},
            "spec": {
                "parentRefs": base.iter().find(|d| d["kind"] == "Gateway").map(|g| json!([{"name": g["metadata"]["name"], "namespace": g["metadata"]["namespace"]}])).unwrap_or(json!([])),
                "rules": [
                    {"name": "limits", "matches": [{"path": {"type": "PathPrefix", "value": "/limits"}}],
                     "filters": [filter(rule_n, "r")], "backendRefs": refs},
                    {"matches": [{"path": {"type": "PathPrefix", "value": "/fine"}}],
                     "backendRefs": [{"name": backend, "port": port}]}
                ]
            }
        }));
        if policy_n > 0 {
            docs.push(json!({
                "apiVersion": "gateway.portcullis.dev/v1alpha1",
                "kind": "TrafficPolicy",
                "metadata": {"name": "adds", "namespace": docs.last().map(|d| d["metadata"]["namespace"].clone()).unwrap_or(json!("default"))},
                "spec": {
                    "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "limits", "sectionName": "limits"}],
                    "headerModifiers": {dir: {"add": headers(policy_n, "p")}}
                }
            }));
        }
        let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": docs}))
            .unwrap_or_default();
        let label = format!(
            "case {case} (rule {rule_n}, backend {backend_n}, policy {policy_n} {dir} additions; {n_backends} backends)"
        );
        let Some(out) = translate_case(&text, &label, "", &mut failures) else {
            continue;
        };
        if out.replacements.is_empty() {
            clean += 1;
        } else {
            replaced += 1;
        }
    }
    println!(
        "{cases} limit cases ({clean} clean, {replaced} with replaced rules), {} failures",
        failures.len()
    );
    assert!(clean > 0 && replaced > 0, "clean {clean}, replaced {replaced}");
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.iter().take(3).cloned().collect::<Vec<_>>().join("\n\n")
    );
}

/// One random TrafficPolicy at one level of the hierarchy over
/// `policy-listenerset-valid`'s objects: the Gateway (by targetRef or not
/// at all), one of its own listeners, the whole ListenerSet (by targetRef
/// or label selector), one ListenerSet listener (HTTP or HTTPS), a route,
/// or a rule. Features as [`random_policy`]: valid and invalid.
fn random_scope_policy(rng: &mut Rng, i: usize) -> (Value, &'static str) {
    let mut p = random_policy(rng, i, &["main"]);
    let gw = "gateway.networking.k8s.io";
    let (namespace, level, targets, selectors) = match rng.below(7) {
        0 => (
            "infra",
            "gateway",
            json!([{"group": gw, "kind": "Gateway", "name": "gw"}]),
            None,
        ),
        1 => (
            "infra",
            "gateway listener",
            json!([{"group": gw, "kind": "Gateway", "name": "gw", "sectionName": "g"}]),
            None,
        ),
        2 => (
            "infra",
            "listenerset",
            json!([{"group": gw, "kind": "ListenerSet", "name": "ls"}]),
            None,
        ),
        3 => (
            "infra",
            "listenerset selector",
            json!([]),
            Some(json!([{"group": gw, "kind": "ListenerSet", "matchLabels": {"tier": "edge"}}])),
        ),
        4 => (
            "infra",
            "listenerset listener",
            json!([{"group": gw, "kind": "ListenerSet", "name": "ls", "sectionName": pick(rng, &["a", "c", "s"])}]),
            None,
        ),
        5 => (
            "app",
            "route",
            json!([{"group": gw, "kind": "HTTPRoute", "name": pick(rng, &["a", "c", "g", "s"])}]),
            None,
        ),
        _ => (
            "app",
            "rule",
            json!([{"group": gw, "kind": "HTTPRoute", "name": pick(rng, &["a", "c", "g", "s"]), "sectionName": "main"}]),
            None,
        ),
    };
    p["metadata"]["namespace"] = json!(namespace);
    p["spec"]["targetRefs"] = targets;
    if let Some(s) = selectors {
        p["spec"]["targetSelectors"] = s;
    }
    (p, level)
}

/// Random policies at every level (Gateway, Gateway listener, ListenerSet,
/// ListenerSet listener, route, rule), valid and invalid, several per
/// case: no panic, every Gateway's output passes the real Envoy, and the
/// first cases that fence something (rules, virtual hosts, route
/// configurations) are asked for through the real Envoy at every path
/// variant: fenced stays fenced.
#[test]
fn random_scope_policies_never_nack() {
    let cases: usize = std::env::var("PORTCULLIS_PROPERTY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(150, |n: usize| (n / 3).max(1));
    let mut base: Vec<Value> = seeds_named("policy-listenerset-valid.yaml")
        .into_iter()
        .filter(|d| d["kind"] != "TrafficPolicy")
        .collect();
    // Rule-level targets need a named rule.
    for d in base.iter_mut().filter(|d| d["kind"] == "HTTPRoute") {
        d["spec"]["rules"][0]["name"] = json!("main");
    }
    // The extAuth provider (and its backend) in both policy namespaces.
    let auth: Vec<Value> = seeds_named("policy-features.yaml")
        .into_iter()
        .filter(|d| {
            let name = d["metadata"]["name"].as_str().unwrap_or("");
            (d["kind"] == "GatewayExtension" && name == "auth")
                || (d["kind"] == "Service" && name == "authz")
                || (d["kind"] == "EndpointSlice" && name.starts_with("authz"))
        })
        .collect();
    assert!(
        auth.iter().any(|d| d["kind"] == "GatewayExtension"),
        "auth provider"
    );
    for d in auth {
        let mut infra = d.clone();
        infra["metadata"]["namespace"] = json!("infra");
        base.push(d);
        base.push(infra);
    }
    let mut rng = Rng(0x5c0b_e5e7 | 1);
    let mut failures = Vec::new();
    let (mut clean, mut fenced_scope, mut replaced_rules) = (0usize, 0usize, 0usize);
    let mut levels = std::collections::BTreeMap::<&str, usize>::new();
    let mut tally = fence::Tally::default();
    let mut fence_checked = 0usize;
    let backend = fence::responder();
    let fence_dir = std::env::temp_dir().join(format!("portcullis-scope-fence-{}", std::process::id()));
    std::fs::create_dir_all(&fence_dir).expect("temp dir");
    for case in 0..cases {
        let mut docs = base.clone();
        for i in 0..=rng.below(4) {
            let (p, level) = random_scope_policy(&mut rng, i);
            *levels.entry(level).or_default() += 1;
            docs.push(p);
        }
        let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": docs}))
            .unwrap_or_default();
        let label = format!("case {case}");
        let Some(out) = translate_case(&text, &label, &format!("\ninput: {text}"), &mut failures) else {
            continue;
        };
        let fences = !out.scope_replacements.is_empty() || !out.replacements.is_empty();
        if !out.scope_replacements.is_empty() {
            fenced_scope += 1;
        }
        if !out.replacements.is_empty() {
            replaced_rules += 1;
        }
        if !fences {
            clean += 1;
        } else if fence_checked < 12 {
            let before = tally.asserted;
            for (key, gw) in &out.gateways {
                fence::check_gateway(&label, key, gw, backend, &fence_dir, &mut tally);
            }
            if tally.asserted > before {
                fence_checked += 1;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&fence_dir);
    println!(
        "{cases} scope policy cases ({clean} clean, {fenced_scope} with fenced scopes, {replaced_rules} with replaced rules; levels {levels:?}); fence: {} fenced routes in {fence_checked} cases, {} variants, skipped {:?}",
        tally.asserted, tally.variants, tally.skipped
    );
    failures.extend(tally.failures.iter().take(5).cloned());
    // Every level and both outcomes must occur, or the generator tests
    // less than it claims.
    assert_eq!(levels.len(), 7, "{levels:?}");
    assert!(clean > 0 && fenced_scope > 0 && replaced_rules > 0);
    assert!(tally.asserted > 0, "no fenced route was asked for");
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.iter().take(3).cloned().collect::<Vec<_>>().join("\n\n")
    );
}
