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
//! - `PORTCULLIS_SOAK_GATEWAYS` (default 1): the routes are spread over N
//!   Gateways, route `r<i>` on Gateway `i mod N`. Each Gateway has its own
//!   listener port and, as `serve` deploys it, its own Envoy (one node per
//!   Gateway, README "serve"); each has its own stable routes under traffic
//!   and its own extra listener, and the Service edit is checked on every
//!   Gateway (the `flip` route is attached to all of them). With N = 1 the
//!   input and the edit sequence of a seed are those of a single-Gateway run;
//! - the 10-minute, 10,000-route run of the issue:
//!   `PORTCULLIS_SOAK_SECS=600 PORTCULLIS_SOAK_ROUTES=10000 cargo test --release -p portcullis --test soak_e2e -- --nocapture`;
//! - the 100,000-route target (20 Gateways): the same with
//!   `PORTCULLIS_SOAK_ROUTES=100000 PORTCULLIS_SOAK_GATEWAYS=20`.
//!
//! Every other round of numbered routes (`r<i>` with `i / N` odd) names its
//! Gateway's listener by sectionName, so a Gateway edit keeps those routes
//! (`translate::incremental`, per-listener Gateway edits) while the others,
//! attached to every listener, are rebuilt; the Gateway edit's probe checks
//! that such a route stays off the listener added.
//!
//! Edits are applied one at a time: each is written, then its probe is
//! polled (every 5 ms) until Envoy shows it, so every edit's propagation
//! time is measured and a later edit never hides an earlier one. An edit
//! that must show on several Gateways counts as shown once all show it.

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
    status_kib(pid, "VmRSS:")
}

/// A `/proc/<pid>/status` field in KiB: `VmRSS:` now, `VmHWM:` the peak
/// (which samples taken between edits can miss).
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// The summed RSS of the Envoys `serve` runs (their pid files in the run
/// directory), to show what the whole deployment holds beside `serve`.
fn envoys_rss_kib(run_dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pid"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse().ok())
        .filter_map(rss_kib)
        .sum()
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
    /// Per Gateway: its listener port (Gateway `g` is named by `gw_name`).
    gw_ports: Vec<u16>,
    /// Per Gateway: the port of its optional second listener.
    extra_ports: Vec<u16>,
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
    /// Per Gateway: whether its second listener exists.
    extra_listener: Vec<bool>,
}

/// Gateway 0 keeps the single-Gateway run's name, so that run is unchanged.
fn gw_name(g: usize) -> String {
    if g == 0 { "gw".into() } else { format!("gw{g}") }
}

/// The `k`-th stable route of Gateway `g` (its name and host label).
fn stable_name(g: usize, k: usize) -> String {
    if g == 0 {
        format!("s{k}")
    } else {
        format!("g{g}s{k}")
    }
}

/// A `parentRefs` list naming the given Gateways.
/// The parentRefs of numbered route `i`: its Gateway, by sectionName
/// `http` every other round (see the module doc).
fn route_parents(i: usize, gateways: usize) -> String {
    let g = i % gateways;
    if by_section(i, gateways) {
        format!("[{{name: {}, namespace: infra, sectionName: http}}]", gw_name(g))
    } else {
        parents([g])
    }
}

fn by_section(i: usize, gateways: usize) -> bool {
    (i / gateways) % 2 == 1
}

fn parents(gws: impl IntoIterator<Item = usize>) -> String {
    let refs: Vec<String> = gws
        .into_iter()
        .map(|g| format!("{{name: {}, namespace: infra}}", gw_name(g)))
        .collect();
    format!("[{}]", refs.join(", "))
}

impl World {
    fn write(&self, file: &str, text: &str) {
        // Written beside and renamed, as editors and `kubectl`-like tools
        // do, so the watcher never reads half a file.
        let tmp = self.dir.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).expect("write");
        std::fs::rename(&tmp, self.dir.join(file)).expect("rename");
    }

    fn gateways(&self) -> usize {
        self.gw_ports.len()
    }

    /// The Gateway route `r<i>` is attached to, and its listener port.
    fn gw_of(&self, i: usize) -> usize {
        i % self.gateways()
    }

    fn base(&self) -> String {
        let mut gateways = String::new();
        for g in 0..self.gateways() {
            let extra = if self.extra_listener[g] {
                format!(
                    "\n  - {{name: extra, protocol: HTTP, port: {}, allowedRoutes: {{namespaces: {{from: All}}}}}}",
                    self.extra_ports[g]
                )
            } else {
                String::new()
            };
            gateways.push_str(&format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: infra}}\nspec:\n  gatewayClassName: portcullis\n  listeners:\n  - {{name: http, protocol: HTTP, port: {gw}, allowedRoutes: {{namespaces: {{from: All}}}}}}{extra}\n---\n",
                name = gw_name(g),
                gw = self.gw_ports[g],
            ));
        }
        let flip_port = if self.flip_to_b {
            self.backend_b
        } else {
            self.backend_a
        };
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: portcullis}}\nspec: {{controllerName: portcullis.dev/gateway-controller}}\n---\n\
             {gateways}{a}\n---\n{flip}\n",
            a = service("echo", self.backend_a),
            flip = service("flip", flip_port),
        )
    }

    fn stable(&self) -> String {
        let mut s = String::new();
        for g in 0..self.gateways() {
            for k in 0..STABLE {
                s.push_str(&route_yaml(&stable_name(g, k), &parents([g]), "/", "echo", ""));
            }
        }
        s.push_str(&route_yaml("flip", &parents(0..self.gateways()), "/", "flip", ""));
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
            s.push_str(&route_yaml(
                &format!("r{i}"),
                &route_parents(i, self.gateways()),
                &path,
                "echo",
                filters,
            ));
        }
        s
    }

    fn added_file(&self) -> String {
        let mut s = String::new();
        for k in &self.added {
            s.push_str(&route_yaml(
                &format!("n{k}"),
                &parents([self.gw_of(*k)]),
                "/",
                "echo",
                "",
            ));
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

fn route_yaml(name: &str, parent_refs: &str, path: &str, backend: &str, filters: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\nspec:\n  parentRefs: {parent_refs}\n  hostnames: [\"{name}.example.com\"]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: \"{path}\"}}}}]\n{filters}    backendRefs: [{{name: {backend}, port: 80}}]\n---\n"
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

/// Applies one random edit and returns its kind and probes (one per
/// Gateway the edit must show on).
fn edit(w: &mut World, rng: &mut Rng) -> (&'static str, Vec<Probe>) {
    let route_probe = |w: &World, i: usize, want: Want| {
        vec![Probe {
            port: w.gw_ports[w.gw_of(i)],
            host: format!("r{i}.example.com"),
            path: format!("/v{}", w.generation[i]),
            want,
        }]
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
            ("route-modify", route_probe(w, i, w.route_want(i)))
        }
        // A route becomes invalid: fenced with a 500.
        35..=44 => {
            w.broken.insert(i);
            w.write(&file, &w.route_file(i / PER_FILE));
            ("route-invalid", route_probe(w, i, Want::Status(500)))
        }
        45..=54 => {
            let k = w.next_added;
            w.next_added += 1;
            w.added.insert(k);
            w.write("added.yaml", &w.added_file());
            let probe = Probe {
                port: w.gw_ports[w.gw_of(k)],
                host: format!("n{k}.example.com"),
                path: "/".into(),
                want: Want::Status(200),
            };
            ("route-add", vec![probe])
        }
        55..=62 => {
            let Some(&k) = w.added.iter().nth(rng.below(w.added.len())) else {
                return edit(w, rng);
            };
            w.added.remove(&k);
            w.write("added.yaml", &w.added_file());
            let probe = Probe {
                port: w.gw_ports[w.gw_of(k)],
                host: format!("n{k}.example.com"),
                path: "/".into(),
                want: Want::Status(404),
            };
            ("route-delete", vec![probe])
        }
        63..=72 => {
            w.policies.insert(i, rng.below(1_000_000) as u32);
            w.write("policies.yaml", &w.policy_file());
            ("policy-valid", route_probe(w, i, w.route_want(i)))
        }
        73..=77 => {
            w.bad_policies.insert(i);
            w.write(&format!("bad-policy-{i}.yaml"), &World::bad_policy_file(i));
            ("policy-invalid", route_probe(w, i, Want::Status(500)))
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
            ("policy-remove", route_probe(w, j, w.route_want(j)))
        }
        // The Service behind `flip`, which every Gateway serves.
        85..=94 => {
            w.flip_to_b = !w.flip_to_b;
            w.write("base.yaml", &w.base());
            let pod = if w.flip_to_b { "echo-b" } else { "echo-a" };
            let probes = (w.gw_ports.iter())
                .map(|&port| Probe {
                    port,
                    host: "flip.example.com".into(),
                    path: "/".into(),
                    want: Want::Pod(pod),
                })
                .collect();
            ("service-edit", probes)
        }
        // A Gateway (the one of the drawn route) gains or loses a listener.
        _ => {
            let g = w.gw_of(i);
            w.extra_listener[g] = !w.extra_listener[g];
            w.write("base.yaml", &w.base());
            let probe = Probe {
                port: w.extra_ports[g],
                host: format!("{}.example.com", stable_name(g, 0)),
                path: "/".into(),
                want: if w.extra_listener[g] {
                    Want::Status(200)
                } else {
                    Want::Refused
                },
            };
            let mut probes = vec![probe];
            // A route of this Gateway bound to `http` by sectionName: kept,
            // not rebuilt, and still not served on the listener added.
            let bound = g + w.gateways();
            if w.extra_listener[g] && bound < w.routes && by_section(bound, w.gateways()) {
                probes.push(Probe {
                    port: w.extra_ports[g],
                    host: format!("r{bound}.example.com"),
                    path: format!("/v{}", w.generation[bound]),
                    want: Want::Status(404),
                });
            }
            ("gateway-listener", probes)
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
    let gateways: usize = env_or("PORTCULLIS_SOAK_GATEWAYS", 1).max(1);
    let a = echo_pod("app", "echo-a");
    let b = echo_pod("app", "echo-b");
    let dir = work_dir("soak");
    let manifests = dir.join("manifests");
    let mut w = World {
        dir: manifests.clone(),
        gw_ports: (0..gateways).map(|_| free_port()).collect(),
        extra_ports: (0..gateways).map(|_| free_port()).collect(),
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
        extra_listener: vec![false; gateways],
    };
    w.write_all();
    let (xds, admin) = (free_port(), free_port());
    let started_at = Instant::now();
    let serve = start(&dir, xds, admin);
    let pid = serve.child.id();
    let ready = wait_ready(admin, Duration::from_secs(300));
    for g in 0..gateways {
        let host = format!("{}.example.com", stable_name(g, 0));
        wait_for("a stable route", Duration::from_secs(120), || {
            ask(w.gw_ports[g], &host, "/", false).is_some_and(|a| a.status == 200)
        });
    }
    let serving = started_at.elapsed();
    let rss_ready = rss_kib(pid).unwrap_or(0);
    eprintln!(
        "soak: {routes} routes on {gateways} Gateway(s), {secs} s, seed {seed:#x}: ready after {ready:?}, \
         every Gateway's Envoy serving after {serving:?}; serve RSS {rss_ready} KiB, Envoys' RSS {} KiB",
        envoys_rss_kib(&serve.run_dir)
    );

    // Continuous traffic on routes no edit touches.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let traffic = {
        let (stop, sent, failed) = (stop.clone(), sent.clone(), failed.clone());
        // Every Gateway's stable routes, in turn.
        let targets: Vec<(u16, String)> = (0..STABLE)
            .flat_map(|k| (0..gateways).map(move |g| (g, k)))
            .map(|(g, k)| (w.gw_ports[g], format!("{}.example.com", stable_name(g, k))))
            .collect();
        std::thread::spawn(move || {
            let mut k = 0;
            let mut failures = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let (port, host) = &targets[k % targets.len()];
                k += 1;
                sent.fetch_add(1, Ordering::Relaxed);
                match ask(*port, host, "/", false) {
                    Some(a) if a.status == 200 => {}
                    other => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        if failures.len() < 5 {
                            failures.push(format!("{port} {host}: {:?}", other.map(|a| a.status)));
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
    // jemalloc's live bytes beside RSS (every 5th RSS sample): growth in
    // both is the program's; RSS growing alone is the allocator keeping
    // freed pages.
    let mut live = Vec::new();
    let started = Instant::now();
    let mut edits = 0u64;
    let mut last_rss = Instant::now();
    // Per Gateway (by port): how many edits were checked on it.
    let mut checked: BTreeMap<u16, u64> = BTreeMap::new();
    while started.elapsed() < Duration::from_secs(secs) {
        let (kind, mut probes) = edit(&mut w, &mut rng);
        let t = Instant::now();
        // Each probe, once it holds, is not asked again: the edit is shown
        // when the last Gateway shows it.
        while !probes.is_empty() && t.elapsed() < VISIBLE_WITHIN {
            probes.retain(|p| {
                let held = p.holds();
                if held {
                    *checked.entry(p.port).or_default() += 1;
                }
                !held
            });
            if !probes.is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if let Some(probe) = probes.first() {
            let last = ask(probe.port, &probe.host, &probe.path, false).map(|a| a.head);
            panic!(
                "edit {edits} ({kind}, seed {seed:#x}) not visible in Envoy after {VISIBLE_WITHIN:?} on {} of its \
                 Gateway(s): {} {}{}; it answers {last:?} ({} policies left)",
                probes.len(),
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
            if rss.len() % 5 == 1 {
                let kib = |kind: &str| {
                    metric_sum(admin, &format!("portcullis_allocator_bytes{{kind=\"{kind}\"}}"))
                        .map_or(0, |b| (b / 1024.0) as u64)
                };
                live.push((rss.len(), kib("allocated"), kib("resident")));
            }
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
    eprintln!("soak: jemalloc KiB (sample, allocated, resident): {live:?}");
    let quarter_means = |v: &[u64]| -> Vec<u64> {
        let q = (v.len() / 4).max(1);
        v.chunks(q)
            .take(4)
            .map(|c| c.iter().sum::<u64>() / c.len() as u64)
            .collect()
    };
    eprintln!(
        "soak: quarter means KiB: RSS {:?}, jemalloc allocated {:?}, resident {:?}",
        quarter_means(&rss.iter().map(|r| r.1).collect::<Vec<_>>()),
        quarter_means(&live.iter().map(|l| l.1).collect::<Vec<_>>()),
        quarter_means(&live.iter().map(|l| l.2).collect::<Vec<_>>()),
    );
    let rss_max = rss.iter().map(|r| r.1).max().unwrap_or(rss_ready).max(rss_ready);
    let rss_end = rss.last().map_or(rss_ready, |r| r.1);
    // Gateway ports and extra listener ports are distinct, so a port names
    // a Gateway; extra-listener checks are counted under their own port.
    let covered = (0..gateways)
        .filter(|&g| checked.contains_key(&w.gw_ports[g]) || checked.contains_key(&w.extra_ports[g]))
        .count();
    eprintln!(
        "soak: serve RSS ready {rss_ready} KiB, end {rss_end} KiB, max sampled {rss_max} KiB, peak (VmHWM) {} KiB; \
         Envoys' RSS {} KiB; edits checked on {covered} of {gateways} Gateway(s)",
        status_kib(pid, "VmHWM:").unwrap_or(0),
        envoys_rss_kib(&serve.run_dir)
    );

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
