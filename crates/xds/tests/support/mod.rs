//! What the ADS tests share: an ADS server on loopback, the real Envoy fed
//! by it, plain HTTP to Envoy's listeners, and an observer that records
//! ACKs and NACKs.

#![allow(dead_code)] // each test binary uses its own part

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

/// (type URL, version) of each ACK; (type URL, version, message) of each NACK.
#[derive(Default)]
pub struct Events {
    pub acks: Vec<(String, String)>,
    pub nacks: Vec<(String, String, String)>,
}

#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Events>>);

impl Recorder {
    pub fn events(&self) -> std::sync::MutexGuard<'_, Events> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl xds::Observer for Recorder {
    fn acked(&self, _node: &str, type_url: &str, version: &str) {
        self.events().acks.push((type_url.into(), version.into()));
    }
    fn nacked(&self, _node: &str, type_url: &str, version: &str, message: &str) {
        self.events()
            .nacks
            .push((type_url.into(), version.into(), message.into()));
    }
}

pub fn free_port() -> u16 {
    testkit::port::free()
}

/// `GET path` on a listener of Envoy: (status, body).
pub fn get(port: u16, path: &str) -> Option<(u16, String)> {
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

/// The body of `GET path` on a listener of Envoy.
pub fn body(port: u16, path: &str) -> Option<String> {
    get(port, path).map(|r| r.1)
}

pub fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

/// A Gateway `t/gw` with one HTTP listener per port, translated (its
/// listeners and route configuration names are the translator's).
pub fn gateway(ports: &[u16]) -> GatewayXds {
    let listeners: String = ports
        .iter()
        .enumerate()
        .map(|(i, port)| format!("  - {{name: l{i}, protocol: HTTP, port: {port}}}\n"))
        .collect();
    let gw_yaml = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: c}}\nspec: {{controllerName: portcullis.dev/gateway-controller}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: t}}\nspec:\n  gatewayClassName: c\n  listeners:\n{listeners}"
    );
    let loaded = api::loader::load_str("t.yaml", &gw_yaml);
    let settings = translate::Settings {
        listener_address: "127.0.0.1".into(),
        ..Default::default()
    };
    translate::translate(&loaded.inputs, &settings)
        .gateways
        .remove("t/gw")
        .map(std::sync::Arc::unwrap_or_clone)
        .expect("gateway")
}

/// A route answering every path under `path` with 200 and `text`.
pub fn direct(path: &str, text: &str) -> Route {
    Route {
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
    }
}

/// A route configuration `name` with one catch-all virtual host of `routes`.
pub fn route_configuration(
    name: String,
    routes: Vec<Route>,
) -> translate::xds::encoded::EncodedRouteConfiguration {
    (&RouteConfiguration {
        name,
        virtual_hosts: vec![VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    })
        .into()
}

/// A route Envoy rejects (an RE2 program over its size limit).
pub fn poison() -> Route {
    Route {
        name: "poison".into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::SafeRegex(RegexMatcher {
                regex: "a{1000}".into(),
                ..Default::default()
            })),
            ..Default::default()
        }),
        ..direct("/x", "never")
    }
}

/// Serves `cache` over ADS on a free loopback port, on `rt`; the port is
/// bound before this returns, so a client may connect at once.
pub fn serve(rt: &tokio::runtime::Runtime, cache: &xds::SnapshotCache, recorder: Recorder) -> u16 {
    let listener = StdListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    listener.set_nonblocking(true).expect("non-blocking");
    let server = xds::AdsServer::new(cache.clone(), Arc::new(recorder));
    let _runtime = rt.enter();
    let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
    rt.spawn(async move {
        tonic::transport::Server::builder()
            .add_service(server.into_service())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .expect("serve");
    });
    port
}

/// The real Envoy as node `t/gw` of the ADS server on `xds_port`; killed on
/// drop.
pub struct Envoy {
    child: Child,
    bootstrap: std::path::PathBuf,
}

impl Envoy {
    pub fn start(xds_port: u16, delta: bool) -> Self {
        let mut bootstrap = translate::output::ads_bootstrap("t/gw", "test", "127.0.0.1", xds_port, None);
        if delta {
            bootstrap["dynamic_resources"]["ads_config"]["api_type"] = "DELTA_GRPC".into();
        }
        let path = std::env::temp_dir().join(format!("xds-test-{}-{xds_port}.json", std::process::id()));
        std::fs::write(&path, bootstrap.to_string()).expect("write bootstrap");
        let bin = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new(bin)
            .arg("-c")
            .arg(&path)
            .args(["--disable-hot-restart", "--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start envoy");
        Self {
            child,
            bootstrap: path,
        }
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.bootstrap);
    }
}
