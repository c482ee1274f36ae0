//! The ADS server against the real Envoy, in both protocol variants:
//! initial configuration served, an update pushed, a NACK reported with
//! Envoy's message while the previous version keeps serving, and recovery.

use std::io::{Read, Write};
use std::net::{TcpListener as StdListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteConfiguration, RouteMatch, VirtualHost, route, route_match,
};
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher;
use translate::GatewayXds;

#[derive(Default)]
struct Events {
    acks: Vec<(String, String)>,
    nacks: Vec<(String, String, String)>,
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Events>>);

impl xds::Observer for Recorder {
    fn acked(&self, _node: &str, type_url: &str, version: &str) {
        self.0
            .lock()
            .expect("lock")
            .acks
            .push((type_url.into(), version.into()));
    }
    fn nacked(&self, _node: &str, type_url: &str, version: &str, message: &str) {
        self.0
            .lock()
            .expect("lock")
            .nacks
            .push((type_url.into(), version.into(), message.into()));
    }
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port")
}

fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut b = String::new();
    s.read_to_string(&mut b).ok()?;
    let status = b.split_whitespace().nth(1)?.parse().ok()?;
    Some((
        status,
        b.split_once("\r\n\r\n")
            .map(|x| x.1.to_string())
            .unwrap_or_default(),
    ))
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

/// A Gateway's xDS: one listener, one route answering `body` directly, plus
/// optionally a route with a regex Envoy rejects (RE2 program too large).
fn config(port: u16, body: &str, poison: bool) -> GatewayXds {
    let gw_yaml = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: c}}\nspec: {{controllerName: portcullis.dev/gateway-controller}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: t}}\nspec:\n  gatewayClassName: c\n  listeners: [{{name: http, protocol: HTTP, port: {port}}}]\n"
    );
    let loaded = api::loader::load_str("t.yaml", &gw_yaml);
    let settings = translate::Settings {
        listener_address: "127.0.0.1".into(),
        ..Default::default()
    };
    let mut gw = translate::translate(&loaded.inputs, &settings)
        .gateways
        .remove("t/gw")
        .expect("gateway");
    let direct = |path: &str, text: &str| Route {
        name: path.into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix(path.into())),
            ..Default::default()
        }),
        action: Some(route::Action::DirectResponse(DirectResponseAction {
            status: 200,
            body: Some(DataSource {
                specifier: Some(data_source::Specifier::InlineString(text.into())),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    };
    let mut routes = vec![direct("/hello", body)];
    if poison {
        routes.push(Route {
            name: "poison".into(),
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::SafeRegex(RegexMatcher {
                    regex: "a{1000}".into(),
                    ..Default::default()
                })),
                ..Default::default()
            }),
            ..direct("/x", "never")
        });
    }
    gw.routes = vec![
        (&RouteConfiguration {
            name: format!("t/gw/{port}"),
            virtual_hosts: vec![VirtualHost {
                name: "all".into(),
                domains: vec!["*".into()],
                routes,
                ..Default::default()
            }],
            ..Default::default()
        })
            .into(),
    ];
    gw
}

struct Envoy(Child);
impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run(delta: bool) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let cache = xds::SnapshotCache::new();
    let recorder = Recorder::default();
    let xds_port = free_port();
    let port = free_port();
    cache.set("t/gw", xds::Snapshot::from_gateway(&config(port, "v1", false)));
    let server = xds::AdsServer::new(cache.clone(), Arc::new(recorder.clone()));
    rt.spawn(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", xds_port))
            .await
            .expect("bind");
        tonic::transport::Server::builder()
            .add_service(server.into_service())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .expect("serve");
    });

    let mut bootstrap = translate::output::ads_bootstrap("t/gw", "test", "127.0.0.1", xds_port, None);
    if delta {
        bootstrap["dynamic_resources"]["ads_config"]["api_type"] = "DELTA_GRPC".into();
    }
    let path = std::env::temp_dir().join(format!("xds-test-{}-{delta}.json", std::process::id()));
    std::fs::write(&path, bootstrap.to_string()).expect("write bootstrap");
    let bin = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    let _envoy = Envoy(
        Command::new(bin)
            .arg("-c")
            .arg(&path)
            .args(["--disable-hot-restart", "--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start envoy"),
    );

    wait_for("v1 served", || get(port, "/hello").is_some_and(|r| r.1 == "v1"));
    cache.set("t/gw", xds::Snapshot::from_gateway(&config(port, "v2", false)));
    wait_for("v2 served", || get(port, "/hello").is_some_and(|r| r.1 == "v2"));

    // A configuration Envoy rejects: NACKed with Envoy's message; v2 stays.
    cache.set("t/gw", xds::Snapshot::from_gateway(&config(port, "v3", true)));
    wait_for("a NACK", || !recorder.0.lock().expect("lock").nacks.is_empty());
    let nack = recorder.0.lock().expect("lock").nacks[0].clone();
    assert_eq!(nack.0, xds::types::ROUTE);
    assert!(
        nack.2.contains("program size"),
        "Envoy's message is carried: {}",
        nack.2
    );
    assert_eq!(
        get(port, "/hello").map(|r| r.1),
        Some("v2".into()),
        "the last good version keeps serving"
    );

    // Fixed: served and ACKed.
    cache.set("t/gw", xds::Snapshot::from_gateway(&config(port, "v4", false)));
    wait_for("v4 served", || get(port, "/hello").is_some_and(|r| r.1 == "v4"));
    let acks = recorder.0.lock().expect("lock").acks.clone();
    for t in [xds::types::CLUSTER, xds::types::LISTENER, xds::types::ROUTE] {
        assert!(acks.iter().any(|(ty, _)| ty == t), "no ACK for {t}: {acks:?}");
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn state_of_the_world_against_real_envoy() {
    run(false);
}

#[test]
fn delta_against_real_envoy() {
    run(true);
}
