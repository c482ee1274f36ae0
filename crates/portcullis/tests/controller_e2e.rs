//! End to end, Kubernetes mode: a real etcd + kube-apiserver (testkit),
//! `portcullis controller` against it with the real Envoy it supervises,
//! real echo backends on loopback (EndpointSlices point at them: no kubelet
//! runs). Objects are created, edited and deleted through the API; status
//! is read back through the API.

mod common;

use std::time::{Duration, Instant};

use common::kube::{
    GATEWAY_API, api_for, apply, apply_docs, condition, create, eventually, forward, get, routes_world,
};
use common::{echo_pod, free_port, http, wait_for, work_dir};
use kube::api::DeleteParams;
use serde_json::{Value, json};

const CONTROLLER: &str = "portcullis.dev/gateway-controller";
const FENCED: &str = "invalid route configuration detected and replaced with a direct response.";

/// Applies `yaml` as `kube::apply` does, except that a TrafficPolicy is
/// created plainly, as a client that does not ask for strict field
/// validation sends it: a schema without our kept unknown fields would
/// prune the misspelled field here, silently.
async fn apply_objects(client: &kube::Client, yaml: &str) {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("test YAML");
    for doc in docs.iter().filter(|d| !d.is_null()) {
        if doc["kind"] == "TrafficPolicy" {
            create(client, doc).await;
        } else {
            apply_docs(client, std::slice::from_ref(doc)).await;
        }
    }
}

/// `portcullis_translations_total` from the admin API.
fn translations(admin: u16) -> u64 {
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("portcullis_translations_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no portcullis_translations_total in {metrics}"))
}

fn objects(gw_port: u16, a: std::net::SocketAddr, b: std::net::SocketAddr) -> String {
    format!(
        r#"{world}{p}apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: typo, namespace: app}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: p}}]
  rbca: {{matchExpressions: ["true"]}}
"#,
        world = routes_world(gw_port, a, b),
        p = common::prefix_route("p", &[("/p", "a")]),
    )
}

/// A cluster with the CRDs and the test objects, echo backends, and a
/// running `portcullis controller` with its Envoy.
struct World {
    // Dropped in order: the controller stops before the cluster does.
    controller: common::Serve,
    cluster: testkit::kube::Cluster,
    client: kube::Client,
    gw_port: u16,
    admin: u16,
    started: Instant,
    _backends: (echo::Handle, echo::Handle),
}

/// The Lease of the controllers of these tests (seconds): short, so a
/// hand-over is quick.
const LEASE_SECONDS: u64 = 3;

/// A controller whose Lease lasts `lease_seconds`.
fn start_controller(
    kubeconfig: &std::path::Path,
    run_dir: &std::path::Path,
    xds: u16,
    admin: u16,
    lease_seconds: u64,
    extra: &[&str],
    env: &[(&str, &str)],
) -> common::Serve {
    // Part 1's tests: the local Envoy, no provisioned objects.
    let lease = lease_seconds.to_string();
    let mut args = vec!["--listener-address", "127.0.0.1", "--provision=false"];
    args.extend(["--lease-duration-seconds", lease.as_str()]);
    args.extend(extra);
    common::kube::controller(kubeconfig, run_dir, xds, admin, &args, env)
}

async fn world(test: &str) -> Option<World> {
    world_with(test, &[], LEASE_SECONDS).await
}

/// [`world`] with `env` for the controller, and its Lease.
async fn world_with(test: &str, env: &[(&str, &str)], lease_seconds: u64) -> Option<World> {
    let started = Instant::now();
    let (cluster, client) = common::kube::cluster(test).await?;
    let a = echo_pod("app", "a-pod-1");
    let b = echo_pod("app", "b-pod-1");
    let dir = work_dir(test);
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    apply_objects(&client, &objects(gw_port, forward(&a), forward(&b))).await;
    let controller = start_controller(
        &cluster.kubeconfig,
        &dir.join("run"),
        xds,
        admin,
        lease_seconds,
        &[],
        env,
    );
    tokio::task::block_in_place(|| {
        wait_for("Envoy to serve /a", Duration::from_secs(60), || {
            http(gw_port, "x", "/a").is_some_and(|r| r.0 == 200)
        });
    });
    Some(World {
        cluster,
        client,
        gw_port,
        admin,
        started,
        _backends: (a, b),
        controller,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_serves_and_writes_status_through_the_api() {
    let test = "controller_serves_and_writes_status_through_the_api";
    let Some(world) = world(test).await else {
        return;
    };
    let World {
        client,
        gw_port,
        admin,
        started,
        ..
    } = &world;
    let (client, gw_port, admin, started) = (client.clone(), *gw_port, *admin, *started);
    // Traffic: the route, its backends, the fenced rule and its neighbour.
    tokio::task::block_in_place(|| {
        let (_, _, body) = http(gw_port, "x", "/a").expect("a");
        assert!(body.contains("a-pod-1"), "{body}");
        let (_, _, body) = http(gw_port, "x", "/b").expect("b");
        assert!(body.contains("b-pod-1"), "{body}");
        let (status, _, body) = http(gw_port, "x", "/api/v11").expect("fenced");
        assert_eq!((status, body.as_str()), (500, FENCED));
        assert_eq!(http(gw_port, "x", "/api/other").map(|r| r.0), Some(200));
        // A TrafficPolicy field the loader cannot read (kept by our CRD,
        // not pruned by the apiserver) fails its target closed.
        let (status, _, body) = http(gw_port, "x", "/p").expect("policy target");
        assert_eq!((status, body.as_str()), (500, FENCED));
    });
    let serving = started.elapsed();

    // Status, read back through the API.
    let gc = eventually("GatewayClass status", Duration::from_secs(20), || async {
        let gc = get(&client, GATEWAY_API, "GatewayClass", None, "portcullis").await?;
        condition(&gc["status"]["conditions"], "Accepted")
            .is_some()
            .then_some(gc)
    })
    .await;
    let accepted = condition(&gc["status"]["conditions"], "Accepted").expect("Accepted");
    assert_eq!(accepted["status"], "True", "{gc}");
    assert_eq!(accepted["observedGeneration"], gc["metadata"]["generation"]);
    assert!(
        condition(&gc["status"]["conditions"], "SupportedVersion").is_some(),
        "{gc}"
    );

    let gw = eventually("Gateway Programmed", Duration::from_secs(20), || async {
        let gw = get(&client, GATEWAY_API, "Gateway", Some("infra"), "gw").await?;
        (condition(&gw["status"]["conditions"], "Programmed")?["status"] == "True").then_some(gw)
    })
    .await;
    assert_eq!(
        condition(&gw["status"]["conditions"], "Accepted").expect("Accepted")["status"],
        "True"
    );
    let listener = &gw["status"]["listeners"][0];
    assert_eq!(listener["name"], "http");
    assert_eq!(listener["attachedRoutes"], 3, "{gw}");

    let policy = eventually("TrafficPolicy status", Duration::from_secs(20), || async {
        let p = get(
            &client,
            "gateway.portcullis.dev/v1alpha1",
            "TrafficPolicy",
            Some("app"),
            "typo",
        )
        .await?;
        p["status"]["ancestors"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
            .then_some(p)
    })
    .await;
    let ancestor = &policy["status"]["ancestors"][0];
    assert_eq!(ancestor["controllerName"], CONTROLLER);
    let policy_accepted = condition(&ancestor["conditions"], "Accepted").expect("Accepted");
    assert_eq!(
        (&policy_accepted["status"], &policy_accepted["reason"]),
        (&json!("False"), &json!("Invalid"))
    );
    assert!(
        policy_accepted["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.rbca")),
        "{policy}"
    );

    let route = eventually("HTTPRoute r status", Duration::from_secs(20), || async {
        let r = get(&client, GATEWAY_API, "HTTPRoute", Some("app"), "r").await?;
        r["status"]["parents"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
            .then_some(r)
    })
    .await;
    let parent = &route["status"]["parents"][0];
    assert_eq!(parent["controllerName"], CONTROLLER);
    assert_eq!(parent["parentRef"]["name"], "gw");
    let route_accepted = condition(&parent["conditions"], "Accepted")
        .expect("Accepted")
        .clone();
    assert_eq!(route_accepted["status"], "True");
    assert_eq!(route_accepted["observedGeneration"], 1);
    assert_eq!(
        condition(&parent["conditions"], "ResolvedRefs").expect("ResolvedRefs")["status"],
        "True"
    );

    let bad = eventually("HTTPRoute bad status", Duration::from_secs(20), || async {
        let r = get(&client, GATEWAY_API, "HTTPRoute", Some("app"), "bad").await?;
        r["status"]["parents"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
            .then_some(r)
    })
    .await;
    let invalid =
        condition(&bad["status"]["parents"][0]["conditions"], "PartiallyInvalid").expect("PartiallyInvalid");
    assert_eq!(invalid["status"], "True", "{bad}");
    assert_eq!(invalid["reason"], "UnsupportedValue");
    assert!(
        invalid["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.rules[0].matches[0].path.value")),
        "{invalid}"
    );
    // `portcullis get` reads the controller's admin API as it reads serve's.
    let get_routes = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["get", "routes", "--admin", &format!("127.0.0.1:{admin}")])
        .output()
        .expect("portcullis get routes");
    let table = String::from_utf8_lossy(&get_routes.stdout);
    assert!(get_routes.status.success(), "{table}");
    assert!(
        table.lines().any(|l| l.contains("app") && l.contains("bad")),
        "{table}"
    );
    // Status is written by our field manager, on the status subresource.
    assert!(
        bad["metadata"]["managedFields"].as_array().is_some_and(|m| m
            .iter()
            .any(|f| f["manager"] == "portcullis" && f["subresource"] == "status")),
        "{bad}"
    );

    // An edit propagates: /a renamed to /renamed (generation 2). It is
    // translated once: our own status writes (which change only `status`
    // and `resourceVersion`) must not trigger translations.
    tokio::time::sleep(Duration::from_millis(1100)).await; // a new second for lastTransitionTime
    let translations_before =
        tokio::task::block_in_place(|| common::settled("translations", || translations(admin)));
    let edited = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "app"},
        "spec": {"parentRefs": [{"name": "gw", "namespace": "infra"}], "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/renamed"}}], "backendRefs": [{"name": "a", "port": 80}]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/b"}}], "backendRefs": [{"name": "b", "port": 80}]},
        ]},
    });
    apply(&client, &edited.to_string()).await;
    tokio::task::block_in_place(|| {
        wait_for("the edit to reach Envoy", Duration::from_secs(20), || {
            http(gw_port, "x", "/renamed").is_some_and(|r| r.0 == 200)
                && http(gw_port, "x", "/a").is_some_and(|r| r.0 == 404)
        });
    });
    let route = eventually("observedGeneration 2", Duration::from_secs(20), || async {
        let r = get(&client, GATEWAY_API, "HTTPRoute", Some("app"), "r").await?;
        (condition(&r["status"]["parents"][0]["conditions"], "Accepted")?["observedGeneration"] == 2)
            .then_some(r)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1000)).await; // let any feedback show
    assert_eq!(
        translations(admin),
        translations_before + 1,
        "translations per edit"
    );
    let after = condition(&route["status"]["parents"][0]["conditions"], "Accepted").expect("Accepted");
    assert_eq!(after["status"], "True");
    // Its status did not change: the transition time is the first one.
    assert_eq!(
        after["lastTransitionTime"], route_accepted["lastTransitionTime"],
        "{route}"
    );

    // A delete propagates.
    let routes = api_for(&client, &edited).await;
    routes
        .delete("r", &DeleteParams::default())
        .await
        .expect("delete r");
    tokio::task::block_in_place(|| {
        wait_for("the delete to reach Envoy", Duration::from_secs(20), || {
            http(gw_port, "x", "/b").is_some_and(|r| r.0 == 404)
        });
    });
    // ... and the Gateway counts one route.
    eventually("attachedRoutes 2", Duration::from_secs(20), || async {
        let gw = get(&client, GATEWAY_API, "Gateway", Some("infra"), "gw").await?;
        (gw["status"]["listeners"][0]["attachedRoutes"] == 2).then_some(())
    })
    .await;
    eprintln!(
        "{test}: apiserver up + CRDs + first 200 in {:.1} s; whole test {:.1} s",
        serving.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// An apiserver outage under traffic: Envoy keeps serving the last good
/// configuration (the controller's snapshot does not shrink on watch
/// errors), and once the apiserver is back the watches recover and an edit
/// propagates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_keeps_serving_through_an_apiserver_outage() {
    let test = "controller_keeps_serving_through_an_apiserver_outage";
    let Some(mut world) = world(test).await else {
        return;
    };
    let gw_port = world.gw_port;
    world.cluster.stop_apiserver();
    // Long enough for the watches to fail and retry several times.
    tokio::task::block_in_place(|| {
        let until = Instant::now() + Duration::from_secs(4);
        let mut requests = 0;
        while Instant::now() < until {
            for path in ["/a", "/b"] {
                let status = http(gw_port, "x", path).map(|r| r.0);
                assert_eq!(
                    status,
                    Some(200),
                    "{path} during the outage, after {requests} requests"
                );
                requests += 1;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    world
        .cluster
        .start_apiserver()
        .await
        .expect("restart the apiserver");
    let back = Instant::now();
    let client = world.cluster.client().await.expect("client");
    let edited = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "app"},
        "spec": {"parentRefs": [{"name": "gw", "namespace": "infra"}], "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/after"}}], "backendRefs": [{"name": "a", "port": 80}]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/b"}}], "backendRefs": [{"name": "b", "port": 80}]},
        ]},
    });
    apply(&client, &edited.to_string()).await;
    tokio::task::block_in_place(|| {
        // The watcher's backoff after a few seconds of errors is short.
        wait_for(
            "an edit after the outage to reach Envoy",
            Duration::from_secs(45),
            || http(gw_port, "x", "/after").is_some_and(|r| r.0 == 200),
        );
        assert_eq!(http(gw_port, "x", "/b").map(|r| r.0), Some(200));
    });
    // Reported, not asserted: how long the watches took to recover
    // (kube_provider::backoff caps the retry delay at 3 s).
    eprintln!(
        "{test}: the edit reached Envoy {:.1} s after the apiserver was back; whole test {:.1} s",
        back.elapsed().as_secs_f64(),
        world.started.elapsed().as_secs_f64()
    );
}

async fn lease_holder(client: &kube::Client) -> Option<String> {
    let lease = get(
        client,
        "coordination.k8s.io/v1",
        "Lease",
        Some("default"),
        "portcullis-controller",
    )
    .await?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_string)
}

async fn set_path(client: &kube::Client, path: &str) {
    let route = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "app"},
        "spec": {"parentRefs": [{"name": "gw", "namespace": "infra"}], "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": path}}], "backendRefs": [{"name": "a", "port": 80}]},
        ]},
    });
    apply(client, &route.to_string()).await;
}

async fn observed_generation(client: &kube::Client) -> Option<(i64, i64)> {
    let r = get(client, GATEWAY_API, "HTTPRoute", Some("app"), "r").await?;
    let observed =
        condition(&r["status"]["parents"][0]["conditions"], "Accepted")?["observedGeneration"].as_i64()?;
    Some((r["metadata"]["generation"].as_i64()?, observed))
}

/// The Lease of both replicas of the hand-over test (seconds): long
/// enough for the follower to translate an edit and for the test to read
/// its status well before the Lease can expire, on a loaded machine.
const HANDOVER_LEASE_SECONDS: u64 = 10;

/// Two replicas: the first holds the Lease and writes status; the second
/// translates and serves xDS but does not write. The leader frozen, the
/// second takes the Lease once it expires and writes the status of an edit
/// it had translated before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_leader_election_hands_over_status_writing() {
    let test = "controller_leader_election_hands_over_status_writing";
    let Some(mut world) = world_with(test, &[], HANDOVER_LEASE_SECONDS).await else {
        return;
    };
    let client = world.client.clone();
    let first = world.controller.child.id();
    let holder = eventually("the first replica to lead", Duration::from_secs(20), || async {
        lease_holder(&client)
            .await
            .filter(|h| h.ends_with(&format!("-{first}")))
    })
    .await;

    // A follower with its own xDS and admin ports (no Envoy of its own).
    let dir = work_dir(&format!("{test}-b"));
    let (xds_b, admin_b) = (free_port(), free_port());
    let second = start_controller(
        &world.cluster.kubeconfig,
        &dir.join("run"),
        xds_b,
        admin_b,
        HANDOVER_LEASE_SECONDS,
        &["--no-envoy"],
        &[],
    );
    let second_pid = second.child.id();
    tokio::task::block_in_place(|| {
        wait_for("the follower to serve", Duration::from_secs(30), || {
            http(admin_b, "admin", "/readyz").is_some_and(|r| r.0 == 200)
        });
    });
    // Still the first replica's Lease, over several renew periods (a
    // seventh of the Lease each): renewed three times, the holder the same
    // at every look.
    let mut renewals: Vec<Value> = Vec::new();
    let watching = Instant::now();
    while renewals.len() < 4 {
        assert!(
            watching.elapsed() < Duration::from_secs(30),
            "the Lease was not renewed every period: {renewals:?}"
        );
        let lease = get(
            &client,
            "coordination.k8s.io/v1",
            "Lease",
            Some("default"),
            "portcullis-controller",
        )
        .await
        .expect("the Lease");
        assert_eq!(
            lease["spec"]["holderIdentity"].as_str(),
            Some(holder.as_str()),
            "{lease}"
        );
        let renewed = lease["spec"]["renewTime"].clone();
        if renewals.last() != Some(&renewed) {
            renewals.push(renewed);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The leader freezes (SIGSTOP): it neither renews the Lease nor writes.
    // An edit now is translated by the follower, which must not write its
    // status while the Lease may still be the leader's...
    let stopped = std::process::Command::new("kill")
        .args(["-STOP", &first.to_string()])
        .status()
        .expect("kill -STOP");
    assert!(stopped.success());
    let killed = Instant::now();
    set_path(&client, "/handed-over").await;
    tokio::task::block_in_place(|| {
        wait_for(
            "the follower to serve the edit over xDS",
            Duration::from_secs(10),
            || {
                http(admin_b, "admin", "/api/status")
                    .is_some_and(|r| r.2.contains("\"observedGeneration\":2"))
            },
        );
    });
    let (generation, observed) = observed_generation(&client).await.expect("route status");
    // The follower takes the Lease a Lease duration after it saw the last
    // renewal at the earliest, and that renewal was at most a retry period
    // (a seventh of the Lease) before the freeze: 8.5 s after it.
    let checked = killed.elapsed();
    assert!(
        checked < Duration::from_secs(HANDOVER_LEASE_SECONDS - 2),
        "too slow to check before the Lease expires ({checked:?} after the freeze)"
    );
    assert_eq!(
        (generation, observed),
        (2, 1),
        "a follower wrote status while the Lease was the leader's"
    );
    // ... and takes the Lease once it has not been renewed for its duration.
    let (generation, _) = eventually(
        "the new leader to write the edit's status",
        Duration::from_secs(HANDOVER_LEASE_SECONDS * 4),
        || async {
            observed_generation(&client)
                .await
                .filter(|(g, o)| g == o && *g >= 2)
        },
    )
    .await;
    let took = killed.elapsed();
    let new_holder = lease_holder(&client).await.expect("a holder");
    assert!(
        new_holder.ends_with(&format!("-{second_pid}")),
        "holder {new_holder}"
    );
    // The frozen leader cannot take a SIGTERM: end it.
    let _ = world.controller.child.kill();
    let _ = world.controller.child.wait();
    eprintln!(
        "{test}: status of generation {generation} written by the new leader {:.1} s after the old one froze (Lease {HANDOVER_LEASE_SECONDS} s)",
        took.as_secs_f64()
    );
    drop(second);
}

/// A NACK (injected with the test-only fault file: portcullis's own output
/// never produces one) shows on the Gateway in the API as
/// `Programmed=False`, as in the admin API; an ACK of a later version
/// clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_writes_a_nack_as_programmed_false() {
    let test = "controller_writes_a_nack_as_programmed_false";
    let fault = std::env::temp_dir().join(format!("{test}-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&fault);
    let fault_env = fault.to_string_lossy().into_owned();
    let Some(world) = world_with(
        test,
        &[("PORTCULLIS_TEST_FAULT_FILE", fault_env.as_str())],
        LEASE_SECONDS,
    )
    .await
    else {
        return;
    };
    let client = world.client.clone();
    let programmed = |client: kube::Client| async move {
        let gw = get(&client, GATEWAY_API, "Gateway", Some("infra"), "gw").await?;
        let c = condition(&gw["status"]["conditions"], "Programmed")?.clone();
        Some((
            c["status"].as_str()?.to_string(),
            c["message"].as_str()?.to_string(),
        ))
    };
    eventually("Programmed=True", Duration::from_secs(20), || {
        let client = client.clone();
        async move { programmed(client).await.filter(|(s, _)| s == "True") }
    })
    .await;
    std::fs::write(&fault, r#"{"name": "test-fault", "connect_timeout": "-1s"}"#).expect("fault");
    set_path(&client, "/nacked").await;
    let (_, message) = eventually("Programmed=False after the NACK", Duration::from_secs(20), || {
        let client = client.clone();
        async move { programmed(client).await.filter(|(s, _)| s == "False") }
    })
    .await;
    assert!(message.contains("Envoy rejected"), "{message}");
    std::fs::remove_file(&fault).expect("rm fault");
    set_path(&client, "/acked").await;
    eventually("Programmed=True after an ACK", Duration::from_secs(20), || {
        let client = client.clone();
        async move { programmed(client).await.filter(|(s, _)| s == "True") }
    })
    .await;
}

/// One sample of the controller's `/metrics` (`name{labels} value`).
fn metric(admin: u16, series: &str) -> f64 {
    let (_, _, metrics) = http(admin, "admin", "/metrics").expect("metrics");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The status code only, read from the status line: Envoy holds a
/// connection it closes after a local reply (a 404) open for its delayed
/// close timeout (1 s), which `http` (reading to the end) would count as
/// propagation time.
fn status_line(port: u16, path: &str) -> Option<u16> {
    use std::io::{BufRead, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut line = String::new();
    std::io::BufReader::new(stream).read_line(&mut line).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Status churn: with many routes, an edit of one writes the status of
/// that route only (the others' and the Gateway's did not change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_status_churn_one_edit_one_write() {
    let test = "controller_status_churn_one_edit_one_write";
    let routes: usize = std::env::var("PORTCULLIS_CHURN_ROUTES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    let Some(world) = world(test).await else {
        return;
    };
    let (client, admin) = (world.client.clone(), world.admin);
    let created = Instant::now();
    let route = |i: usize, path: &str| {
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": format!("churn-{i}"), "namespace": "app"},
            "spec": {"parentRefs": [{"name": "gw", "namespace": "infra"}], "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": path}}], "backendRefs": [{"name": "a", "port": 80}]},
            ]},
        })
        .to_string()
    };
    for i in 0..routes {
        apply(&client, &route(i, &format!("/churn/{i}"))).await;
    }
    let writes = |admin| metric(admin, "portcullis_status_writes_total{kind=\"HTTPRoute\"}");
    let all = |admin| {
        ["GatewayClass", "Gateway", "HTTPRoute", "TrafficPolicy"]
            .iter()
            .map(|k| metric(admin, &format!("portcullis_status_writes_total{{kind=\"{k}\"}}")))
            .sum::<f64>()
    };
    // Settled: every route's status written (3 routes of the world + ours).
    tokio::task::block_in_place(|| {
        wait_for("every route's status", Duration::from_secs(120), || {
            writes(admin) >= (routes + 3) as f64 && metric(admin, "portcullis_status_queue_depth") == 0.0
        });
    });
    let settled = created.elapsed();
    let before = tokio::task::block_in_place(|| common::settled("status writes", || all(admin)));
    apply(&client, &route(7, "/churn/edited")).await;
    eventually("the edited route's status", Duration::from_secs(30), || async {
        let r = get(&client, GATEWAY_API, "HTTPRoute", Some("app"), "churn-7").await?;
        (condition(&r["status"]["parents"][0]["conditions"], "Accepted")?["observedGeneration"] == 2)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let per_edit = all(admin) - before;
    assert_eq!(per_edit, 1.0, "status writes for one edit among {routes} routes");
    // Propagation with this many routes: API create -> Envoy answers 200.
    let mut latencies = Vec::new();
    for i in 0..10 {
        let path = format!("/fresh/{i}");
        let start = Instant::now();
        apply(&client, &route(routes + i, &path)).await;
        tokio::task::block_in_place(|| {
            wait_for("a new route to be served", Duration::from_secs(30), || {
                status_line(world.gw_port, &path) == Some(200)
            });
        });
        latencies.push(start.elapsed());
    }
    latencies.sort();
    eprintln!(
        "{test}: {routes} routes created and their status written in {:.1} s; one edit = {per_edit} status write; \
         create HTTPRoute -> 200 at {routes} routes: median {} ms, max {} ms (10 samples)",
        settled.as_secs_f64(),
        latencies[latencies.len() / 2].as_millis(),
        latencies[latencies.len() - 1].as_millis(),
    );
}

/// A controller started while the apiserver is down waits for it (serving
/// nothing before the initial lists), then serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_started_before_the_apiserver_waits_for_it() {
    let test = "controller_started_before_the_apiserver_waits_for_it";
    let Some((mut cluster, client)) = common::kube::cluster(test).await else {
        return;
    };
    let a = echo_pod("app", "a-pod-1");
    let b = echo_pod("app", "b-pod-1");
    let gw_port = free_port();
    apply_objects(&client, &objects(gw_port, forward(&a), forward(&b))).await;
    cluster.stop_apiserver();
    let dir = work_dir(test);
    let (xds, admin) = (free_port(), free_port());
    let mut controller = start_controller(
        &cluster.kubeconfig,
        &dir.join("run"),
        xds,
        admin,
        LEASE_SECONDS,
        &[],
        &[],
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        controller.child.try_wait().expect("try_wait").is_none(),
        "the controller exited while the apiserver was down"
    );
    assert!(
        http(admin, "admin", "/readyz").is_none(),
        "serving before the initial lists"
    );
    cluster.start_apiserver().await.expect("start the apiserver");
    tokio::task::block_in_place(|| {
        wait_for("Envoy to serve /a", Duration::from_secs(60), || {
            http(gw_port, "x", "/a").is_some_and(|r| r.0 == 200)
        });
    });
    drop(controller);
}

/// An HTTPS listener whose certificate is a `kubernetes.io/tls` Secret
/// read through the API; the provider holds the data of that Secret only,
/// not of every TLS Secret of the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_serves_https_with_a_tls_secret_from_the_api() {
    let test = "controller_serves_https_with_a_tls_secret_from_the_api";
    let Some(world) = world(test).await else {
        return;
    };
    let client = world.client.clone();
    let dir = work_dir(&format!("{test}-tls"));
    let (key, cert) = (dir.join("tls.key"), dir.join("tls.crt"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
        ])
        .args([
            "-subj",
            "/CN=secure.example",
            "-addext",
            "subjectAltName=DNS:secure.example",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let b64 = |p: &std::path::Path| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(p).expect("read"))
    };
    let https_port = free_port();
    let objects = json!([
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
         "metadata": {"name": "secure", "namespace": "infra"},
         "data": {"tls.crt": b64(&cert), "tls.key": b64(&key)}},
        // Referenced by nothing: the controller must not hold its data.
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
         "metadata": {"name": "unused", "namespace": "app"},
         "data": {"tls.crt": b64(&cert), "tls.key": b64(&key)}},
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
         "metadata": {"name": "gw", "namespace": "infra"},
         "spec": {"gatewayClassName": "portcullis", "listeners": [
            {"name": "http", "protocol": "HTTP", "port": world.gw_port, "allowedRoutes": {"namespaces": {"from": "All"}}},
            {"name": "https", "protocol": "HTTPS", "port": https_port, "hostname": "secure.example",
             "tls": {"mode": "Terminate", "certificateRefs": [{"name": "secure"}]},
             "allowedRoutes": {"namespaces": {"from": "All"}}},
         ]}},
    ]);
    for object in objects.as_array().expect("list") {
        apply(&client, &object.to_string()).await;
    }
    let url = format!("https://secure.example:{https_port}/a");
    let resolve = format!("secure.example:{https_port}:127.0.0.1");
    tokio::task::block_in_place(|| {
        wait_for(
            "HTTPS with the Secret's certificate",
            Duration::from_secs(30),
            || {
                std::process::Command::new("curl")
                    .args(["-s", "--max-time", "2", "--cacert"])
                    .arg(&cert)
                    .args(["--resolve", &resolve, &url])
                    .output()
                    .is_ok_and(|o| {
                        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("a-pod-1")
                    })
            },
        );
    });
    let gw = eventually("the https listener's status", Duration::from_secs(20), || async {
        let gw = get(&client, GATEWAY_API, "Gateway", Some("infra"), "gw").await?;
        let listeners = gw["status"]["listeners"].as_array()?.clone();
        listeners.into_iter().find(|l| l["name"] == "https")
    })
    .await;
    assert_eq!(
        condition(&gw["conditions"], "ResolvedRefs").expect("ResolvedRefs")["status"],
        "True",
        "{gw}"
    );
    // Of the two TLS Secrets, only the referenced one is held.
    assert_eq!(metric(world.admin, "portcullis_kube_secrets_held"), 1.0);
}
