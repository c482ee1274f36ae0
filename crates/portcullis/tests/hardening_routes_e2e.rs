//! Route hardening end to end, with `portcullis serve`, the real Envoy, echo
//! backends on loopback and real HTTP (fixtures `hardening-*.yaml` hold the
//! same cases as goldens):
//! - a guard keeps the precedence of the match it replaces: an exact path
//!   with an invalid header regex is not outranked by another tenant's plain
//!   exact path, an invalid regex path not by another tenant's `/.*`;
//! - `ReplacePrefixMatch` follows every row of the Gateway API
//!   HTTPPathModifier table, for URLRewrite (the path the backend gets) and
//!   RequestRedirect (the `Location` header);
//! - a GRPCRoute regular-expression method match groups service and method:
//!   `pkg.Foo|pkg.Bar` matches the real gRPC call `/pkg.Foo/Get`.

mod common;

use std::time::Duration;

use common::{echo_pod, free_port, gateway, request, service, start, wait_for, work_dir};

const BODY: &str = "invalid route configuration detected and replaced with a direct response.";

/// (status, pod that answered or the body) of one request.
fn who(port: u16, host: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let (status, _, body) = request(port, host, method, path, headers).expect("request");
    let pod = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["pod"].as_str().map(str::to_string))
        .unwrap_or(body);
    (status, pod)
}

#[test]
fn guards_keep_the_precedence_of_the_match_they_replace() {
    let (a, b) = (echo_pod("app", "a-pod"), echo_pod("app", "b-pod"));
    let dir = work_dir("hardening-guards");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    let manifests = format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: tenant-a, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches:
    - path: {{type: Exact, value: /admin}}
      headers: [{{type: RegularExpression, name: x-role, value: "(a)\\1"}}]
    backendRefs: [{{name: a, port: 80}}]
  - matches:
    - path: {{type: Exact, value: /ops}}
      method: POST
      headers:
      - {{name: x-team, value: blue}}
      - {{type: RegularExpression, name: x-role, value: "[z-a]"}}
    backendRefs: [{{name: a, port: 80}}]
  - matches: [{{path: {{type: RegularExpression, value: "/admin/("}}}}]
    backendRefs: [{{name: a, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: tenant-b, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: Exact, value: /admin}}}}, {{path: {{type: Exact, value: /ops}}}}]
    backendRefs: [{{name: b, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: tenant-c, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches:
    - path: {{type: Exact, value: /admin}}
      headers: [{{name: x-role, value: root}}, {{name: x-extra, value: "1"}}]
    backendRefs: [{{name: b, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: tenant-d, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{path: {{type: RegularExpression, value: "/.*"}}}}]
    backendRefs: [{{name: b, port: 80}}]
---
{svc_a}
---
{svc_b}
"#,
        gateway = gateway(gw_port),
        svc_a = service("a", a.port()),
        svc_b = service("b", b.port()),
    );
    std::fs::write(dir.join("manifests/all.yaml"), manifests).expect("write");
    let _serve = start(&dir, xds, admin);
    wait_for("Envoy to serve tenant-d", Duration::from_secs(60), || {
        request(gw_port, "x", "GET", "/other", &[]).is_some_and(|r| r.0 == 200)
    });
    let fenced = (500, BODY.to_string());

    // Tenant-a's original (exact /admin + one header) beats tenant-b's
    // plain exact /admin: its guard must too. The guard is a superset of
    // the original (the invalid header condition dropped), so every
    // request to /admin that tenant-c does not win is fenced.
    assert_eq!(who(gw_port, "x", "GET", "/admin", &[("x-role", "aa")]), fenced);
    assert_eq!(who(gw_port, "x", "GET", "/admin", &[]), fenced);
    // Tenant-c (exact /admin + two headers) outranks tenant-a's original,
    // so it outranks the guard as well.
    assert_eq!(
        who(
            gw_port,
            "x",
            "GET",
            "/admin",
            &[("x-role", "root"), ("x-extra", "1")]
        ),
        (200, "b-pod".to_string())
    );

    // The guard keeps the method and the valid header: what tenant-a's
    // rule would have caught is fenced, what it would not have caught
    // still reaches tenant-b.
    assert_eq!(
        who(
            gw_port,
            "x",
            "POST",
            "/ops",
            &[("x-team", "blue"), ("content-length", "0")]
        ),
        fenced
    );
    assert_eq!(
        who(gw_port, "x", "GET", "/ops", &[("x-team", "blue")]),
        (200, "b-pod".to_string())
    );
    assert_eq!(
        who(
            gw_port,
            "x",
            "POST",
            "/ops",
            &[("x-team", "red"), ("content-length", "0")]
        ),
        (200, "b-pod".to_string())
    );

    // An invalid regex path's guard ranks among regexes by its pattern,
    // ahead of tenant-d's shorter /.*: nothing under /admin/ reaches b.
    assert_eq!(who(gw_port, "x", "GET", "/admin/(", &[]), fenced);
    assert_eq!(who(gw_port, "x", "GET", "/admin/users", &[]), fenced);
    assert_eq!(
        who(gw_port, "x", "GET", "/administrator", &[]),
        (200, "b-pod".to_string())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `(prefix, replacement, [(request path, modified path)])`: every row of
/// the HTTPPathModifier table (apis/v1/httproute_types.go), grouped by
/// prefix and replacement.
/// (request path, modified path).
type Rows = &'static [(&'static str, &'static str)];

const TABLE: &[(&str, &str, Rows)] = &[
    (
        "/foo",
        "/xyz",
        &[("/foo/bar", "/xyz/bar"), ("/foo", "/xyz"), ("/foo/", "/xyz/")],
    ),
    ("/foo", "/xyz/", &[("/foo/bar", "/xyz/bar")]),
    ("/foo/", "/xyz", &[("/foo/bar", "/xyz/bar")]),
    ("/foo/", "/xyz/", &[("/foo/bar", "/xyz/bar")]),
    ("/foo", "", &[("/foo/bar", "/bar"), ("/foo/", "/"), ("/foo", "/")]),
    ("/foo", "/", &[("/foo/", "/"), ("/foo", "/")]),
];

#[test]
fn replace_prefix_match_follows_the_spec_table_for_rewrites_and_redirects() {
    let a = echo_pod("app", "a-pod");
    let dir = work_dir("hardening-prefix");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    let mut manifests = gateway(gw_port);
    for (i, (prefix, replacement, _)) in TABLE.iter().enumerate() {
        manifests.push_str(&format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: rewrite-{i}, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  hostnames: [rewrite-{i}.example]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: "{prefix}"}}}}]
    filters:
    - type: URLRewrite
      urlRewrite: {{path: {{type: ReplacePrefixMatch, replacePrefixMatch: "{replacement}"}}}}
    backendRefs: [{{name: a, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: redirect-{i}, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  hostnames: [redirect-{i}.example]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: "{prefix}"}}}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {{path: {{type: ReplacePrefixMatch, replacePrefixMatch: "{replacement}"}}}}
---
"#
        ));
    }
    manifests.push_str(&service("a", a.port()));
    std::fs::write(dir.join("manifests/all.yaml"), manifests).expect("write");
    let _serve = start(&dir, xds, admin);
    let last = TABLE.len() - 1;
    wait_for("Envoy to serve every route", Duration::from_secs(60), || {
        request(gw_port, &format!("rewrite-{last}.example"), "GET", "/foo", &[]).is_some_and(|r| r.0 == 200)
            && request(gw_port, &format!("redirect-{last}.example"), "GET", "/foo", &[])
                .is_some_and(|r| r.0 == 302)
    });
    let mut wrong = Vec::new();
    for (i, (prefix, replacement, rows)) in TABLE.iter().enumerate() {
        for (path, want) in *rows {
            let (status, _, body) =
                request(gw_port, &format!("rewrite-{i}.example"), "GET", path, &[]).expect("rewrite");
            let got = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["path"].as_str().map(str::to_string));
            if status != 200 || got.as_deref() != Some(*want) {
                wrong.push(format!(
                    "URLRewrite {path} (prefix {prefix:?}, replacement {replacement:?}): {status} {got:?}, want {want}"
                ));
            }
            let (status, head, _) =
                request(gw_port, &format!("redirect-{i}.example"), "GET", path, &[]).expect("redirect");
            let location = head
                .lines()
                .find_map(|l| {
                    l.strip_prefix("location: ")
                        .or_else(|| l.strip_prefix("Location: "))
                })
                .map(str::to_string);
            let want_location = format!("http://redirect-{i}.example:{gw_port}{want}");
            if status != 302 || location.as_deref() != Some(want_location.as_str()) {
                wrong.push(format!(
                    "RequestRedirect {path} (prefix {prefix:?}, replacement {replacement:?}): {status} {location:?}, want {want_location}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The gRPC path (`x-echo-grpc-path`) that answered a unary call to `path`
/// through Envoy on `port`, or the gRPC error.
fn grpc_call(rt: &tokio::runtime::Runtime, port: u16, path: &'static str) -> Result<String, String> {
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
        let resp: tonic::Response<()> = client
            .unary(
                tonic::Request::new(()),
                tonic::codegen::http::uri::PathAndQuery::from_static(path),
                tonic_prost::ProstCodec::default(),
            )
            .await
            .map_err(|e| format!("{:?}", e.code()))?;
        Ok(resp
            .metadata()
            .get("x-echo-grpc-path")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string())
    })
}

#[test]
fn grpcroute_regex_service_and_method_are_grouped() {
    let g = echo_pod("app", "grpc-pod");
    let dir = work_dir("hardening-grpc");
    let gw_port = free_port();
    let (xds, admin) = (free_port(), free_port());
    let manifests = format!(
        r#"{gateway}apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: g, namespace: app}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  rules:
  - matches: [{{method: {{type: RegularExpression, service: "pkg.Foo|pkg.Bar", method: "Get|List"}}}}]
    backendRefs: [{{name: grpc, port: 9000}}]
---
apiVersion: v1
kind: Service
metadata: {{name: grpc, namespace: app}}
spec:
  ports: [{{name: grpc, port: 9000, targetPort: {port}, appProtocol: kubernetes.io/h2c}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: grpc-1, namespace: app, labels: {{kubernetes.io/service-name: grpc}}}}
addressType: IPv4
ports: [{{name: grpc, port: {port}}}]
endpoints: [{{addresses: ["127.0.0.1"]}}]
"#,
        gateway = gateway(gw_port),
        port = g.port(),
    );
    std::fs::write(dir.join("manifests/all.yaml"), manifests).expect("write");
    let _serve = start(&dir, xds, admin);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    wait_for("Envoy to route /pkg.Bar/List", Duration::from_secs(60), || {
        grpc_call(&rt, gw_port, "/pkg.Bar/List").is_ok()
    });
    for path in ["/pkg.Foo/Get", "/pkg.Foo/List", "/pkg.Bar/Get"] {
        assert_eq!(grpc_call(&rt, gw_port, path), Ok(path.to_string()), "{path}");
    }
    // Ungrouped, `/pkg.Foo|pkg.Bar/Get|List` matched `/pkg.Foo` alone;
    // grouped, a path without a method segment (or another service) has
    // no route: Envoy's 404 is gRPC Unimplemented.
    for path in ["/pkg.Foo", "/pkg.Baz/Get", "/pkg.Foo/Delete"] {
        assert_eq!(
            grpc_call(&rt, gw_port, path),
            Err("Unimplemented".to_string()),
            "{path}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
