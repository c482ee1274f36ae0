//! The example extension server as users run it
//! (`cargo run -p extension --example extension_server -- --listen …`):
//! the built example binary, on a unix socket and on TCP, answers the
//! client. `cargo test` builds examples next to the test binaries.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{chain, manager, temp_dir};
use envoy_types::pb::envoy::config::route::v3::Route;
use extension::config::ServiceAddress;
use extension::example::ROUTE_HEADER;
use translate::extension::{Hooks, RouteCall};

fn binary() -> PathBuf {
    // target/debug/deps/example_binary-… → target/debug/examples/extension_server
    let exe = std::env::current_exe().expect("test exe");
    let p = exe
        .parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("examples/extension_server"))
        .expect("target dir");
    assert!(
        p.is_file(),
        "{} not built (cargo test builds examples)",
        p.display()
    );
    p
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(args: &[&str]) -> Killed {
    Killed(
        Command::new(binary())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn example server"),
    )
}

fn header_of(c: &extension::Chain, name: &str) -> Option<String> {
    let r = c.post_route_modify(vec![RouteCall {
        route: Route {
            name: name.into(),
            ..Default::default()
        },
        hostnames: vec![],
        extension_resources: vec![],
        extension_policies: vec![],
    }]);
    let route = r.into_iter().next()?.ok()??;
    let h = route.response_headers_to_add.first()?.header.clone()?;
    (h.key == ROUTE_HEADER).then_some(h.value)
}

/// Calls until the freshly started server answers.
fn eventually(c: &extension::Chain, name: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = header_of(c, name) {
            return v;
        }
        assert!(Instant::now() < deadline, "the example server never answered");
        c.clear_cache();
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn serves_on_a_unix_socket() {
    let dir = temp_dir("example-bin-unix");
    let sock = dir.join("ext.sock");
    let listen = format!("unix:{}", sock.display());
    let _server = start(&["--listen", &listen]);
    let c = chain(vec![manager("example", &ServiceAddress::Unix { path: sock })]);
    assert_eq!(eventually(&c, "route-a"), "route-a");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serves_on_tcp_with_the_sleep_option() {
    let port = common::free_port();
    let listen = format!("tcp:127.0.0.1:{port}");
    let _server = start(&["--listen", &listen, "--sleep-route", "slow", "--sleep-ms", "3000"]);
    let address = ServiceAddress::Ip {
        address: "127.0.0.1".parse().expect("ip"),
        port,
    };
    let mut m = manager("example", &address);
    m.timeout = Duration::from_millis(400);
    let c = chain(vec![m]);
    assert_eq!(eventually(&c, "fast"), "fast");
    assert_eq!(header_of(&c, "slow-route"), None, "past the deadline");
}
