//! The gRPC client ([`extension::Chain`]) against in-process tonic
//! servers: every hook, unset replies, error statuses, deadlines, retries,
//! message size limits, TLS and mTLS, a unix socket, the reply cache,
//! chained managers and the failOpen flag.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Mode, Tagger, chain, free_port, manager, serve_tcp, serve_tcp_port, serve_unix, temp_dir};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{Route, VirtualHost};
use extension::config::ExtensionConfig;
use extension::{CallResult, Chain, ChainOptions};
use translate::extension::{
    ClusterCall, EndpointsCall, ExtensionResource, Hook, HookFailure, Hooks, ListenerCall, RouteCall,
    TranslateCall, VirtualHostCall,
};

fn route_call(name: &str) -> RouteCall {
    RouteCall {
        route: Route {
            name: name.into(),
            ..Default::default()
        },
        hostnames: vec!["a.example".into()],
        extension_resources: vec![],
        extension_policies: vec![],
    }
}

fn resource(group: &str, kind: &str) -> ExtensionResource {
    ExtensionResource {
        unstructured_bytes: Arc::from(
            format!(r#"{{"apiVersion":"{group}/v1","kind":"{kind}","metadata":{{"name":"x","namespace":"default"}}}}"#)
                .into_bytes(),
        ),
    }
}

fn route_names(replies: Vec<translate::extension::Reply<Route>>) -> Vec<Option<String>> {
    replies
        .into_iter()
        .map(|r| r.expect("call succeeds").map(|r| r.name))
        .collect()
}

#[test]
fn every_hook_round_trips() {
    let srv = Tagger::new("+a", Mode::Tag);
    let server = serve_tcp(srv.clone(), None);
    let c = chain(vec![manager("a", &server.address)]);

    assert_eq!(
        route_names(c.post_route_modify(vec![route_call("r1"), route_call("r2")])),
        [Some("r1+a".to_string()), Some("r2+a".to_string())]
    );
    let vh = c.post_virtual_host_modify(vec![VirtualHostCall {
        virtual_host: VirtualHost {
            name: "vh".into(),
            ..Default::default()
        },
    }]);
    assert_eq!(
        vh[0].as_ref().expect("ok").as_ref().map(|v| v.name.as_str()),
        Some("vh+a")
    );
    let l = c.post_http_listener_modify(vec![ListenerCall {
        listener: Listener {
            name: "l".into(),
            ..Default::default()
        },
        extension_resources: vec![],
    }]);
    assert_eq!(
        l[0].as_ref().expect("ok").as_ref().map(|v| v.name.as_str()),
        Some("l+a")
    );
    let cl = c.post_cluster_modify(vec![ClusterCall {
        cluster: Cluster {
            name: "c".into(),
            ..Default::default()
        },
        backend_extension_resources: vec![],
    }]);
    assert_eq!(
        cl[0].as_ref().expect("ok").as_ref().map(|v| v.name.as_str()),
        Some("c+a")
    );
    let ep = c.post_endpoints_modify(vec![EndpointsCall {
        load_assignment: ClusterLoadAssignment {
            cluster_name: "c".into(),
            ..Default::default()
        },
    }]);
    assert_eq!(
        ep[0]
            .as_ref()
            .expect("ok")
            .as_ref()
            .map(|v| v.cluster_name.as_str()),
        Some("c+a")
    );
    let tr = c
        .post_translate_modify(TranslateCall {
            clusters: vec![Cluster {
                name: "c".into(),
                ..Default::default()
            }],
            // Listeners are not included by default: the server never sees
            // them and the reply keeps them as they were.
            listeners: vec![Listener {
                name: "l".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .expect("ok")
        .expect("translate always replies");
    assert_eq!(tr.clusters[0].name, "c+a");
    assert_eq!(tr.listeners[0].name, "l", "listeners not included: untouched");
    assert_eq!(srv.calls(), 7);

    let s = c.stats();
    assert_eq!(s.count(Hook::Route, CallResult::Modified), 2);
    assert_eq!(s.count(Hook::Translation, CallResult::Modified), 1);
    assert_eq!(s.durations[&Hook::Route].count, 2);
    assert_eq!(s.managers[0].reachable, Some(true));
}

#[test]
fn route_context_reaches_the_server() {
    let srv = Tagger::new("+a", Mode::Tag);
    let server = serve_tcp(srv.clone(), None);
    let c = chain(vec![manager("a", &server.address)]);
    let mut call = route_call("r");
    call.extension_resources = vec![resource("a.io", "Filter")];
    call.extension_policies = vec![resource("a.io", "Policy")];
    c.post_route_modify(vec![call]);
    let seen = srv.seen.contexts.lock().expect("lock");
    assert_eq!(
        seen[0],
        (
            Hook::Route,
            vec!["a.example".to_string()],
            vec!["Filter".to_string()],
            vec!["Policy".to_string()]
        )
    );
}

#[test]
fn unset_replies_mean_unchanged() {
    let server = serve_tcp(Tagger::new("+a", Mode::Unset), None);
    let c = chain(vec![manager("a", &server.address)]);
    assert_eq!(route_names(c.post_route_modify(vec![route_call("r")])), [None]);
    let l = c.post_http_listener_modify(vec![ListenerCall {
        listener: Listener::default(),
        extension_resources: vec![],
    }]);
    assert!(matches!(l[0], Ok(None)));
    assert_eq!(c.stats().count(Hook::Route, CallResult::Unchanged), 1);
}

#[test]
fn error_status_is_a_status_failure_without_retry() {
    let srv = Tagger::new("+a", Mode::FailFirst(u32::MAX, tonic::Code::PermissionDenied));
    let server = serve_tcp(srv.clone(), None);
    let c = chain(vec![manager("a", &server.address)]);
    let r = c.post_route_modify(vec![route_call("r")]);
    let e = r[0].as_ref().expect_err("fails");
    assert_eq!(e.manager, "a");
    assert!(!e.fail_open);
    assert!(
        matches!(&e.failure, HookFailure::Status { hook: Hook::Route, code, .. } if code == "PERMISSION_DENIED"),
        "{e}"
    );
    assert_eq!(srv.calls(), 1, "PERMISSION_DENIED is not retryable by default");
    assert_eq!(c.stats().count(Hook::Route, CallResult::Error), 1);
}

#[test]
fn retries_retryable_codes_then_succeeds() {
    let srv = Tagger::new("+a", Mode::FailFirst(2, tonic::Code::Unavailable));
    let server = serve_tcp(srv.clone(), None);
    let c = chain(vec![manager("a", &server.address)]);
    assert_eq!(
        route_names(c.post_route_modify(vec![route_call("r")])),
        [Some("r+a".to_string())]
    );
    assert_eq!(srv.calls(), 3, "two UNAVAILABLE, then the answer");
}

#[test]
fn retries_stop_at_max_attempts() {
    let srv = Tagger::new("+a", Mode::FailFirst(u32::MAX, tonic::Code::Unavailable));
    let server = serve_tcp(srv.clone(), None);
    let mut m = manager("a", &server.address);
    m.retry.max_attempts = 3;
    let c = chain(vec![m]);
    let r = c.post_route_modify(vec![route_call("r")]);
    assert!(matches!(
        r[0].as_ref().expect_err("fails").failure,
        HookFailure::Unreachable { .. }
    ));
    assert_eq!(srv.calls(), 3);
}

#[test]
fn configured_retryable_codes_are_retried() {
    let srv = Tagger::new("+a", Mode::FailFirst(1, tonic::Code::ResourceExhausted));
    let server = serve_tcp(srv.clone(), None);
    let mut m = manager("a", &server.address);
    m.retry.retryable = vec![tonic::Code::ResourceExhausted];
    let c = chain(vec![m]);
    assert_eq!(
        route_names(c.post_route_modify(vec![route_call("r")])),
        [Some("r+a".to_string())]
    );
    assert_eq!(srv.calls(), 2);
}

#[test]
fn deadline_bounds_a_hung_call() {
    let server = serve_tcp(Tagger::new("+a", Mode::Sleep(Duration::from_secs(10))), None);
    let mut m = manager("a", &server.address);
    m.timeout = Duration::from_millis(300);
    let c = chain(vec![m]);
    let t = Instant::now();
    let r = c.post_route_modify(vec![route_call("r")]);
    let took = t.elapsed();
    assert!(
        matches!(
            r[0].as_ref().expect_err("times out").failure,
            HookFailure::Deadline {
                hook: Hook::Route,
                deadline_ms: 300
            }
        ),
        "{r:?}"
    );
    assert!(
        took < Duration::from_secs(2),
        "answered at the deadline, took {took:?}"
    );
    assert_eq!(c.stats().count(Hook::Route, CallResult::Deadline), 1);
}

#[test]
fn retries_never_run_past_the_deadline() {
    // Every attempt fails at once; the backoff (up to 5 s) does not fit in
    // the deadline (200 ms), so the call ends at the deadline, not after.
    let server = serve_tcp(
        Tagger::new("+a", Mode::FailFirst(u32::MAX, tonic::Code::Unavailable)),
        None,
    );
    let mut m = manager("a", &server.address);
    m.timeout = Duration::from_millis(200);
    m.retry.initial_backoff = Duration::from_secs(5);
    m.retry.max_backoff = Duration::from_secs(5);
    let c = chain(vec![m]);
    let t = Instant::now();
    let r = c.post_route_modify(vec![route_call("r")]);
    assert!(r[0].is_err());
    // Generous for a loaded machine, yet a pause that ran past the deadline
    // (a random share of 5 s) would mostly overshoot it.
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[test]
fn unreachable_server_fails_fast_and_reports_reachability() {
    let port = free_port();
    let address = extension::config::ServiceAddress::Ip {
        address: "127.0.0.1".parse().expect("ip"),
        port,
    };
    let c = chain(vec![manager("down", &address)]);
    assert_eq!(c.probe(Duration::from_millis(300))[0].reachable, Some(false));
    let r = c.post_route_modify(vec![route_call("r")]);
    let e = r[0].as_ref().expect_err("unreachable");
    assert!(matches!(e.failure, HookFailure::Unreachable { .. }), "{e}");
    assert_eq!(c.reachability()[0].reachable, Some(false));

    // The server comes up on that port: the next call connects, without
    // a new client.
    let srv = Tagger::new("+up", Mode::Tag);
    let _server = serve_tcp_port(srv.clone(), port);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c.post_route_modify(vec![route_call("r")]);
        if let Ok(Some(route)) = &r[0] {
            assert_eq!(route.name, "r+up");
            break;
        }
        assert!(Instant::now() < deadline, "never reconnected: {r:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(c.reachability()[0].reachable, Some(true));
    assert_eq!(c.probe(Duration::from_secs(2))[0].reachable, Some(true));
}

#[test]
fn max_message_size_applies_both_ways() {
    // Reply too large for the client.
    let server = serve_tcp(Tagger::new("+a", Mode::Big(64 * 1024)), None);
    let mut m = manager("a", &server.address);
    m.max_message_size = 16 * 1024;
    let c = chain(vec![m]);
    let r = c.post_route_modify(vec![route_call("r")]);
    let e = r[0].as_ref().expect_err("reply too large");
    assert!(matches!(e.failure, HookFailure::InvalidReply { .. }), "{e}");

    // Request too large to send: refused before it leaves.
    let srv = Tagger::new("+a", Mode::Tag);
    let server = serve_tcp(srv.clone(), None);
    let mut m = manager("a", &server.address);
    m.max_message_size = 1024;
    let c = chain(vec![m]);
    let r = c.post_route_modify(vec![route_call(&"n".repeat(4096))]);
    let e = r[0].as_ref().expect_err("request too large");
    assert!(
        matches!(&e.failure, HookFailure::Status { code, .. } if code == "RESOURCE_EXHAUSTED"),
        "{e}"
    );
    assert_eq!(srv.calls(), 0, "nothing reached the server");
    // Under the limit it passes.
    assert!(matches!(
        c.post_route_modify(vec![route_call("small")])[0],
        Ok(Some(_))
    ));
}

#[test]
fn unix_socket() {
    let dir = temp_dir("unix");
    let path = dir.join("ext.sock");
    let server = serve_unix(Tagger::new("+u", Mode::Tag), &path);
    let c = chain(vec![manager("u", &server.address)]);
    assert_eq!(
        route_names(c.post_route_modify(vec![route_call("r")])),
        [Some("r+u".to_string())]
    );
    assert_eq!(c.probe(Duration::from_secs(2))[0].reachable, Some(true));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn identical_calls_are_answered_from_the_cache() {
    let srv = Tagger::new("+a", Mode::Tag);
    let server = serve_tcp(srv.clone(), None);
    let c = chain(vec![manager("a", &server.address)]);
    let batch = || (0..10).map(|i| route_call(&format!("r{i}"))).collect::<Vec<_>>();
    let first = route_names(c.post_route_modify(batch()));
    assert_eq!(srv.calls(), 10);
    let second = route_names(c.post_route_modify(batch()));
    assert_eq!(srv.calls(), 10, "the second identical batch made no call");
    assert_eq!(first, second);
    let s = c.stats();
    assert_eq!(s.count(Hook::Route, CallResult::Cached), 10);
    assert_eq!(s.cache.hits, 10);
    // A different context is a different request.
    let mut changed = route_call("r0");
    changed.hostnames = vec!["b.example".into()];
    c.post_route_modify(vec![changed]);
    assert_eq!(srv.calls(), 11);
}

#[test]
fn failures_are_not_cached() {
    let srv = Tagger::new("+a", Mode::FailFirst(1, tonic::Code::Internal));
    let server = serve_tcp(srv.clone(), None);
    let c = chain(vec![manager("a", &server.address)]);
    assert!(c.post_route_modify(vec![route_call("r")])[0].is_err());
    assert_eq!(
        route_names(c.post_route_modify(vec![route_call("r")])),
        [Some("r+a".to_string())]
    );
    assert_eq!(srv.calls(), 2);
}

#[test]
fn a_batch_runs_concurrently_bounded() {
    let srv = Tagger::new("+a", Mode::Sleep(Duration::from_millis(500)));
    let server = serve_tcp(srv.clone(), None);
    let config = ExtensionConfig {
        managers: vec![manager("a", &server.address)],
    };
    let c = Chain::new(
        &config,
        ChainOptions {
            concurrency: 8,
            ..Default::default()
        },
    )
    .expect("chain");
    let t = Instant::now();
    let r = c.post_route_modify((0..16).map(|i| route_call(&format!("r{i}"))).collect());
    let took = t.elapsed();
    assert!(r.iter().all(|r| matches!(r, Ok(Some(_)))));
    // 16 calls of 500 ms: one at a time would take 8 s; 8 at a time
    // take two rounds (1 s).
    assert!(took >= Duration::from_millis(1000), "bounded: {took:?}");
    assert!(took < Duration::from_secs(4), "concurrent: {took:?}");
}

#[test]
fn chained_managers_in_order_skipping_those_without_the_hook() {
    let a = Tagger::new("+a", Mode::Tag);
    let b = Tagger::new("+b", Mode::Tag);
    let x = Tagger::new("+x", Mode::Tag);
    let (sa, sb, sx) = (
        serve_tcp(a.clone(), None),
        serve_tcp(b.clone(), None),
        serve_tcp(x.clone(), None),
    );
    let mut ma = manager("a", &sa.address);
    ma.resources.insert(translate::extension::GroupKind {
        group: "a.io".into(),
        kind: "A".into(),
    });
    let mut mx = manager("x", &sx.address);
    mx.hooks = [Hook::VirtualHost].into_iter().collect();
    let mut mb = manager("b", &sb.address);
    mb.resources.insert(translate::extension::GroupKind {
        group: "b.io".into(),
        kind: "B".into(),
    });
    let c = chain(vec![ma, mx, mb]);
    let mut call = route_call("r");
    call.extension_resources = vec![resource("a.io", "A"), resource("b.io", "B")];
    assert_eq!(
        route_names(c.post_route_modify(vec![call])),
        [Some("r+a+b".to_string())]
    );
    assert_eq!(x.calls(), 0, "x lacks the Route hook");
    // Each manager of a chain sees only its own kinds.
    assert_eq!(a.seen.contexts.lock().expect("lock")[0].2, ["A"]);
    assert_eq!(b.seen.contexts.lock().expect("lock")[0].2, ["B"]);
    // An unset reply in the middle passes the input on.
    let u = Tagger::new("+u", Mode::Unset);
    let su = serve_tcp(u, None);
    let sa2 = serve_tcp(Tagger::new("+a", Mode::Tag), None);
    let c = chain(vec![manager("u", &su.address), manager("a", &sa2.address)]);
    assert_eq!(
        route_names(c.post_route_modify(vec![route_call("r")])),
        [Some("r+a".to_string())]
    );
}

#[test]
fn fail_open_is_carried_and_skipped_in_a_chain() {
    let bad = serve_tcp(
        Tagger::new("+bad", Mode::FailFirst(u32::MAX, tonic::Code::Internal)),
        None,
    );
    let good_srv = Tagger::new("+g", Mode::Tag);
    let good = serve_tcp(good_srv.clone(), None);

    // One manager, failOpen: the error carries the flag.
    let mut m = manager("bad", &bad.address);
    m.fail_open = true;
    let c = chain(vec![m.clone()]);
    let r = c.post_route_modify(vec![route_call("r")]);
    let e = r[0].as_ref().expect_err("fails");
    assert!(e.fail_open, "{e}");
    assert_eq!(e.manager, "bad");

    // failOpen: false: the flag is false.
    let mut closed = m.clone();
    closed.fail_open = false;
    let c = chain(vec![closed.clone()]);
    assert!(
        !c.post_route_modify(vec![route_call("r")])[0]
            .as_ref()
            .expect_err("fails")
            .fail_open
    );

    // In a chain, a fail-open manager is skipped, as Envoy Gateway does.
    let c = chain(vec![m, manager("good", &good.address)]);
    assert_eq!(
        route_names(c.post_route_modify(vec![route_call("r")])),
        [Some("r+g".to_string())]
    );
    // Its failure is kept for the caller, since the reply is good's change.
    let skipped = c.take_skipped_failures();
    assert_eq!(skipped.len(), 1);
    assert!(skipped[0].fail_open && skipped[0].manager == "bad", "{skipped:?}");
    assert!(c.take_skipped_failures().is_empty(), "drained");
    // A fail-closed one fails the call; later managers are not asked.
    let before = good_srv.calls();
    let c = chain(vec![closed, manager("good", &good.address)]);
    let r = c.post_route_modify(vec![route_call("r2")]);
    assert!(!r[0].as_ref().expect_err("fails").fail_open);
    assert_eq!(good_srv.calls(), before);
}

#[test]
fn translate_gives_each_manager_only_its_kinds() {
    let srv = Tagger::new("+a", Mode::Tag);
    let server = serve_tcp(srv.clone(), None);
    let mut m = manager("a", &server.address);
    m.translation.listeners = true;
    m.translation.clusters = false;
    let c = chain(vec![m]);
    let tr = c
        .post_translate_modify(TranslateCall {
            clusters: vec![Cluster {
                name: "c".into(),
                ..Default::default()
            }],
            listeners: vec![Listener {
                name: "l".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .expect("ok")
        .expect("reply");
    assert_eq!(tr.listeners[0].name, "l+a");
    assert_eq!(tr.clusters[0].name, "c", "clusters excluded: kept as given");
}

#[test]
fn observer_sees_every_call() {
    let server = serve_tcp(Tagger::new("+a", Mode::Tag), None);
    let c = chain(vec![manager("a", &server.address)]);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    c.set_observer(Arc::new(move |m, h, r, _d| {
        s.lock().expect("lock").push((m.to_string(), h, r));
    }));
    c.post_route_modify(vec![route_call("r")]);
    c.post_route_modify(vec![route_call("r")]);
    assert_eq!(
        *seen.lock().expect("lock"),
        [("a".to_string(), Hook::Route, CallResult::Modified)],
        "the cached second call did not reach the server"
    );
}

#[test]
fn callable_from_inside_tokio_runtimes() {
    let server = serve_tcp(Tagger::new("+a", Mode::Tag), None);
    let c = Arc::new(chain(vec![manager("a", &server.address)]));
    // A multi-threaded runtime's worker.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("rt");
    let c2 = c.clone();
    let names = rt
        .block_on(async move {
            tokio::spawn(async move { route_names(c2.post_route_modify(vec![route_call("w")])) }).await
        })
        .expect("join");
    assert_eq!(names, [Some("w+a".to_string())]);
    // A current-thread runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let names = rt.block_on(async { route_names(c.post_route_modify(vec![route_call("ct")])) });
    assert_eq!(names, [Some("ct+a".to_string())]);
}

#[test]
fn dropping_a_chain_inside_a_runtime_does_not_panic() {
    let server = serve_tcp(Tagger::new("+a", Mode::Tag), None);
    let c = chain(vec![manager("a", &server.address)]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async move { drop(c) });
}

#[test]
fn a_hung_server_costs_one_deadline_per_batch_not_one_per_call() {
    let srv = Tagger::new("+a", Mode::Sleep(Duration::from_secs(30)));
    let server = serve_tcp(srv.clone(), None);
    let mut m = manager("a", &server.address);
    m.timeout = Duration::from_millis(300);
    let c = Chain::new(
        &ExtensionConfig { managers: vec![m] },
        ChainOptions {
            concurrency: 8,
            breaker_after: 8,
            ..Default::default()
        },
    )
    .expect("chain");
    let t = Instant::now();
    let r = c.post_route_modify((0..400).map(|i| route_call(&format!("r{i}"))).collect());
    let took = t.elapsed();
    assert!(r.iter().all(|r| r.is_err()));
    // 400 calls, 8 at a time, 300 ms each: 15 s without the breaker.
    assert!(took < Duration::from_secs(6), "took {took:?}");
    assert!(srv.calls() < 40, "{} calls reached the hung server", srv.calls());
    let e = r[399].as_ref().expect_err("fails");
    assert!(matches!(e.failure, HookFailure::Unreachable { .. }), "{e}");
}

#[test]
fn one_slow_route_does_not_open_the_breaker_for_the_others() {
    let ext = extension::example::ExampleExtension::new(extension::example::Behaviour {
        sleep_route: Some("slow".into()),
        sleep: Duration::from_secs(5),
        ..Default::default()
    });
    let server = serve_tcp(ext, None);
    let mut m = manager("a", &server.address);
    // Every plain call (the first with the HTTP/2 handshake) must beat the
    // deadline, so it is generous; the slow one (5 s) still misses it.
    m.timeout = Duration::from_secs(2);
    let c = chain(vec![m]);
    let mut calls: Vec<_> = (0..50).map(|i| route_call(&format!("r{i}"))).collect();
    calls.push(route_call("slow"));
    let r = c.post_route_modify(calls);
    assert!(r[..50].iter().all(|r| matches!(r, Ok(Some(_)))), "{r:?}");
    assert!(matches!(
        r[50].as_ref().expect_err("slow").failure,
        HookFailure::Deadline { .. }
    ));
}

#[test]
fn a_server_that_never_answers_is_cut_at_the_deadline() {
    // A listener that accepts connections and then says nothing (no HTTP/2
    // settings, no reply): only the client's own timer can end the call.
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in l.incoming().take(4) {
            conns.push(c);
            if conns.len() == 1 {
                std::thread::sleep(Duration::from_secs(3));
                return;
            }
        }
    });
    let address = extension::config::ServiceAddress::Ip {
        address: "127.0.0.1".parse().expect("ip"),
        port,
    };
    let mut m = manager("silent", &address);
    m.timeout = Duration::from_millis(300);
    let c = chain(vec![m]);
    let t = Instant::now();
    let r = c.post_route_modify(vec![route_call("r")]);
    assert!(
        matches!(
            r[0].as_ref().expect_err("times out").failure,
            HookFailure::Deadline { .. }
        ),
        "{r:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    drop(held);
}

#[test]
fn a_dropped_connection_is_unreachable_and_retried() {
    // Accepts and closes at once, every time: gRPC-Go would say
    // UNAVAILABLE, which the default policy retries.
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    let accepted = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let n = accepted.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(c);
        }
    });
    let address = extension::config::ServiceAddress::Ip {
        address: "127.0.0.1".parse().expect("ip"),
        port,
    };
    let c = chain(vec![manager("closing", &address)]);
    let r = c.post_route_modify(vec![route_call("r")]);
    let e = r[0].as_ref().expect_err("fails");
    assert!(matches!(e.failure, HookFailure::Unreachable { .. }), "{e}");
    assert!(
        accepted.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "retried on a new connection"
    );
}

/// Replies to every rpc with an INTERNAL status carrying an 8000-char
/// message.
struct Loud;

#[tonic::async_trait]
impl extension::proto::envoy_gateway_extension_server::EnvoyGatewayExtension for Loud {
    async fn post_route_modify(
        &self,
        _r: tonic::Request<extension::proto::PostRouteModifyRequest>,
    ) -> Result<tonic::Response<extension::proto::PostRouteModifyResponse>, tonic::Status> {
        Err(tonic::Status::internal("x".repeat(8000)))
    }
    async fn post_virtual_host_modify(
        &self,
        _r: tonic::Request<extension::proto::PostVirtualHostModifyRequest>,
    ) -> Result<tonic::Response<extension::proto::PostVirtualHostModifyResponse>, tonic::Status> {
        Err(tonic::Status::internal("x".repeat(8000)))
    }
    async fn post_http_listener_modify(
        &self,
        _r: tonic::Request<extension::proto::PostHttpListenerModifyRequest>,
    ) -> Result<tonic::Response<extension::proto::PostHttpListenerModifyResponse>, tonic::Status> {
        Err(tonic::Status::internal("x".repeat(8000)))
    }
    async fn post_cluster_modify(
        &self,
        _r: tonic::Request<extension::proto::PostClusterModifyRequest>,
    ) -> Result<tonic::Response<extension::proto::PostClusterModifyResponse>, tonic::Status> {
        Err(tonic::Status::internal("x".repeat(8000)))
    }
    async fn post_endpoints_modify(
        &self,
        _r: tonic::Request<extension::proto::PostEndpointsModifyRequest>,
    ) -> Result<tonic::Response<extension::proto::PostEndpointsModifyResponse>, tonic::Status> {
        Err(tonic::Status::internal("x".repeat(8000)))
    }
    async fn post_translate_modify(
        &self,
        _r: tonic::Request<extension::proto::PostTranslateModifyRequest>,
    ) -> Result<tonic::Response<extension::proto::PostTranslateModifyResponse>, tonic::Status> {
        Err(tonic::Status::internal("x".repeat(8000)))
    }
}

#[test]
fn a_servers_error_message_is_truncated() {
    let server = serve_tcp(Loud, None);
    let c = chain(vec![manager("loud", &server.address)]);
    let r = c.post_route_modify(vec![route_call("r")]);
    let HookFailure::Status { message, code, .. } = &r[0].as_ref().expect_err("fails").failure else {
        panic!("{r:?}")
    };
    assert_eq!(code, "INTERNAL");
    assert_eq!(message.chars().count(), 513, "512 chars and an ellipsis");
}

#[test]
fn a_call_from_the_chains_own_thread_fails_instead_of_deadlocking() {
    let server = serve_tcp(Tagger::new("+a", Mode::Tag), None);
    let c = Arc::new(chain(vec![manager("a", &server.address)]));
    let nested = Arc::new(std::sync::Mutex::new(None));
    let (weak, out) = (Arc::downgrade(&c), nested.clone());
    // The observer runs on the chain's runtime: a hook call from there
    // would wait for its own runtime.
    c.set_observer(Arc::new(move |_, _, _, _| {
        if let Some(c) = weak.upgrade()
            && let Ok(mut slot) = out.lock()
            && slot.is_none()
        {
            *slot = Some(c.post_route_modify(vec![route_call("nested")]));
        }
    }));
    let r = c.post_route_modify(vec![route_call("outer")]);
    assert!(matches!(r[0], Ok(Some(_))));
    let nested = nested.lock().expect("lock").take().expect("the observer ran");
    let e = nested[0].as_ref().expect_err("refused");
    assert!(e.to_string().contains("own runtime thread"), "{e}");
}
