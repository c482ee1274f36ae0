//! Runs the cases against one live `portcullis serve` (in-process, with the
//! real Envoys it supervises) and the echo pods, the way the upstream suite
//! runs against a live cluster: base manifests applied once, each test's
//! manifests applied, checked (eventually consistent), then deleted. In
//! controller mode the same happens through a real kube-apiserver and
//! `portcullis controller` ([`crate::kube_mode`]): only where objects go
//! and where status is read from differ ([`Target`]).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::Value;

use crate::backends::Backends;
use crate::cases::{Case, RequestGroup, Test, WeightedDistribution};
use crate::client::{Outgoing, Response, send};
use crate::compare::{Echoed, compare};
use crate::kube_mode::{Key, Kube};
use crate::status::{Document, check};
use crate::tls::Certs;
use crate::{backends, manifests, tls};

/// Upstream `MaxTimeToConsistency`, also used as the status polling budget.
pub const CONSISTENCY: Duration = Duration::from_secs(30);
/// Upstream `RequiredConsecutiveSuccesses`.
const CONSECUTIVE: usize = 3;
const POLL: Duration = Duration::from_millis(100);

pub enum Outcome {
    Pass,
    Fail(String),
    Skip(String),
}

/// Which control plane the cases run against.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Mode {
    /// `portcullis serve` watching a folder the runner writes.
    File,
    /// `portcullis controller` watching a real kube-apiserver.
    Controller,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::File => "file",
            Mode::Controller => "controller",
        }
    }
}

/// Where the objects go and where status is read from.
enum Target {
    /// The test's objects in `test.json` of the watched folder; status from
    /// the admin API.
    Files,
    /// Through the API; status from the API.
    Api(Box<Kube>),
}

pub struct World {
    manifest_dir: PathBuf,
    target: Target,
    admin: SocketAddr,
    backends: Backends,
    tls: Arc<rustls::ClientConfig>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    serve: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    rng: u64,
    consistency: Duration,
}

#[derive(Parser)]
struct ServeCli {
    #[command(flatten)]
    args: portcullis::serve::Args,
}

#[derive(Parser)]
struct ControllerCli {
    #[command(flatten)]
    args: portcullis::controller::Args,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(testkit::port::free())
}

fn envoy_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ENVOY_BIN") {
        return Some(PathBuf::from(p));
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/envoy");
    repo.is_file().then_some(repo)
}

impl World {
    pub async fn start(
        cases_dir: &Path,
        work: &Path,
        consistency: Duration,
        mode: Mode,
    ) -> anyhow::Result<World> {
        let manifest_dir = work.join("manifests");
        let run_dir = work.join("run");
        std::fs::create_dir_all(&manifest_dir)
            .with_context(|| format!("cannot create {}", manifest_dir.display()))?;
        std::fs::create_dir_all(&run_dir)?;

        let base = manifests::read(&cases_dir.join("base-manifests.yaml"))?;
        let backends = backends::start(&base).await?;
        let certs: Certs = tls::generate()?;
        let mut base_view = manifests::cluster_view(&base, &backends);
        base_view.extend(manifests::suite_objects(&certs));
        let target = match mode {
            Mode::File => {
                manifests::write(&manifest_dir.join("base.json"), &base_view)?;
                Target::Files
            }
            Mode::Controller => {
                let mut kube = Kube::start().await?;
                eprintln!(
                    "conformance: kube-apiserver and etcd logs in {} (removed at exit unless PORTCULLIS_KEEP_KUBE=1)",
                    kube.dir().display()
                );
                let view = kube.api_view(&base_view)?;
                kube.apply(&view).await.context("base manifests")?;
                Target::Api(Box::new(kube))
            }
        };

        let admin: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
        let xds: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
        let source: Vec<String> = match &target {
            Target::Files => vec!["serve".into(), manifest_dir.display().to_string()],
            // One replica: it writes status without a Lease. No kubelet
            // runs provisioned Envoys here: the controller runs its own
            // (`--loopback-per-gateway`), whose addresses status reports.
            Target::Api(kube) => vec![
                "controller".into(),
                "--kubeconfig".into(),
                kube.kubeconfig().display().to_string(),
                "--no-leader-election".into(),
                "--provision=false".into(),
            ],
        };
        let mut argv: Vec<String> = source;
        argv.extend([
            "--loopback-per-gateway".into(),
            "--xds-address".into(),
            xds.to_string(),
            "--admin-address".into(),
            admin.to_string(),
            "--run-dir".into(),
            run_dir.display().to_string(),
        ]);
        let Some(bin) = envoy_bin() else {
            bail!("no Envoy binary: run scripts/install-envoy.sh or set ENVOY_BIN");
        };
        argv.extend(["--envoy-bin".into(), bin.display().to_string()]);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let until = async {
            let _ = rx.await;
        };
        let serve = match &target {
            Target::Files => {
                let args = ServeCli::try_parse_from(argv).context("serve arguments")?.args;
                tokio::spawn(portcullis::serve::serve_until(args, until))
            }
            Target::Api(_) => {
                let args = ControllerCli::try_parse_from(argv)
                    .context("controller arguments")?
                    .args;
                tokio::spawn(portcullis::controller::controller_until(args, until))
            }
        };
        let world = World {
            manifest_dir,
            target,
            admin,
            backends,
            tls: tls::client_config(&certs)?,
            shutdown: Some(tx),
            serve: Some(serve),
            rng: seed(),
            consistency,
        };
        let deadline = Instant::now() + CONSISTENCY;
        loop {
            if let Ok(r) = world.admin_get("/readyz").await
                && r.status == 200
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("portcullis did not become ready within {CONSISTENCY:?}");
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(world)
    }

    pub async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.serve.take() {
            match task.await {
                Ok(Err(e)) => eprintln!("conformance: portcullis serve: {e:#}"),
                Err(e) => eprintln!("conformance: portcullis serve: {e}"),
                Ok(Ok(())) => {}
            }
        }
    }

    async fn admin_get(&self, path: &str) -> Result<Response, String> {
        let host = self.admin.to_string();
        send(&Outgoing {
            addr: self.admin,
            tls: None,
            method: "GET",
            host: &host,
            path,
            headers: &[],
        })
        .await
    }

    async fn status_document(&self) -> Result<Vec<Value>, String> {
        Ok(self.live_status().await?.0)
    }

    /// The status of every object, and in controller mode the objects' live
    /// `metadata.generation` (file mode takes it from the manifests).
    async fn live_status(&self) -> Result<(Vec<Value>, Option<HashMap<Key, i64>>), String> {
        if let Target::Api(kube) = &self.target {
            let live = kube.live().await.map_err(|e| e.to_string())?;
            return Ok((live.status, Some(live.generations)));
        }
        let r = self.admin_get("/api/status").await?;
        let doc: Value = serde_json::from_slice(&r.body).map_err(|e| format!("/api/status: {e}"))?;
        Ok((doc["status"].as_array().cloned().unwrap_or_default(), None))
    }

    /// The first address in the Gateway's status.
    async fn gateway_address(&self, gateway: &str) -> Result<IpAddr, String> {
        let (ns, name) = gateway.split_once('/').unwrap_or(("default", gateway));
        let deadline = Instant::now() + self.consistency;
        loop {
            let doc = self.status_document().await.unwrap_or_default();
            let addr = doc
                .iter()
                .find(|s| {
                    s["kind"] == "Gateway"
                        && s["metadata"]["namespace"] == ns
                        && s["metadata"]["name"] == name
                })
                .and_then(|s| s.pointer("/status/addresses/0/value"))
                .and_then(Value::as_str)
                .and_then(|v| v.parse::<IpAddr>().ok());
            if let Some(a) = addr {
                return Ok(a);
            }
            if Instant::now() > deadline {
                return Err(format!("Gateway {gateway} has no address in status"));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn next_rand(&mut self) -> u64 {
        // xorshift64*: request ids and weight-test jitter only.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn uuid(&mut self) -> String {
        let (a, b) = (self.next_rand(), self.next_rand());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            (b >> 48) & 0x3fff | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }

    pub async fn run(&mut self, test: &Test) -> Outcome {
        let test_file = self.manifest_dir.join("test.json");
        let mut docs = Vec::new();
        for m in &test.manifests {
            match manifests::read(&test.dir.join(m)) {
                Ok(d) => docs.extend(d),
                Err(e) => return Outcome::Fail(format!("{e:#}")),
            }
        }
        let mut view = manifests::cluster_view(&docs, &self.backends);
        if test.test == "HTTPRouteServiceTypes" {
            manifests::patch_manual_slices(&mut view, &self.backends);
        }
        if let Target::Api(kube) = &mut self.target {
            let applied = match kube.api_view(&view) {
                Ok(v) => v,
                Err(e) => return Outcome::Fail(e.to_string()),
            };
            let outcome = match kube.apply(&applied).await {
                Ok(()) => self.check(test, &mut view, &test_file).await,
                Err(e) => Outcome::Fail(e.to_string()),
            };
            // Like the suite's cleanup: the test's objects are deleted.
            let Target::Api(kube) = &mut self.target else {
                return outcome;
            };
            return match (kube.delete_all(&applied).await, outcome) {
                (Err(e), Outcome::Pass) => Outcome::Fail(format!("cleanup: {e}")),
                (_, outcome) => outcome,
            };
        }
        if let Err(e) = manifests::write(&test_file, &view) {
            return Outcome::Fail(format!("{e:#}"));
        }
        let outcome = self.check(test, &mut view, &test_file).await;
        // Like the suite's cleanup: the test's objects are deleted.
        let _ = std::fs::remove_file(&test_file);
        outcome
    }

    async fn check(&mut self, test: &Test, view: &mut Vec<Value>, test_file: &Path) -> Outcome {
        let generations: HashMap<(String, String, String), i64> = view
            .iter()
            .filter_map(|d| {
                Some((
                    (
                        d["kind"].as_str()?.to_string(),
                        d.pointer("/metadata/namespace")
                            .and_then(Value::as_str)
                            .unwrap_or("default")
                            .to_string(),
                        d.pointer("/metadata/name")?.as_str()?.to_string(),
                    ),
                    d.pointer("/metadata/generation")?.as_i64()?,
                ))
            })
            .collect();
        let generation = |k: &str, ns: &str, n: &str| {
            generations
                .get(&(k.to_string(), ns.to_string(), n.to_string()))
                .copied()
        };
        for assertion in &test.status_assertions {
            let deadline = Instant::now() + self.consistency;
            loop {
                let status = self.live_status().await;
                let result = status.and_then(|(s, live)| {
                    // Controller mode: the object's generation in the API
                    // (always present), as upstream reads it.
                    let live_generation = |k: &str, ns: &str, n: &str| match &live {
                        Some(g) => g.get(&(k.to_string(), ns.to_string(), n.to_string())).copied(),
                        None => generation(k, ns, n),
                    };
                    check(
                        &Document {
                            status: &s,
                            generation: &live_generation,
                        },
                        assertion,
                    )
                });
                match result {
                    Ok(()) => break,
                    Err(e) if Instant::now() > deadline => return Outcome::Fail(e),
                    Err(_) => tokio::time::sleep(POLL).await,
                }
            }
        }
        for group in &test.request_groups {
            if let Some(pre) = &group.precondition {
                // The object as applied (its apiVersion), for the API.
                let gone = view
                    .iter()
                    .find(|d| {
                        d["kind"] == pre.delete.kind.as_str()
                            && d.pointer("/metadata/namespace")
                                .and_then(Value::as_str)
                                .unwrap_or("default")
                                == pre.delete.namespace
                            && d.pointer("/metadata/name").and_then(Value::as_str)
                                == Some(pre.delete.name.as_str())
                    })
                    .cloned();
                if !manifests::remove(view, &pre.delete.kind, &pre.delete.namespace, &pre.delete.name) {
                    return Outcome::Fail(format!(
                        "precondition: {} {}/{} is not in the test's manifests",
                        pre.delete.kind, pre.delete.namespace, pre.delete.name
                    ));
                }
                let written = match &mut self.target {
                    Target::Files => manifests::write(test_file, view).map_err(|e| format!("{e:#}")),
                    Target::Api(kube) => match &gone {
                        Some(gone) => kube.delete(gone).await.map_err(|e| e.to_string()),
                        None => Ok(()),
                    },
                };
                if let Err(e) = written {
                    return Outcome::Fail(e);
                }
            }
            if let Err(e) = self.group(group).await {
                return Outcome::Fail(match &group.subtest {
                    Some(sub) => format!("{sub}: {e}"),
                    None => e,
                });
            }
        }
        if let Some(w) = &test.weighted_distribution {
            let Some(group) = test.request_groups.first() else {
                return match self.weights(w, &weights_gateway(test)).await {
                    Ok(()) => Outcome::Pass,
                    Err(e) => Outcome::Fail(e),
                };
            };
            if let Err(e) = self
                .weights(w, &(group.gateway.clone(), group.gateway_listener_port))
                .await
            {
                return Outcome::Fail(e);
            }
        }
        if test.status_assertions.is_empty()
            && test.request_groups.is_empty()
            && test.weighted_distribution.is_none()
        {
            return Outcome::Skip("the case file holds no assertion".into());
        }
        Outcome::Pass
    }

    async fn group(&mut self, group: &RequestGroup) -> Result<(), String> {
        if group.mode != "eventually_consistent" && !group.mode.is_empty() {
            return Err(format!(
                "request mode {:?} is not known to this runner",
                group.mode
            ));
        }
        let ip = self.gateway_address(&group.gateway).await?;
        let addr = SocketAddr::new(ip, group.gateway_listener_port);
        let default_port = matches!(
            (group.scheme.as_str(), group.gateway_listener_port),
            ("http", 80) | ("https", 443)
        );
        let gw_host = if default_port {
            ip.to_string()
        } else {
            addr.to_string()
        };
        for case in &group.cases {
            let mut case = case.clone();
            let mirrored = !case.expected.mirrored_to.is_empty();
            if mirrored {
                let id = self.uuid();
                let sep = if case.request.path.contains('?') { '&' } else { '?' };
                let suffix = format!("{sep}gateway-api-conformance-request-id={id}");
                case.request.path.push_str(&suffix);
                if let Some(b) = case.expected.backend_request.as_mut()
                    && !b.path.is_empty()
                {
                    b.path.push_str(&suffix);
                }
            }
            let sent = self
                .eventually(&case, addr, &gw_host, &group.scheme)
                .await
                .map_err(|e| format!("{}: {e}", case.name))?;
            if mirrored {
                self.mirrors(&case, &sent)
                    .await
                    .map_err(|e| format!("{}: {e}", case.name))?;
            }
        }
        Ok(())
    }

    /// Retries until `CONSECUTIVE` successes in a row; returns the last
    /// path sent.
    async fn eventually(
        &mut self,
        case: &Case,
        addr: SocketAddr,
        gw_host: &str,
        scheme: &str,
    ) -> Result<String, String> {
        let deadline = Instant::now() + self.consistency;
        let mut streak = 0;
        let mut last_err;
        loop {
            let path = case
                .request
                .path
                .replace("<fresh-uuid-per-attempt>", &self.uuid());
            match self.once(case, &path, addr, gw_host, scheme).await {
                Ok(()) => {
                    streak += 1;
                    if streak >= CONSECUTIVE {
                        return Ok(path);
                    }
                    continue;
                }
                Err(e) => {
                    streak = 0;
                    last_err = e;
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "not consistent within {:?}: {last_err}",
                    self.consistency
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn once(
        &self,
        case: &Case,
        path: &str,
        addr: SocketAddr,
        gw_host: &str,
        scheme: &str,
    ) -> Result<(), String> {
        let response = self.request(case, path, addr, gw_host, scheme, &[]).await?;
        let mut expected = case.expected.clone();
        if let Some(b) = expected.backend_request.as_mut()
            && b.path.contains("<fresh-uuid-per-attempt>")
        {
            b.path = path.to_string();
        }
        compare(&case.request, path, scheme, &expected, &response)
    }

    async fn request(
        &self,
        case: &Case,
        path: &str,
        addr: SocketAddr,
        gw_host: &str,
        scheme: &str,
        extra: &[(String, String)],
    ) -> Result<Response, String> {
        let host = if case.request.host.is_empty() {
            gw_host
        } else {
            case.request.host.as_str()
        };
        // The suite always sends X-Echo-Set-Header (empty when unset).
        let set_header = case
            .backend_set_response_headers
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut headers: Vec<(String, String)> = case
            .request
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        headers.push(("X-Echo-Set-Header".into(), set_header));
        headers.extend(extra.iter().cloned());
        let sni = case.server_name.clone().unwrap_or_else(|| host.to_string());
        let tls = (scheme == "https").then_some((&self.tls, sni.as_str()));
        send(&Outgoing {
            addr,
            tls,
            method: &case.request.method,
            host,
            path,
            headers: &headers,
        })
        .await
    }

    async fn mirrors(&self, case: &Case, sent_path: &str) -> Result<(), String> {
        for m in &case.expected.mirrored_to {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !self.backends.received(&m.namespace, &m.name, sent_path) {
                if Instant::now() > deadline {
                    return Err(format!(
                        "request {sent_path} was not mirrored to {}/{}",
                        m.namespace, m.name
                    ));
                }
                tokio::time::sleep(POLL).await;
            }
        }
        Ok(())
    }

    async fn weights(
        &mut self,
        w: &WeightedDistribution,
        (gateway, port): &(String, u16),
    ) -> Result<(), String> {
        let ip = self.gateway_address(gateway).await?;
        let addr = SocketAddr::new(ip, *port);
        let gw_host = if *port == 80 {
            ip.to_string()
        } else {
            addr.to_string()
        };
        let case = Case {
            name: "weighted distribution".into(),
            request: w.request.clone(),
            backend_set_response_headers: Default::default(),
            server_name: None,
            expected: crate::cases::Expected {
                status: w.expected_status.clone(),
                backend: None,
                namespace: w.namespace.clone(),
                backend_request: None,
                response_headers: Default::default(),
                response_absent_headers: Vec::new(),
                redirect: None,
                mirrored_to: Vec::new(),
            },
        };
        // The route must be serving before sampling (as upstream, which
        // first waits for a consistent response).
        self.eventually(&case, addr, &gw_host, "http").await?;
        let mut last = String::new();
        for attempt in 1..=w.max_attempts.max(1) {
            match self.sample(w, &case, addr, &gw_host).await {
                Ok(()) => return Ok(()),
                Err(e) => last = format!("attempt {attempt}: {e}"),
            }
        }
        Err(last)
    }

    /// One round of `total_requests` at `concurrency`, with the upstream
    /// entropy (random small delay or X-Jitter header), then the fraction
    /// per Deployment within `tolerance`.
    async fn sample(
        &mut self,
        w: &WeightedDistribution,
        case: &Case,
        addr: SocketAddr,
        gw_host: &str,
    ) -> Result<(), String> {
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut done = 0;
        while done < w.total_requests {
            let batch = w.concurrency.max(1).min(w.total_requests - done);
            let rands: Vec<u64> = (0..batch).map(|_| self.next_rand()).collect();
            let this = &*self;
            let jobs: Vec<_> = rands
                .into_iter()
                .map(|r| async move {
                    let extra = if r & 1 == 0 {
                        vec![("X-Jitter".to_string(), format!("{}", r >> 8))]
                    } else {
                        Vec::new()
                    };
                    tokio::time::sleep(Duration::from_millis((r >> 20) % 10)).await;
                    let response = this
                        .request(case, &case.request.path, addr, gw_host, "http", &extra)
                        .await?;
                    compare(
                        &case.request,
                        &case.request.path,
                        "http",
                        &case.expected,
                        &response,
                    )?;
                    let echoed: Echoed = serde_json::from_slice(&response.body).map_err(|e| e.to_string())?;
                    Ok::<String, String>(deployment_of(&echoed.pod))
                })
                .collect();
            for r in futures_join(jobs).await {
                *counts.entry(r?).or_default() += 1;
            }
            done += batch;
        }
        let total = w.total_requests as f64;
        for (backend, want) in &w.expected_weights {
            let got = counts.get(backend).copied().unwrap_or(0);
            if *want == 0.0 && got > 0 {
                return Err(format!("{backend} has weight 0 but received {got} requests"));
            }
            let frac = got as f64 / total;
            if (frac - want).abs() > w.tolerance {
                return Err(format!(
                    "{backend}: {frac:.3} of requests, expected {want} ± {}",
                    w.tolerance
                ));
            }
        }
        if let Some(other) = counts.keys().find(|b| !w.expected_weights.contains_key(*b)) {
            return Err(format!("unexpected backend {other} received traffic"));
        }
        Ok(())
    }
}

fn weights_gateway(test: &Test) -> (String, u16) {
    let gw = test
        .status_assertions
        .iter()
        .find_map(|a| match a {
            crate::cases::StatusAssertion::GatewayAndHTTPRoutesMustBeAccepted { gateway, .. } => {
                Some(gateway.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| "gateway-conformance-infra/same-namespace".into());
    (gw, 80)
}

/// The Deployment of a pod: its name without the last two `-` parts.
fn deployment_of(pod: &str) -> String {
    let parts: Vec<&str> = pod.split('-').collect();
    if parts.len() > 2 {
        parts[..parts.len() - 2].join("-")
    } else {
        pod.to_string()
    }
}

/// Runs `jobs` concurrently on this task (no extra dependency for a join).
async fn futures_join<T>(jobs: Vec<impl std::future::Future<Output = T>>) -> Vec<T> {
    let mut pinned: Vec<_> = jobs.into_iter().map(Box::pin).collect();
    let mut results: Vec<Option<T>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if results[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => results[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    results.into_iter().flatten().collect()
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x9e37_79b9);
    (t ^ u64::from(std::process::id())) | 1
}
