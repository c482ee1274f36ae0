//! Kubernetes mode, measured by hand (not a timed test): from an API
//! `create HTTPRoute` to the real Envoy answering 200 on it (polled every
//! 2 ms), with N existing routes; and the controller's resident memory
//! (VmRSS, and its peak VmHWM) with N routes. A real etcd +
//! kube-apiserver (testkit), `portcullis controller` as its own process
//! with its Envoy, one echo backend reached through an EndpointSlice.
//!
//! ```sh
//! cargo build -p portcullis --bin portcullis --example controller_propagation
//! ENVOY_BIN=.tools/bin/envoy target/debug/examples/controller_propagation [SIZES] [SAMPLES]
//! ```
//!
//! `SIZES` is a comma list of route counts (default `100,1000`), `SAMPLES`
//! the creates measured per size (default 30). The binary measured is the
//! `portcullis` next to this example's directory (`target/<profile>/`),
//! or `$PORTCULLIS_BIN`. Targets (issue 17): median ≤ 100 ms and p99 ≤
//! 250 ms at 100 and 1,000 routes; RSS ≤ 100 MiB at 1,000 routes and
//! ≤ 300 MiB at 10,000.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

fn free_port() -> u16 {
    testkit::port::free()
}

/// The status code of `GET path`, reading only the status line (waiting
/// for EOF would add Envoy's delayed close after local replies).
fn status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut b = Vec::new();
    let mut chunk = [0u8; 256];
    while !b.windows(2).any(|w| w == b"\r\n") {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        b.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8_lossy(&b)
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `VmRSS`, `VmHWM` and `RssAnon` (heap and stacks: without the
/// binary's own pages, large in a debug build) of a process, in MiB.
fn rss_mib(pid: u32) -> (f64, f64, f64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"), field("RssAnon:"))
}

#[path = "support/kube.rs"]
mod kube_support;
use kube_support::{apply, route};

/// The sum of the samples of `name` in the controller's metrics.
fn metric(admin: u16, name: &str) -> f64 {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", admin)) else {
        return 0.0;
    };
    let _ = write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n"
    );
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until no status write is pending and none happened for 1 s: the
/// status of every created route is written (100/s), so the samples do
/// not compete with a backlog of status writes.
async fn status_settled(admin: u16) {
    let mut last = -1.0;
    loop {
        let writes = metric(admin, "portcullis_status_writes_total");
        if writes == last && metric(admin, "portcullis_status_queue_depth") == 0.0 {
            return;
        }
        last = writes;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn controller_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("PORTCULLIS_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("portcullis"))
        .unwrap_or_default()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> = args
        .get(1)
        .map_or("100,1000", String::as_str)
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let samples: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(30);
    let bin = controller_bin();
    assert!(
        bin.exists(),
        "no controller binary at {} (cargo build -p portcullis --bin portcullis, or set PORTCULLIS_BIN)",
        bin.display()
    );
    let Some(cluster) = testkit::kube::Cluster::start("controller_propagation").await else {
        eprintln!("no apiserver (see README, Kubernetes mode)");
        return;
    };
    cluster
        .apply_crds(&testkit::kube::Cluster::repo_crds())
        .await
        .unwrap_or_else(|e| panic!("CRDs: {e}"));
    let client = cluster.client().await.unwrap_or_else(|e| panic!("client: {e}"));
    let backend = echo::spawn(echo::Config {
        namespace: "app".into(),
        pod: "a-pod".into(),
    })
    .unwrap_or_else(|e| panic!("echo: {e}"));
    let forwarded =
        testkit::kube::forward_from_host(backend.addr()).unwrap_or_else(|e| panic!("forward: {e}"));
    let (gw_port, xds, admin) = (free_port(), free_port(), free_port());
    apply(
        &client,
        &[
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "infra"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}}),
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": "portcullis"},
                   "spec": {"controllerName": "portcullis.dev/gateway-controller"}}),
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw", "namespace": "infra"},
                   "spec": {"gatewayClassName": "portcullis", "listeners": [
                       {"name": "http", "protocol": "HTTP", "port": gw_port, "allowedRoutes": {"namespaces": {"from": "All"}}}]}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a", "namespace": "app"},
                   "spec": {"ports": [{"name": "http", "port": 80, "targetPort": forwarded.port()}]}}),
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                   "metadata": {"name": "a-1", "namespace": "app", "labels": {"kubernetes.io/service-name": "a"}},
                   "addressType": "IPv4", "ports": [{"name": "http", "port": forwarded.port()}],
                   "endpoints": [{"addresses": [forwarded.ip().to_string()]}]}),
        ],
    )
    .await;
    let run_dir = std::env::temp_dir().join(format!(
        "portcullis-controller-propagation-{}",
        std::process::id()
    ));
    let mut controller = Command::new(&bin)
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["--xds-address", &format!("127.0.0.1:{xds}")])
        .args(["--admin-address", &format!("127.0.0.1:{admin}")])
        .args(["--listener-address", "127.0.0.1"])
        .arg("--run-dir")
        .arg(&run_dir)
        .arg("--no-leader-election")
        .stdout(Stdio::null())
        .stderr(
            std::fs::File::create(std::env::temp_dir().join("controller_propagation.log"))
                .map_or_else(|_| Stdio::null(), Stdio::from),
        )
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
    let routes = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        "app",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
            "httproutes",
        ),
    );
    let mut existing = 0;
    let mut next = 1_000_000;
    println!("routes  samples  median   p99     max     controller RSS (peak, anonymous)");
    for size in sizes {
        while existing < size {
            routes
                .create(&PostParams::default(), &route(existing))
                .await
                .unwrap_or_else(|e| panic!("create: {e}"));
            existing += 1;
        }
        // Settled: the last existing route is served.
        let last = format!("/r/{}", existing - 1);
        let settle = Instant::now();
        while status(gw_port, &last) != Some(200) {
            assert!(
                settle.elapsed() < Duration::from_secs(300),
                "{size} routes never served"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        status_settled(admin).await;
        let mut took = Vec::new();
        for _ in 0..samples {
            let path = format!("/r/{next}");
            let start = Instant::now();
            routes
                .create(&PostParams::default(), &route(next))
                .await
                .unwrap_or_else(|e| panic!("create: {e}"));
            while status(gw_port, &path) != Some(200) {
                assert!(start.elapsed() < Duration::from_secs(30), "{path} never served");
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            took.push(start.elapsed());
            next += 1;
            existing += 1;
            // Let the new route's status write settle, as between edits.
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        took.sort();
        let (rss, peak, anon) = rss_mib(controller.id());
        println!(
            "{size:>6}  {samples:>7}  {:>4} ms  {:>4} ms  {:>4} ms  {rss:.0} MiB (peak {peak:.0}, anon {anon:.0})",
            percentile(&took, 0.5).as_millis(),
            percentile(&took, 0.99).as_millis(),
            took.last().map_or(0, Duration::as_millis),
        );
    }
    // SIGTERM: the controller stops its Envoy.
    let _ = Command::new("kill").arg(controller.id().to_string()).status();
    let _ = controller.wait();
    let _ = std::fs::remove_dir_all(&run_dir);
}
