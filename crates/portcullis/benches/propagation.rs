//! Propagation latency: from writing a new HTTPRoute file to the real Envoy
//! answering 200 on it (polled every 5 ms), with 100 and 1,000 existing
//! routes (or the sizes `PORTCULLIS_PROPAGATION_ROUTES` lists, e.g.
//! `10000` or `100,1000,10000`), while a second thread sends continuous
//! traffic to unrelated routes and counts every non-200. Prints median and
//! p99 per size; `PORTCULLIS_PROPAGATION_SAMPLES` (default 30) edits each.
//! `PORTCULLIS_PROPAGATION_FILES=N` spreads the existing routes over N
//! files; `PORTCULLIS_PROPAGATION_SAVE=rename` saves each file as editors do (a
//! hidden temporary file renamed into place). `PORTCULLIS_PROPAGATION_LOG=
//! FILE` keeps serve's debug log there and prints the median and p99 of
//! each per-edit stage (see `stages`); `PORTCULLIS_PROPAGATION_BIN` runs
//! another build of `portcullis` (a baseline to alternate with).
//!
//! `cargo bench -p portcullis --bench propagation` (needs Envoy: scripts/install-envoy.sh).
//! Target (#15): median ≤ 50 ms, p99 ≤ 150 ms at 10,000 routes, 0 non-200s:
//! `PORTCULLIS_PROPAGATION_ROUTES=10000 cargo bench -p portcullis --bench propagation`.

/// The allocator of the `portcullis` binary, so translation costs the same here.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    testkit::port::free()
}

fn status(port: u16, host: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").ok()?;
    // Read only the status line: waiting for EOF would add Envoy's delayed
    // close (1 s) after local replies such as 404.
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

/// The per-edit stages of the last `edits` edits, from serve's debug log:
/// the provider's burst (`wait` = debounce, `apply` = read and parse,
/// `merge` = the snapshot of all files), the translation, the xDS
/// snapshots, and push to ACK of the route configuration (Envoy applying
/// it: the floor); and per edit the control plane's share, file write to
/// push (provider + serve). Median and p99 of each.
fn stages(existing: usize, log: &std::path::Path, edits: usize) {
    let Ok(text) = std::fs::read_to_string(log) else {
        return;
    };
    // This run's edits only: the log is appended to by every size.
    let text = &text[text.rfind("portcullis is serving").unwrap_or(0)..];
    // Without colours (should NO_COLOR not be honoured): ESC [ ... m.
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            plain.push(c);
        }
    }
    let field = |line: &str, key: &str| -> Option<f64> {
        let at = line.find(&format!(" {key}="))? + key.len() + 2;
        let rest = &line[at..];
        let end = rest
            .find(|c: char| c != '.' && !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    };
    let mut table: Vec<(&str, &str, &str, Vec<f64>)> = vec![
        ("debounce", "burst processed", "wait_ms", Vec::new()),
        ("read+parse", "burst processed", "apply_ms", Vec::new()),
        ("merge", "burst processed", "merge_ms", Vec::new()),
        ("provider", "edit stages", "provider_ms", Vec::new()),
        ("translate", "edit stages", "translate_ms", Vec::new()),
        ("xds", "edit stages", "xds_ms", Vec::new()),
        ("serve", "edit stages", "total_ms", Vec::new()),
        ("push->ack(RDS)", "type_url=\"RDS\"", "push_to_ack_ms", Vec::new()),
    ];
    // The control plane's share of an edit, file write to the xDS push:
    // the provider's burst (from the first event) plus serve's stages, per
    // edit (the push follows the xDS stage at once).
    let mut control_plane = Vec::new();
    for line in plain.lines() {
        for (_, msg, key, values) in &mut table {
            if line.contains(*msg)
                && let Some(v) = field(line, key)
            {
                values.push(v);
            }
        }
        if line.contains("edit stages")
            && let (Some(p), Some(t)) = (field(line, "provider_ms"), field(line, "total_ms"))
        {
            control_plane.push(p + t);
        }
    }
    table.push(("control-plane(write->push)", "", "", control_plane));
    let mut out = format!("propagation existing_routes={existing} stages (last {edits} edits, ms):");
    for (name, _, _, values) in &mut table {
        let tail = values.len().saturating_sub(edits);
        let mut last = values.split_off(tail);
        if last.is_empty() {
            continue;
        }
        last.sort_by(|a, b| a.total_cmp(b));
        out.push_str(&format!(
            " {name} {:.1}/{:.1}",
            percentile(&last, 0.5),
            percentile(&last, 0.99)
        ));
    }
    println!("{out} (median/p99)");
}

fn route(name: &str, backend_port: u16) -> String {
    let _ = backend_port;
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\nspec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  hostnames: [\"{name}.example.com\"]\n  rules:\n  - backendRefs: [{{name: echo, port: 80}}]\n"
    )
}

fn base(gw_port: u16, backend_port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: c}}\nspec: {{controllerName: portcullis.dev/gateway-controller}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: infra}}\nspec:\n  gatewayClassName: c\n  listeners: [{{name: http, protocol: HTTP, port: {gw_port}, allowedRoutes: {{namespaces: {{from: All}}}}}}]\n---\napiVersion: v1\nkind: Service\nmetadata: {{name: echo, namespace: app}}\nspec:\n  ports: [{{name: http, port: 80, targetPort: {backend_port}}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: echo-1, namespace: app, labels: {{kubernetes.io/service-name: echo}}}}\naddressType: IPv4\nports: [{{name: http, port: {backend_port}}}]\nendpoints: [{{addresses: [\"127.0.0.1\"]}}]\n"
    )
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn measure(existing: usize, samples: usize) {
    let backend = echo::spawn(echo::Config {
        namespace: "app".into(),
        pod: "echo-1".into(),
    })
    .expect("echo");
    let dir = std::env::temp_dir().join(format!("portcullis-prop-{}-{existing}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("m")).expect("mkdir");
    let gw_port = free_port();
    std::fs::write(dir.join("m/base.yaml"), base(gw_port, backend.addr().port())).expect("write");
    // PORTCULLIS_PROPAGATION_FILES=N spreads them over N files (default 1).
    let files: usize = std::env::var("PORTCULLIS_PROPAGATION_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut all = vec![String::new(); files];
    for i in 0..existing {
        all[i % files].push_str(&route(&format!("r{i}"), 0));
        all[i % files].push_str("---\n");
    }
    for (f, text) in all.iter().enumerate() {
        let name = if files == 1 {
            "existing.yaml".to_string()
        } else {
            format!("existing-{f:03}.yaml")
        };
        std::fs::write(dir.join("m").join(name), text).expect("write");
    }
    let (xds, admin) = (free_port(), free_port());
    let envoy = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    // PORTCULLIS_PROPAGATION_BIN: another build of `portcullis` (a baseline
    // to alternate with); PORTCULLIS_PROPAGATION_LOG=FILE: serve's log
    // (debug: the per-edit stage timings) goes there instead of nowhere.
    let bin = std::env::var_os("PORTCULLIS_PROPAGATION_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_portcullis").into());
    let log = std::env::var_os("PORTCULLIS_PROPAGATION_LOG").map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .expect("log file")
    });
    let mut serve = Command::new(bin)
        .arg("serve")
        .arg(dir.join("m"))
        .args([
            "--xds-address",
            &format!("127.0.0.1:{xds}"),
            "--admin-address",
            &format!("127.0.0.1:{admin}"),
        ])
        .args(["--listener-address", "127.0.0.1", "--run-dir"])
        .arg(dir.join("run"))
        .env("ENVOY_BIN", envoy)
        .env(
            "PORTCULLIS_LOG",
            if log.is_some() {
                "portcullis=debug,provider=debug,xds=debug,info"
            } else {
                "warn"
            },
        )
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(log.map_or_else(Stdio::null, Stdio::from))
        .spawn()
        .expect("serve");
    let start = Instant::now();
    // Generous for large sizes: a slow start is not what is measured.
    let initial = Duration::from_secs(60 + existing as u64 / 100);
    while status(gw_port, "r0.example.com") != Some(200) {
        assert!(start.elapsed() < initial, "initial config not served");
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "propagation existing_routes={existing}: first route served {:.0} ms after start",
        start.elapsed().as_secs_f64() * 1e3
    );

    // Continuous traffic on unrelated routes.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, bad) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let traffic = {
        let (stop, ok, bad) = (stop.clone(), ok.clone(), bad.clone());
        std::thread::spawn(move || {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let host = format!("r{}.example.com", i % existing.min(10));
                if status(gw_port, &host) == Some(200) {
                    ok.fetch_add(1, Ordering::Relaxed)
                } else {
                    bad.fetch_add(1, Ordering::Relaxed)
                };
                i += 1;
            }
        })
    };

    let rename = std::env::var("PORTCULLIS_PROPAGATION_SAVE").is_ok_and(|v| v == "rename");
    let mut lat = Vec::new();
    for k in 0..samples {
        let name = format!("new{k}");
        let host = format!("{name}.example.com");
        let t0 = Instant::now();
        let file = dir.join(format!("m/{name}.yaml"));
        if rename {
            // As editors and `kubectl`-like tools save: a hidden temporary
            // file renamed into place.
            let tmp = dir.join(format!("m/.{name}.yaml.tmp"));
            std::fs::write(&tmp, route(&name, 0)).expect("write");
            std::fs::rename(&tmp, &file).expect("rename");
        } else {
            std::fs::write(&file, route(&name, 0)).expect("write");
        }
        while status(gw_port, &host) != Some(200) {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "route {name} never served"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        lat.push(t0.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let _ = traffic.join();
    if let Some(path) = std::env::var_os("PORTCULLIS_PROPAGATION_LOG") {
        stages(existing, std::path::Path::new(&path), samples);
    }
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(serve.id().to_string())
        .status();
    let _ = serve.wait();
    lat.sort_by(|a, b| a.total_cmp(b));
    println!(
        "propagation existing_routes={existing} samples={samples} median_ms={:.1} p99_ms={:.1} max_ms={:.1} unrelated_requests={} unrelated_non_200={}",
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(0.0),
        ok.load(Ordering::Relaxed) + bad.load(Ordering::Relaxed),
        bad.load(Ordering::Relaxed)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` would pass nothing.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let samples: usize = std::env::var("PORTCULLIS_PROPAGATION_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let sizes: Vec<usize> = std::env::var("PORTCULLIS_PROPAGATION_ROUTES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 1000]);
    assert!(
        !sizes.is_empty(),
        "PORTCULLIS_PROPAGATION_ROUTES lists no route count"
    );
    for n in sizes {
        measure(n.max(1), samples);
    }
}
