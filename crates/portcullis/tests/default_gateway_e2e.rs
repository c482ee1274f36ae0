//! Default Gateways end to end, with `portcullis serve`, the real Envoys it
//! runs and echo backends: a defaulted HTTPRoute and a defaulted GRPCRoute
//! (a real gRPC call) served through the default Gateway; a second default
//! Gateway added serves them too; the first deleted while traffic flows on
//! the second, with no failed request; a route from a namespace the default
//! Gateway does not allow is refused with the reason in status.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{GATEWAY_CLASS, echo_pod, free_port, http, start, wait_for};

mod pb {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct EchoRequest {}
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct EchoResponse {
        #[prost(message, optional, tag = "1")]
        pub assertions: Option<Assertions>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Assertions {
        #[prost(string, tag = "1")]
        pub fully_qualified_method: String,
        #[prost(message, optional, tag = "4")]
        pub context: Option<Context>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Context {
        #[prost(string, tag = "1")]
        pub namespace: String,
        #[prost(string, tag = "4")]
        pub pod: String,
    }
}

const ECHO_METHOD: &str = "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo";

/// The pod that answered a gRPC Echo call through Envoy on `port`.
fn grpc_echo(rt: &tokio::runtime::Runtime, port: u16) -> Result<String, String> {
    rt.block_on(async {
        let channel = tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{port}"))
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5))
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        let mut client = tonic::client::Grpc::new(channel);
        client.ready().await.map_err(|e| e.to_string())?;
        let resp: tonic::Response<pb::EchoResponse> = client
            .unary(
                tonic::Request::new(pb::EchoRequest {}),
                tonic::codegen::http::uri::PathAndQuery::from_static(ECHO_METHOD),
                tonic_prost::ProstCodec::default(),
            )
            .await
            .map_err(|e| e.to_string())?;
        let a = resp.into_inner().assertions.unwrap_or_default();
        Ok(a.context.unwrap_or_default().pod)
    })
}

fn gateway(name: &str, port: u16, from: &str) -> String {
    let allowed = match from {
        "Selector" => "{namespaces: {from: Selector, selector: {matchLabels: {tier: trusted}}}}".to_string(),
        other => format!("{{namespaces: {{from: {other}}}}}"),
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: infra}}\nspec:\n  gatewayClassName: portcullis\n  defaultScope: All\n  listeners:\n  - {{name: http, protocol: HTTP, port: {port}, allowedRoutes: {allowed}}}\n"
    )
}

fn routes(web: u16, grpc: u16) -> String {
    format!(
        r#"{GATEWAY_CLASS}apiVersion: v1
kind: Namespace
metadata: {{name: app, labels: {{tier: trusted}}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: other}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: app}}
spec:
  useDefaultGateways: All
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /web}}}}]
    backendRefs: [{{name: web, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: echo, namespace: app}}
spec:
  useDefaultGateways: All
  rules:
  - matches: [{{method: {{service: gateway_api_conformance.echo_basic.grpcecho.GrpcEcho}}}}]
    backendRefs: [{{name: grpc, port: 9000}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: untrusted, namespace: other}}
spec:
  useDefaultGateways: All
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /other}}}}]
    backendRefs: [{{name: web, port: 80}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: app}}
spec:
  ports: [{{name: http, port: 80, targetPort: {web}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: web-1, namespace: app, labels: {{kubernetes.io/service-name: web}}}}
addressType: IPv4
ports: [{{name: http, port: {web}}}]
endpoints: [{{addresses: ["127.0.0.1"]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: grpc, namespace: app}}
spec:
  ports: [{{name: grpc, port: 9000, targetPort: {grpc}, appProtocol: kubernetes.io/h2c}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: grpc-1, namespace: app, labels: {{kubernetes.io/service-name: grpc}}}}
addressType: IPv4
ports: [{{name: grpc, port: {grpc}, appProtocol: kubernetes.io/h2c}}]
endpoints: [{{addresses: ["127.0.0.1"]}}]
"#
    )
}

/// (status, reason) of the Accepted condition of `ns/name`'s parent entry
/// for Gateway `gw`, from /api/status.
fn accepted(admin: u16, kind: &str, ns: &str, name: &str, gw: &str) -> Option<(String, String)> {
    let (_, _, body) = http(admin, "admin", "/api/status")?;
    let doc: serde_json::Value = serde_json::from_str(&body).ok()?;
    let route = doc["status"]
        .as_array()?
        .iter()
        .find(|s| s["kind"] == kind && s["metadata"]["namespace"] == ns && s["metadata"]["name"] == name)?;
    let parent = route["status"]["parents"]
        .as_array()?
        .iter()
        .find(|p| p["parentRef"]["name"] == gw)?;
    let c = parent["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Accepted")?;
    Some((
        c["reason"].as_str()?.to_string(),
        c["message"].as_str()?.to_string(),
    ))
}

#[test]
fn default_gateways_serve_http_and_grpc_and_swap_without_failures() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let web = echo_pod("app", "web-pod");
    let grpc = echo_pod("app", "grpc-pod");
    let dir = std::env::temp_dir().join(format!("portcullis-dg-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let m = dir.join("manifests");
    std::fs::create_dir_all(&m).expect("mkdir");
    let (port_a, port_b) = (free_port(), free_port());
    let (xds, admin) = (free_port(), free_port());
    std::fs::write(m.join("routes.yaml"), routes(web.port(), grpc.port())).expect("write");
    std::fs::write(m.join("gw-a.yaml"), gateway("gw-a", port_a, "Selector")).expect("write");
    let _serve = start(&dir, xds, admin);

    // Served through the default Gateway: HTTP and a real gRPC call.
    wait_for("the defaulted HTTPRoute on gw-a", Duration::from_secs(60), || {
        http(port_a, "x", "/web").is_some_and(|r| r.0 == 200 && r.2.contains("web-pod"))
    });
    wait_for("the defaulted GRPCRoute on gw-a", Duration::from_secs(30), || {
        grpc_echo(&rt, port_a).is_ok_and(|pod| pod == "grpc-pod")
    });
    assert_eq!(
        accepted(admin, "HTTPRoute", "app", "web", "gw-a").map(|a| a.1),
        Some("Route is bound to default Gateway".into())
    );
    // A namespace gw-a does not allow: refused, with the reason, not served.
    assert_eq!(
        accepted(admin, "HTTPRoute", "other", "untrusted", "gw-a").map(|a| a.0),
        Some("NotAllowedByListeners".into())
    );
    assert_eq!(http(port_a, "x", "/other").map(|r| r.0), Some(404));

    // A second default Gateway: both serve.
    std::fs::write(m.join("gw-b.yaml"), gateway("gw-b", port_b, "All")).expect("write");
    wait_for(
        "the defaulted routes on gw-b too",
        Duration::from_secs(60),
        || {
            http(port_b, "x", "/web").is_some_and(|r| r.0 == 200)
                && grpc_echo(&rt, port_b).is_ok_and(|pod| pod == "grpc-pod")
        },
    );
    assert_eq!(http(port_a, "x", "/web").map(|r| r.0), Some(200));

    // Traffic on gw-b while gw-a is deleted.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let traffic = {
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match http(port_b, "x", "/web") {
                    Some((200, _, _)) => ok.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_file(m.join("gw-a.yaml")).expect("delete gw-a");
    wait_for("gw-a to stop claiming", Duration::from_secs(30), || {
        accepted(admin, "HTTPRoute", "app", "web", "gw-a").is_none()
            && accepted(admin, "HTTPRoute", "app", "web", "gw-b").is_some()
    });
    wait_for("gw-a's Envoy to stop serving", Duration::from_secs(30), || {
        http(port_a, "x", "/web").is_none_or(|r| r.0 != 200)
    });
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    traffic.join().expect("traffic");
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    assert!(ok > 20, "traffic flowed: {ok}");
    assert_eq!(
        failed,
        0,
        "{failed} failed requests on gw-b out of {}",
        ok + failed
    );
    assert!(grpc_echo(&rt, port_b).is_ok_and(|pod| pod == "grpc-pod"));
    let _ = std::fs::remove_dir_all(&dir);
}
