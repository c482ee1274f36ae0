//! End to end, Kubernetes mode, what `controller_e2e.rs` leaves out:
//!
//! - two `portcullis controller` replicas, each feeding its own Envoy
//!   (started by the test, not supervised by a replica, as Envoys run in a
//!   cluster), both Envoys on the Gateway's port (SO_REUSEPORT: the kernel
//!   spreads connections over them, as a Service would), continuous
//!   requests; the leader killed with SIGKILL. Checked: only the leader
//!   writes status (`portcullis_status_writes_total` per process), the
//!   other takes the Lease within its duration (measured), the hand-over
//!   rewrites nothing (every object's `resourceVersion`, conditions'
//!   `lastTransitionTime` and `observedGeneration` unchanged), no request
//!   fails on either Envoy (the dead leader's Envoy keeps serving its last
//!   configuration), a replica started again joins as a follower and writes
//!   nothing, and an edit after the hand-over reaches both Envoys with its
//!   status written by the new leader only.
//! - the apiserver stopped and started again under continuous traffic
//!   (longer than the Lease, so leadership is lost and taken again): no
//!   failed request, the fenced rule still fenced, no status rewritten,
//!   and an edit afterwards served and its status written.
//!
//! `controller_leader_election_hands_over_status_writing` (a frozen leader,
//! a follower that must not write before the Lease expires) and
//! `controller_keeps_serving_through_an_apiserver_outage` (requests during
//! the outage, an edit after it reaching Envoy) in `controller_e2e.rs` are
//! not repeated here.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::kube::{GATEWAY_API, apply, condition, eventually, forward, routes_world, try_get};
use common::{echo_pod, free_port, http, wait_for, work_dir};
use serde_json::{Value, json};

const FENCED: &str = "invalid route configuration detected and replaced with a direct response.";
/// The Lease of every replica here, and its retry period as `controller`
/// derives it (a seventh, at least 200 ms).
const LEASE_SECONDS: u64 = 3;

fn retry_period() -> Duration {
    (Duration::from_secs(LEASE_SECONDS) / 7).max(Duration::from_millis(200))
}

/// Route `r` as `routes_world` has it (/a and /b), plus `extra` (a path
/// prefix to `a`) when given.
fn route_r(extra: Option<&str>) -> String {
    let mut rules = vec![
        json!({"matches": [{"path": {"type": "PathPrefix", "value": "/a"}}], "backendRefs": [{"name": "a", "port": 80}]}),
        json!({"matches": [{"path": {"type": "PathPrefix", "value": "/b"}}], "backendRefs": [{"name": "b", "port": 80}]}),
    ];
    if let Some(p) = extra {
        rules.push(
            json!({"matches": [{"path": {"type": "PathPrefix", "value": p}}], "backendRefs": [{"name": "a", "port": 80}]}),
        );
    }
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "app"},
        "spec": {"parentRefs": [{"name": "gw", "namespace": "infra"}], "rules": rules},
    })
    .to_string()
}

/// Every object we write status on here.
const OBJECTS: [(&str, &str, Option<&str>, &str); 4] = [
    ("gateway.networking.k8s.io/v1", "GatewayClass", None, "portcullis"),
    ("gateway.networking.k8s.io/v1", "Gateway", Some("infra"), "gw"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute", Some("app"), "r"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute", Some("app"), "bad"),
];

/// What a status write would change, per object: its `resourceVersion`
/// and every condition (object, listeners, parents) as
/// `path/type -> (status, lastTransitionTime, observedGeneration)`.
#[derive(Debug, PartialEq)]
struct StatusPrint {
    resource_version: String,
    conditions: BTreeMap<String, (Value, Value, Value)>,
}

fn conditions_of(prefix: &str, conditions: &Value, out: &mut BTreeMap<String, (Value, Value, Value)>) {
    for c in conditions.as_array().into_iter().flatten() {
        out.insert(
            format!("{prefix}{}", c["type"].as_str().unwrap_or("?")),
            (
                c["status"].clone(),
                c["lastTransitionTime"].clone(),
                c["observedGeneration"].clone(),
            ),
        );
    }
}

async fn status_prints(client: &kube::Client) -> BTreeMap<String, StatusPrint> {
    let mut out = BTreeMap::new();
    for (api_version, kind, ns, name) in OBJECTS {
        // An API error is a gone object here too (the apiserver restarts
        // under some of these tests).
        let o = try_get(client, api_version, kind, ns, name)
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("{kind} {name} is gone"));
        let mut conditions = BTreeMap::new();
        let status = &o["status"];
        conditions_of("", &status["conditions"], &mut conditions);
        for l in status["listeners"].as_array().into_iter().flatten() {
            conditions_of(
                &format!("listener {}/", l["name"].as_str().unwrap_or("?")),
                &l["conditions"],
                &mut conditions,
            );
        }
        for (i, p) in status["parents"].as_array().into_iter().flatten().enumerate() {
            conditions_of(&format!("parent {i}/"), &p["conditions"], &mut conditions);
        }
        out.insert(
            format!("{kind} {}/{name}", ns.unwrap_or("")),
            StatusPrint {
                resource_version: o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                conditions,
            },
        );
    }
    out
}

/// Sum of every series of `family` (`name{...} value` and `name value`)
/// on the admin API at `admin`; None when it does not answer.
fn metric_sum(admin: u16, family: &str) -> Option<f64> {
    let (_, _, metrics) = http(admin, "admin", "/metrics")?;
    Some(
        metrics
            .lines()
            .filter(|l| {
                l.strip_prefix(family)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum(),
    )
}

fn writes(admin: u16) -> f64 {
    metric_sum(admin, "portcullis_status_writes_total").expect("metrics")
}

/// One `portcullis controller` without an Envoy of its own.
struct Replica {
    serve: common::Serve,
    xds: u16,
    admin: u16,
}

impl Replica {
    fn start(cluster: &testkit::kube::Cluster, name: &str, xds: u16, extra: &[&str]) -> Replica {
        let admin = free_port();
        let dir = work_dir(name);
        let lease = LEASE_SECONDS.to_string();
        let mut args = vec![
            "--listener-address",
            "127.0.0.1",
            // Its Envoys are the test's own (no kubelet for provisioned ones).
            "--provision=false",
            "--lease-duration-seconds",
            &lease,
        ];
        args.extend(extra);
        let serve = common::kube::controller(&cluster.kubeconfig, &dir.join("run"), xds, admin, &args, &[]);
        let replica = Replica { serve, xds, admin };
        wait_for(&format!("{name} to be ready"), Duration::from_secs(60), || {
            http(admin, "admin", "/readyz").is_some_and(|r| r.0 == 200)
        });
        replica
    }

    fn pid(&self) -> u32 {
        self.serve.child.id()
    }
}

/// An Envoy the test runs itself, fed by one replica's xDS server (so a
/// replica's death does not take it along, as in a cluster).
struct Envoy {
    child: std::process::Child,
    admin: u16,
}

impl Envoy {
    fn start(name: &str, xds: u16) -> Envoy {
        let admin = free_port();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(["bootstrap", "--gateway", "infra/gw"])
            .args(["--xds-port", &xds.to_string(), "--admin-port", &admin.to_string()])
            .output()
            .expect("portcullis bootstrap");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let dir = work_dir(name);
        let bootstrap = dir.join("bootstrap.json");
        std::fs::write(&bootstrap, &out.stdout).expect("write bootstrap");
        let log = std::fs::File::create(dir.join("envoy.log")).expect("envoy log");
        let child = std::process::Command::new(testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}")))
            .arg("-c")
            .arg(&bootstrap)
            .args(["--use-dynamic-base-id", "--log-level", "warn"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::from(log))
            .spawn()
            .expect("start envoy");
        Envoy { child, admin }
    }

    /// Does its route configuration (as Envoy holds it) match `path`?
    fn has_path(&self, path: &str) -> bool {
        http(self.admin, "x", "/config_dump?resource=dynamic_route_configs")
            .is_some_and(|(status, _, body)| status == 200 && body.contains(&format!("\"{path}\"")))
    }

    /// Requests its Gateway listeners answered (the admin listener's not
    /// counted).
    fn served(&self) -> u64 {
        let Some((_, _, stats)) = http(self.admin, "x", "/stats?filter=downstream_rq_completed") else {
            return 0;
        };
        stats
            .lines()
            .filter(|l| l.starts_with("http.") && !l.starts_with("http.admin."))
            .filter(|l| l.contains(".downstream_rq_completed:"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Status and body of a GET on a fresh connection, read up to its
/// Content-Length: Envoy keeps a connection it closes after a local reply
/// (the fenced 500) open for its delayed close timeout (1 s), which reading
/// to the end would wait for.
fn fetch(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{BufRead, Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut reader = std::io::BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let status = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut length = None;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Requests on a fresh connection each (so SO_REUSEPORT spreads them over
/// the Envoys) until stopped: /a and /b answer 200 from their pods, the
/// fenced rule its 500 and its neighbour 200. Anything else is a failure,
/// kept with when it happened.
struct Traffic {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(u64, Vec<String>)>,
}

impl Traffic {
    fn start(gw_port: u16) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let (mut sent, mut failures) = (0u64, Vec::new());
            let checks: [(&str, u16, &str); 4] = [
                ("/a", 200, "a-pod-1"),
                ("/b", 200, "b-pod-1"),
                ("/api/v11", 500, FENCED),
                ("/api/other", 200, "a-pod-1"),
            ];
            while !flag.load(Ordering::Relaxed) {
                for (path, want, body_has) in checks {
                    sent += 1;
                    match fetch(gw_port, path) {
                        Some((status, body)) if status == want && body.contains(body_has) => {}
                        other => failures.push(format!(
                            "{:.2} s: {path}: {:?}",
                            started.elapsed().as_secs_f64(),
                            other.map(|(s, b)| (s, b.chars().take(80).collect::<String>()))
                        )),
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            (sent, failures)
        });
        Traffic { stop, thread }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let (sent, failures) = self.thread.join().expect("traffic thread");
        assert!(
            failures.is_empty(),
            "{} of {sent} requests failed: {:?}",
            failures.len(),
            &failures[..failures.len().min(10)]
        );
        sent
    }
}

/// The Lease's holder and its `spec`.
async fn lease(client: &kube::Client) -> Option<(String, Value)> {
    let l = try_get(
        client,
        "coordination.k8s.io/v1",
        "Lease",
        Some("default"),
        "portcullis-controller",
    )
    .await
    .ok()
    .flatten()?;
    Some((
        l["spec"]["holderIdentity"].as_str()?.to_string(),
        l["spec"].clone(),
    ))
}

/// `b - a` for two Lease MicroTimes (`2026-01-02T03:04:05.678901Z`) of the
/// same day; None otherwise.
fn micro_time_gap(a: &Value, b: &Value) -> Option<Duration> {
    let parse = |v: &Value| -> Option<(String, f64)> {
        let (date, time) = v.as_str()?.trim_end_matches('Z').split_once('T')?;
        let mut parts = time.split(':');
        let h: f64 = parts.next()?.parse().ok()?;
        let m: f64 = parts.next()?.parse().ok()?;
        let sec: f64 = parts.next()?.parse().ok()?;
        Some((date.to_string(), h * 3600.0 + m * 60.0 + sec))
    };
    let ((da, ta), (db, tb)) = (parse(a)?, parse(b)?);
    (da == db && tb >= ta).then(|| Duration::from_secs_f64(tb - ta))
}

/// Route `r`'s Accepted condition at generation `g`, written.
async fn route_observed(client: &kube::Client, g: i64) -> Option<Value> {
    let r = try_get(client, GATEWAY_API, "HTTPRoute", Some("app"), "r")
        .await
        .ok()
        .flatten()?;
    let accepted = condition(&r["status"]["parents"][0]["conditions"], "Accepted")?.clone();
    (accepted["observedGeneration"] == g).then_some(accepted)
}

/// Cluster, CRDs, echo pods and the objects; None when skipped.
async fn cluster_with_objects(
    test: &str,
) -> Option<(
    testkit::kube::Cluster,
    kube::Client,
    u16,
    (echo::Handle, echo::Handle),
)> {
    let (cluster, client) = common::kube::cluster(test).await?;
    let a = echo_pod("app", "a-pod-1");
    let b = echo_pod("app", "b-pod-1");
    let gw_port = free_port();
    apply(&client, &routes_world(gw_port, forward(&a), forward(&b))).await;
    Some((cluster, client, gw_port, (a, b)))
}

/// Every object's status written and settled (the leader's queue empty).
async fn settled(client: &kube::Client, admin: u16) {
    eventually("every status written", Duration::from_secs(30), || async {
        let prints = status_prints(client).await;
        let all = prints.values().all(|p| !p.conditions.is_empty());
        let idle = metric_sum(admin, "portcullis_status_queue_depth") == Some(0.0);
        (all && idle).then_some(())
    })
    .await;
    // Let a late write land before the snapshot.
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_replicas_hand_over_on_sigkill_without_flapping_or_failed_requests() {
    let test = "controller_replicas_hand_over_on_sigkill_without_flapping_or_failed_requests";
    let Some((cluster, client, gw_port, _pods)) = cluster_with_objects(test).await else {
        return;
    };
    let (xds_1, xds_2) = (free_port(), free_port());
    let first = tokio::task::block_in_place(|| {
        Replica::start(&cluster, &format!("{test}-1"), xds_1, &["--no-envoy"])
    });
    let first_pid = first.pid();
    eventually("the first replica to lead", Duration::from_secs(20), || async {
        lease(&client)
            .await
            .filter(|(h, _)| h.ends_with(&format!("-{first_pid}")))
    })
    .await;
    settled(&client, first.admin).await;
    // The follower's translations then stamp their conditions with a later
    // second than the ones in the API: only the merge with the live
    // objects keeps a hand-over from rewriting them.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second = tokio::task::block_in_place(|| {
        Replica::start(&cluster, &format!("{test}-2"), xds_2, &["--no-envoy"])
    });
    let envoy_1 = Envoy::start(&format!("{test}-envoy-1"), first.xds);
    let envoy_2 = Envoy::start(&format!("{test}-envoy-2"), second.xds);
    tokio::task::block_in_place(|| {
        wait_for("both Envoys to serve /a", Duration::from_secs(60), || {
            // Fresh connections land on either Envoy.
            envoy_1.has_path("/a")
                && envoy_2.has_path("/a")
                && (0..8).all(|_| http(gw_port, "x", "/a").is_some_and(|r| r.0 == 200))
                && envoy_1.served() > 0
                && envoy_2.served() > 0
        });
    });
    settled(&client, first.admin).await;
    let initial_writes = writes(first.admin);
    assert!(
        initial_writes >= 4.0,
        "the leader wrote {initial_writes} statuses"
    );
    // An edit while both run: both translate it, only the leader writes.
    apply(&client, &route_r(Some("/before"))).await;
    eventually("the first edit's status", Duration::from_secs(20), || {
        route_observed(&client, 2)
    })
    .await;
    settled(&client, first.admin).await;
    let leader_writes = writes(first.admin);
    assert_eq!(
        leader_writes - initial_writes,
        1.0,
        "leader's status writes for one edit"
    );
    // A follower does no status work at all: no write, and not even the
    // comparison with the live objects (which, status being equal, would
    // hide a follower that writes).
    let follower_work = |admin| {
        (
            writes(admin),
            metric_sum(admin, "portcullis_status_unchanged_total").expect("metrics"),
            metric_sum(admin, "portcullis_status_conflicts_total").expect("metrics"),
        )
    };
    assert_eq!(
        follower_work(second.admin),
        (0.0, 0.0, 0.0),
        "the follower did status work"
    );
    let before = status_prints(&client).await;

    let traffic = Traffic::start(gw_port);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (holder, _) = lease(&client).await.expect("lease");
    // The leader dies without a word: no Lease release, no goodbye.
    let mut dead = first.serve;
    dead.child.kill().expect("kill -9 the leader");
    let _ = dead.child.wait();
    // Reaped: its Drop must not signal a pid that may be reused.
    std::mem::forget(dead);
    let killed = Instant::now();
    let (_, mut dead_lease) = lease(&client).await.expect("lease");
    let served_1_at_kill = envoy_1.served();
    let second_pid = second.pid();
    let taken = loop {
        match lease(&client).await {
            Some((h, spec)) if h.ends_with(&format!("-{second_pid}")) => break spec,
            // A renewal the leader sent just before its death may land
            // after the read above: its last renewal is the latest seen
            // (the bounds below are measured from it).
            Some((h, spec)) if h == holder => dead_lease = spec,
            _ => {}
        }
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "no hand-over from {holder} 20 s after its death"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let took = killed.elapsed();
    // On the Lease itself (both times from this host's clock): taken no
    // sooner than a Lease duration after the dead leader's last renewal —
    // never while it might still be leading — and not much later. The
    // upper bounds leave room for a loaded machine: the follower's reads
    // and writes of the Lease, and its wake-ups, may each run late.
    let slack = Duration::from_secs(2);
    let expiry = micro_time_gap(&dead_lease["renewTime"], &taken["acquireTime"])
        .unwrap_or_else(|| panic!("Lease times: {dead_lease} then {taken}"));
    assert!(
        expiry >= Duration::from_secs(LEASE_SECONDS),
        "taken {expiry:?} after the last renewal, within the Lease ({LEASE_SECONDS} s)"
    );
    assert!(
        expiry
            <= Duration::from_secs(LEASE_SECONDS) + retry_period() * 2 + Duration::from_millis(300) + slack,
        "taken {expiry:?} after the last renewal (Lease {LEASE_SECONDS} s)"
    );
    // The follower saw the last renewal at most a retry period late, and
    // tries to take the Lease once per retry period.
    let bound = Duration::from_secs(LEASE_SECONDS) + retry_period() * 2 + Duration::from_millis(500) + slack;
    assert!(
        took <= bound,
        "hand-over took {took:?} (Lease {LEASE_SECONDS} s, bound {bound:?})"
    );
    tokio::task::block_in_place(|| {
        wait_for("the new leader to say so", Duration::from_secs(5), || {
            metric_sum(second.admin, "portcullis_leader") == Some(1.0)
        });
    });
    // The new leader merges what it translated with the live objects: the
    // status is the same, so nothing is written (no flapping), though it
    // did look at every object (the four of `OBJECTS`: once it has, its
    // pass over them is done and any write of it counted).
    tokio::task::block_in_place(|| {
        wait_for(
            "the new leader to compare the pending status with the live objects",
            Duration::from_secs(20),
            || metric_sum(second.admin, "portcullis_status_unchanged_total").unwrap_or(0.0) >= 4.0,
        );
    });
    assert_eq!(writes(second.admin), 0.0, "status rewritten by the hand-over");
    let after = status_prints(&client).await;
    assert_eq!(before, after, "status changed across the hand-over");

    // A replica started again on the dead one's xDS port (its Envoy
    // reconnects to it) joins as a follower: it writes nothing.
    let third = tokio::task::block_in_place(|| {
        Replica::start(&cluster, &format!("{test}-3"), xds_1, &["--no-envoy"])
    });
    // An edit after the hand-over: served by both Envoys, its status
    // written by the new leader only (one write: the Gateway's attached
    // route count does not change).
    apply(&client, &route_r(Some("/after"))).await;
    tokio::task::block_in_place(|| {
        // Each Envoy asked for its configuration: SO_REUSEPORT picks which
        // one answers a request, and an Envoy answers with the edit a
        // moment after its config dump shows it: the requests are checked
        // in the same wait.
        wait_for("the edit on both Envoys", Duration::from_secs(60), || {
            envoy_1.has_path("/after")
                && envoy_2.has_path("/after")
                && (0..8).all(|_| http(gw_port, "x", "/after").is_some_and(|r| r.0 == 200))
        });
    });
    let accepted = eventually("the edit's status", Duration::from_secs(20), || {
        route_observed(&client, 3)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        writes(second.admin),
        1.0,
        "status writes of the new leader for one edit"
    );
    assert_eq!(
        follower_work(third.admin),
        (0.0, 0.0, 0.0),
        "the restarted follower did status work"
    );
    let before_r = &before["HTTPRoute app/r"].conditions["parent 0/Accepted"];
    assert_eq!(
        (&accepted["status"], &accepted["lastTransitionTime"]),
        (&before_r.0, &before_r.1),
        "Accepted stayed True: its transition time must not move"
    );
    let sent = tokio::task::block_in_place(|| traffic.finish());
    let served_1_after = envoy_1.served() - served_1_at_kill;
    assert!(
        served_1_after > 0,
        "the dead leader's Envoy served nothing after the kill"
    );
    eprintln!(
        "{test}: hand-over {:.2} s after SIGKILL, {:.2} s after the last renewal (Lease {LEASE_SECONDS} s, retry {} ms); \
         {sent} requests, 0 failed (Envoy 1 served {served_1_after} after the kill, Envoy 2 {} in all); \
         status writes: old leader {initial_writes} + 1 for an edit, new leader 0 at the hand-over and 1 for an edit, followers 0",
        took.as_secs_f64(),
        expiry.as_secs_f64(),
        retry_period().as_millis(),
        envoy_2.served(),
    );
    drop((third, second, envoy_1, envoy_2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_apiserver_restart_under_traffic_loses_nothing() {
    let test = "controller_apiserver_restart_under_traffic_loses_nothing";
    let Some((mut cluster, client, gw_port, _pods)) = cluster_with_objects(test).await else {
        return;
    };
    // One replica with its own Envoy, electing itself (the outage outlasts
    // the Lease: it stops leading and must take the Lease again).
    let replica = tokio::task::block_in_place(|| Replica::start(&cluster, test, free_port(), &[]));
    tokio::task::block_in_place(|| {
        wait_for("Envoy to serve /a", Duration::from_secs(60), || {
            http(gw_port, "x", "/a").is_some_and(|r| r.0 == 200)
        });
    });
    settled(&client, replica.admin).await;
    let before = status_prints(&client).await;
    let writes_before = writes(replica.admin);
    let errors_before = metric_sum(replica.admin, "portcullis_kube_watch_errors_total").unwrap_or(0.0);
    let relists_before = metric_sum(replica.admin, "portcullis_kube_relists_total").unwrap_or(0.0);

    let traffic = Traffic::start(gw_port);
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.stop_apiserver();
    let down = Instant::now();
    tokio::time::sleep(Duration::from_secs(LEASE_SECONDS + 2)).await;
    tokio::task::block_in_place(|| {
        wait_for("the replica to stop leading", Duration::from_secs(5), || {
            metric_sum(replica.admin, "portcullis_leader") == Some(0.0)
        });
    });
    cluster.start_apiserver().await.expect("restart the apiserver");
    let outage = down.elapsed();
    let client = cluster.client().await.expect("client");
    tokio::task::block_in_place(|| {
        wait_for("leading again", Duration::from_secs(30), || {
            metric_sum(replica.admin, "portcullis_leader") == Some(1.0)
        });
    });
    let errors =
        metric_sum(replica.admin, "portcullis_kube_watch_errors_total").unwrap_or(0.0) - errors_before;
    assert!(errors > 0.0, "the watches never noticed the outage");
    // Nothing lost, nothing rewritten: the status in the API is the one
    // from before (the objects are still in the snapshot: a dropped one
    // would change the Gateway's attached routes or a route's status).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        status_prints(&client).await,
        before,
        "status changed across the outage"
    );
    assert_eq!(
        writes(replica.admin),
        writes_before,
        "status written after the outage"
    );
    // An edit after the restart: served, its status written (once).
    let edited = Instant::now();
    apply(&client, &route_r(Some("/after"))).await;
    tokio::task::block_in_place(|| {
        wait_for("the edit on Envoy", Duration::from_secs(45), || {
            http(gw_port, "x", "/after").is_some_and(|r| r.0 == 200)
        });
    });
    let propagated = edited.elapsed();
    eventually("the edit's status", Duration::from_secs(20), || {
        route_observed(&client, 2)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        writes(replica.admin),
        writes_before + 1.0,
        "status writes for one edit"
    );
    let sent = tokio::task::block_in_place(|| traffic.finish());
    // The restarted apiserver's watch cache starts at a newer revision than
    // the watches resume from (the Lease renewals moved it): `410 Gone`,
    // and the reflectors list again. Nothing above was lost through that.
    let relists = metric_sum(replica.admin, "portcullis_kube_relists_total").unwrap_or(0.0) - relists_before;
    assert!(
        relists > 0.0,
        "no relist after the restart: the 410 path was not exercised"
    );
    eprintln!(
        "{test}: apiserver down {:.1} s; {sent} requests, 0 failed; {errors} watch errors, {relists} relists; \
         status unchanged; edit after the restart served in {} ms",
        outage.as_secs_f64(),
        propagated.as_millis()
    );
    drop(replica);
}
