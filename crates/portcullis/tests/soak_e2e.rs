//! The soak test (#15 item 5): `portcullis serve` with many routes and the
//! real Envoy, random edits of every kind — valid and invalid routes,
//! policies, Services, the Gateway — while continuous traffic runs on routes
//! no edit touches. Checked throughout: no NACK, no failed request on the
//! untouched routes, every edit visible in Envoy (its own probe), `serve`'s
//! RSS flat. Prints propagation percentiles and RSS samples.
//!
//! Length and size are chosen by the environment, so CI runs a short one
//! and a long one is the same code:
//! - `PORTCULLIS_SOAK_SECS` (default 20), `PORTCULLIS_SOAK_ROUTES` (default
//!   2,000: a debug build translates 10,000 routes in seconds, which would
//!   turn a short run into a handful of edits), `PORTCULLIS_SOAK_SEED`;
//! - the 10-minute, 10,000-route run of the issue:
//!   `PORTCULLIS_SOAK_SECS=600 PORTCULLIS_SOAK_ROUTES=10000 cargo test --release -p portcullis --test soak_e2e -- --nocapture`.
//!
//! Edits are applied one at a time: each is written, then its probe is
//! polled (every 5 ms) until Envoy shows it, so every edit's propagation
//! time is measured and a later edit never hides an earlier one.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;

/// Routes per file: an edit rewrites the whole file, as an editor would.
const PER_FILE: usize = 500;
/// Routes no edit touches; the traffic thread asks them.
const STABLE: usize = 8;
/// How long one edit may take to show before the soak fails.
const VISIBLE_WITHIN: Duration = Duration::from_secs(60);

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small deterministic generator (xorshift), so a failing seed replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// What one request showed: status, response head, body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// One request on a fresh connection. `full`: read the body (the echo
/// backend closes after it); otherwise stop after the head, because Envoy
/// delays closing after its own replies (404, 500) by a second.
fn ask(port: u16, host: &str, path: &str, full: bool) -> Option<Answer> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if !full && buf.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some(Answer {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_string(),
    })
}

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn metric_sum(admin: u16, name: &str) -> Option<f64> {
    let a = ask(admin, "localhost", "/metrics", true)?;
    // A family without series is not exposed, so a renamed NACK metric
    // would read as "no NACK": the ACK counter beside it must be there.
    (a.status == 200 && a.body.contains("portcullis_xds_acks_total")).then_some(())?;
    Some(
        a.body
            .lines()
            .filter(|l| l.starts_with(name) && !l.starts_with('#'))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum(),
    )
}

/// The whole input, kept in memory and written file by file.
struct World {
    dir: PathBuf,
    gw_port: u16,
    extra_port: u16,
    backend_a: u16,
    backend_b: u16,
    routes: usize,
    /// Per churn route: the generation its path carries (`/v<gen>`).
    generation: Vec<u32>,
    /// Churn routes whose rule is currently invalid (fenced).
    broken: BTreeSet<usize>,
    /// Added routes (`n<k>`), in `added.yaml`.
    added: BTreeSet<usize>,
    next_added: usize,
    /// Valid policies by target route (in `policies.yaml`): each sets
    /// response header `x-soak: <value>`.
    policies: BTreeMap<usize, u32>,
    /// Routes targeted by a policy with a misspelled field, each in its own
    /// file (`bad-policy-<i>.yaml`): a file with a load error keeps its last
    /// good version in force (README, "file mode"), so sharing a file with
    /// valid policies would freeze them too.
    bad_policies: BTreeSet<usize>,
    /// Which backend Service `flip` points at.
    flip_to_b: bool,
    extra_listener: bool,
}

impl World {
    fn write(&self, file: &str, text: &str) {
        // Written beside and renamed, as editors and `kubectl`-like tools
        // do, so the watcher never reads half a file.
        let tmp = self.dir.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).expect("write");
        std::fs::rename(&tmp, self.dir.join(file)).expect("rename");
    }

    fn base(&self) -> String {
        let extra = if self.extra_listener {
            format!(
                "\n  - {{name: extra, protocol: HTTP, port: {}, allowedRoutes: {{namespaces: {{from: All}}}}}}",
                self.extra_port
            )
        } else {
            String::new()
        };
        let flip_port = if self.flip_to_b {
            self.backend_b
        } else {
            self.backend_a
        };
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: portcullis}}\nspec: {{controllerName: portcullis.dev/gateway-controller}}\n---\n\
             apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: infra}}\nspec:\n  gatewayClassName: portcullis\n  listeners:\n  - {{name: http, protocol: HTTP, port: {gw}, allowedRoutes: {{namespaces: {{from: All}}}}}}{extra}\n---\n\
             {a}\n---\n{flip}\n",
            gw = self.gw_port,
            a = service("echo", self.backend_a),
            flip = service("flip", flip_port),
        )
    }

    fn stable(&self) -> String {
        let mut s = String::new();
        for k in 0..STABLE {
            s.push_str(&route_yaml(&format!("s{k}"), "/", "echo", ""));
        }
        s.push_str(&route_yaml("flip", "/", "flip", ""));
        s
    }

    fn route_file(&self, f: usize) -> String {
        let mut s = String::new();
        for i in f * PER_FILE..((f + 1) * PER_FILE).min(self.routes) {
            let path = format!("/v{}", self.generation[i]);
            // An invalid rule: a header name Envoy refuses. The rule is
            // fenced (500), the rest of the Gateway keeps serving.
            let filters = if self.broken.contains(&i) {
                "    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: \"bad header\", value: x}]}}]\n"
            } else {
                ""
            };
            s.push_str(&route_yaml(&format!("r{i}"), &path, "echo", filters));
        }
        s
    }

    fn added_file(&self) -> String {
        let mut s = String::new();
        for k in &self.added {
            s.push_str(&route_yaml(&format!("n{k}"), "/", "echo", ""));
        }
        s
    }

    fn policy_file(&self) -> String {
        let mut s = String::new();
        for (i, v) in &self.policies {
            let body = format!("headerModifiers: {{response: {{set: [{{name: x-soak, value: \"{v}\"}}]}}}}");
            s.push_str(&policy_yaml(&format!("p{i}"), *i, &body));
        }
        s
    }

    fn bad_policy_file(i: usize) -> String {
        policy_yaml(
            &format!("bad{i}"),
            i,
            "headerModifierz: {response: {set: [{name: x-soak, value: \"0\"}]}}",
        )
    }

    /// What route `i` answers on its current path when it is not broken by
    /// its own rule: fenced by a bad policy, else the valid policy's header.
    fn route_want(&self, i: usize) -> Want {
        if self.broken.contains(&i) || self.bad_policies.contains(&i) {
            Want::Status(500)
        } else if let Some(v) = self.policies.get(&i) {
            Want::Header(v.to_string())
        } else {
            Want::NotHeader
        }
    }

    fn write_all(&self) {
        self.write("base.yaml", &self.base());
        self.write("stable.yaml", &self.stable());
        for f in 0..self.routes.div_ceil(PER_FILE) {
            self.write(&format!("routes-{f}.yaml"), &self.route_file(f));
        }
        self.write("added.yaml", &self.added_file());
        self.write("policies.yaml", &self.policy_file());
    }
}

fn policy_yaml(name: &str, route: usize, body: &str) -> String {
    format!(
        "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: {name}, namespace: app}}\nspec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r{route}}}]\n  {body}\n---\n"
    )
}

fn route_yaml(name: &str, path: &str, backend: &str, filters: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\nspec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  hostnames: [\"{name}.example.com\"]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: \"{path}\"}}}}]\n{filters}    backendRefs: [{{name: {backend}, port: 80}}]\n---\n"
    )
}

/// What an edit must look like once Envoy has it.
struct Probe {
    port: u16,
    host: String,
    path: String,
    want: Want,
}

enum Want {
    Status(u16),
    Header(String),
    NotHeader,
    Pod(&'static str),
    /// The listener is gone: no answer at all.
    Refused,
}

impl Probe {
    fn holds(&self) -> bool {
        let full = matches!(self.want, Want::Pod(_));
        let answer = ask(self.port, &self.host, &self.path, full);
        match (&self.want, answer) {
            (Want::Refused, a) => a.is_none(),
            (_, None) => false,
            (Want::Status(s), Some(a)) => a.status == *s,
            (Want::Header(v), Some(a)) => a.status == 200 && a.head.contains(&format!("x-soak: {v}")),
            (Want::NotHeader, Some(a)) => a.status == 200 && !a.head.contains("x-soak:"),
            (Want::Pod(p), Some(a)) => a.status == 200 && a.body.contains(&format!("\"{p}\"")),
        }
    }
}

/// Applies one random edit and returns its kind and probe.
fn edit(w: &mut World, rng: &mut Rng) -> (&'static str, Probe) {
    let gw = w.gw_port;
    let route_probe = |i: usize, generation: u32, want: Want| Probe {
        port: gw,
        host: format!("r{i}.example.com"),
        path: format!("/v{generation}"),
        want,
    };
    let roll = rng.below(100);
    let i = rng.below(w.routes);
    let file = format!("routes-{}.yaml", i / PER_FILE);
    match roll {
        // A route's path changes (and a broken one is repaired).
        0..=34 => {
            w.generation[i] += 1;
            w.broken.remove(&i);
            w.write(&file, &w.route_file(i / PER_FILE));
            ("route-modify", route_probe(i, w.generation[i], w.route_want(i)))
        }
        // A route becomes invalid: fenced with a 500.
        35..=44 => {
            w.broken.insert(i);
            w.write(&file, &w.route_file(i / PER_FILE));
            (
                "route-invalid",
                route_probe(i, w.generation[i], Want::Status(500)),
            )
        }
        45..=54 => {
            let k = w.next_added;
            w.next_added += 1;
            w.added.insert(k);
            w.write("added.yaml", &w.added_file());
            let probe = Probe {
                port: gw,
                host: format!("n{k}.example.com"),
                path: "/".into(),
                want: Want::Status(200),
            };
            ("route-add", probe)
        }
        55..=62 => {
            let Some(&k) = w.added.iter().nth(rng.below(w.added.len())) else {
                return edit(w, rng);
            };
            w.added.remove(&k);
            w.write("added.yaml", &w.added_file());
            let probe = Probe {
                port: gw,
                host: format!("n{k}.example.com"),
                path: "/".into(),
                want: Want::Status(404),
            };
            ("route-delete", probe)
        }
        63..=72 => {
            w.policies.insert(i, rng.below(1_000_000) as u32);
            w.write("policies.yaml", &w.policy_file());
            ("policy-valid", route_probe(i, w.generation[i], w.route_want(i)))
        }
        73..=77 => {
            w.bad_policies.insert(i);
            w.write(&format!("bad-policy-{i}.yaml"), &World::bad_policy_file(i));
            (
                "policy-invalid",
                route_probe(i, w.generation[i], Want::Status(500)),
            )
        }
        78..=84 => {
            let targets: Vec<(usize, bool)> = (w.policies.keys().map(|&j| (j, false)))
                .chain(w.bad_policies.iter().map(|&j| (j, true)))
                .collect();
            if targets.is_empty() {
                return edit(w, rng);
            }
            let (j, bad) = targets[rng.below(targets.len())];
            if bad {
                w.bad_policies.remove(&j);
                std::fs::remove_file(w.dir.join(format!("bad-policy-{j}.yaml"))).expect("remove bad policy");
            } else {
                w.policies.remove(&j);
                w.write("policies.yaml", &w.policy_file());
            }
            ("policy-remove", route_probe(j, w.generation[j], w.route_want(j)))
        }
        85..=94 => {
            w.flip_to_b = !w.flip_to_b;
            w.write("base.yaml", &w.base());
            let probe = Probe {
                port: gw,
                host: "flip.example.com".into(),
                path: "/".into(),
                want: Want::Pod(if w.flip_to_b { "echo-b" } else { "echo-a" }),
            };
            ("service-edit", probe)
        }
        _ => {
            w.extra_listener = !w.extra_listener;
            w.write("base.yaml", &w.base());
            let probe = Probe {
                port: w.extra_port,
                host: "s0.example.com".into(),
                path: "/".into(),
                want: if w.extra_listener {
                    Want::Status(200)
                } else {
                    Want::Refused
                },
            };
            ("gateway-listener", probe)
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn wait_ready(admin: u16, timeout: Duration) -> Duration {
    let start = Instant::now();
    wait_for("serve ready", timeout, || {
        ask(admin, "localhost", "/readyz", false).is_some_and(|a| a.status == 200)
    });
    start.elapsed()
}

#[test]
fn soak_random_edits_under_traffic() {
    let secs: u64 = env_or("PORTCULLIS_SOAK_SECS", 20);
    let routes: usize = env_or("PORTCULLIS_SOAK_ROUTES", 2_000).max(1);
    let seed: u64 = env_or("PORTCULLIS_SOAK_SEED", 0x5eed_5eed);
    let a = echo_pod("app", "echo-a");
    let b = echo_pod("app", "echo-b");
    let dir = work_dir("soak");
    let manifests = dir.join("manifests");
    let mut w = World {
        dir: manifests.clone(),
        gw_port: free_port(),
        extra_port: free_port(),
        backend_a: a.addr().port(),
        backend_b: b.addr().port(),
        routes,
        generation: vec![0; routes],
        broken: BTreeSet::new(),
        added: BTreeSet::new(),
        next_added: 0,
        policies: BTreeMap::new(),
        bad_policies: BTreeSet::new(),
        flip_to_b: false,
        extra_listener: false,
    };
    w.write_all();
    let (xds, admin) = (free_port(), free_port());
    let serve = start(&dir, xds, admin);
    let pid = serve.child.id();
    let ready = wait_ready(admin, Duration::from_secs(300));
    wait_for("a stable route", Duration::from_secs(120), || {
        ask(w.gw_port, "s0.example.com", "/", false).is_some_and(|a| a.status == 200)
    });
    let rss_ready = rss_kib(pid).unwrap_or(0);
    eprintln!(
        "soak: {routes} routes, {secs} s, seed {seed:#x}: ready after {ready:?}, serve RSS {rss_ready} KiB"
    );

    // Continuous traffic on routes no edit touches.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let traffic = {
        let (stop, sent, failed) = (stop.clone(), sent.clone(), failed.clone());
        let port = w.gw_port;
        std::thread::spawn(move || {
            let mut k = 0;
            let mut failures = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let host = format!("s{}.example.com", k % STABLE);
                k += 1;
                sent.fetch_add(1, Ordering::Relaxed);
                match ask(port, &host, "/", false) {
                    Some(a) if a.status == 200 => {}
                    other => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        if failures.len() < 5 {
                            failures.push(format!("{host}: {:?}", other.map(|a| a.status)));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            failures
        })
    };

    let mut rng = Rng(seed | 1);
    let mut latencies: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut rss = Vec::new();
    let started = Instant::now();
    let mut edits = 0u64;
    let mut last_rss = Instant::now();
    while started.elapsed() < Duration::from_secs(secs) {
        let (kind, probe) = edit(&mut w, &mut rng);
        let t = Instant::now();
        let mut shown = false;
        while t.elapsed() < VISIBLE_WITHIN {
            if probe.holds() {
                shown = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if !shown {
            let last = ask(probe.port, &probe.host, &probe.path, false).map(|a| a.head);
            panic!(
                "edit {edits} ({kind}) not visible in Envoy after {VISIBLE_WITHIN:?}: {} {}{}; it answers {last:?} \
                 ({} policies left)",
                probe.port,
                probe.host,
                probe.path,
                w.policies.len()
            );
        }
        latencies
            .entry(kind)
            .or_default()
            .push(t.elapsed().as_secs_f64() * 1e3);
        edits += 1;
        if last_rss.elapsed() >= Duration::from_secs(1) {
            rss.push((started.elapsed().as_secs_f64(), rss_kib(pid).unwrap_or(0)));
            last_rss = Instant::now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let failures = traffic.join().expect("traffic thread");
    let nacks = metric_sum(admin, "portcullis_xds_nacks_total").expect("metrics");

    let mut all: Vec<f64> = latencies.values().flatten().copied().collect();
    all.sort_by(f64::total_cmp);
    for (kind, l) in &mut latencies {
        l.sort_by(f64::total_cmp);
        eprintln!(
            "soak: {kind:<17} {:>5} edits  median {:>8.1} ms  p99 {:>8.1} ms",
            l.len(),
            percentile(l, 0.5),
            percentile(l, 0.99)
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!(
        "soak: {edits} edits in {elapsed:.0} s ({:.1}/s); propagation median {:.1} ms, p99 {:.1} ms; \
         {} requests, {} failed; {} NACKs",
        edits as f64 / elapsed,
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        sent.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        nacks as u64,
    );
    eprintln!("soak: serve RSS KiB (s, KiB): ready {rss_ready}, samples {rss:?}");

    assert!(edits > 0, "no edit was applied");
    assert_eq!(nacks, 0.0, "Envoy NACKed a configuration");
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "failed requests on untouched routes: {failures:?}"
    );
    assert!(sent.load(Ordering::Relaxed) > 0);
    // Flat memory: the last quarter of the run holds no more than the
    // first quarter after warm-up, beyond allocator noise.
    if rss.len() >= 8 {
        let q = rss.len() / 4;
        let early = rss[..q].iter().map(|r| r.1).max().unwrap_or(0);
        let late = rss[rss.len() - q..].iter().map(|r| r.1).max().unwrap_or(0);
        assert!(
            late <= early + early / 5 + 16 * 1024,
            "serve RSS grew under edits: early max {early} KiB, late max {late} KiB"
        );
        eprintln!("soak: RSS early max {early} KiB, late max {late} KiB");
    } else {
        eprintln!(
            "soak: SKIPPED the RSS check: only {} samples (run longer)",
            rss.len()
        );
    }
    drop(serve);
    let _ = std::fs::remove_dir_all(Path::new(&dir));
}
