//! Shared manifests and helpers for the loader tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Valid manifests covering every kind the loader knows, with most fields
/// in use. Every one must load without any diagnostic.
pub const VALID_MANIFESTS: &[(&str, &str)] = &[
    (
        "gatewayclass.yaml",
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: portcullis
  labels:
    app.kubernetes.io/name: portcullis
spec:
  controllerName: portcullis.dev/gateway-controller
  description: "The portcullis gateway class"
"#,
    ),
    (
        "gateway.yaml",
        r#"# A Gateway with two listeners
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: edge
  namespace: infra
  annotations:
    example.com/owner: platform
spec:
  gatewayClassName: portcullis
  defaultScope: All
  listeners:
  - name: http
    protocol: HTTP
    port: 8080
    hostname: "*.example.com"
    allowedRoutes:
      namespaces:
        from: Selector
        selector:
          matchLabels:
            shared-gateway-access: "true"
      kinds:
      - group: gateway.networking.k8s.io
        kind: HTTPRoute
  - name: https
    protocol: HTTPS
    port: 8443
    tls:
      mode: Terminate
      certificateRefs:
      - kind: Secret
        name: edge-cert
  addresses:
  - type: IPAddress
    value: 127.0.0.1
"#,
    ),
    (
        "routes.yaml",
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: shop
  namespace: team-a
spec:
  parentRefs:
  - name: edge
    namespace: infra
    sectionName: http
  useDefaultGateways: All
  hostnames: ["shop.example.com", "*.shop.example.com"]
  rules:
  - name: api
    matches:
    - path:
        type: PathPrefix
        value: /api
      headers:
      - type: RegularExpression
        name: x-version
        value: "v[0-9]+"
      queryParams:
      - name: debug
        value: "1"
      method: GET
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set:
        - name: x-team
          value: a
        remove: ["x-internal"]
    - type: URLRewrite
      urlRewrite:
        path:
          type: ReplacePrefixMatch
          replacePrefixMatch: /
    backendRefs:
    - name: shop-api
      port: 8080
      weight: 90
    - name: shop-api-canary
      port: 8080
      weight: 10
    timeouts:
      request: 10s
      backendRequest: 2s
  - matches:
    - path:
        type: Exact
        value: /old
    filters:
    - type: RequestRedirect
      requestRedirect:
        scheme: https
        statusCode: 301
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata:
  name: greeter
  namespace: team-a
spec:
  parentRefs:
  - name: edge
    namespace: infra
  rules:
  - matches:
    - method:
        type: Exact
        service: helloworld.Greeter
        method: SayHello
      headers:
      - name: x-env
        value: prod
    backendRefs:
    - name: greeter
      port: 50051
"#,
    ),
    (
        "grant.yaml",
        r#"apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata:
  name: allow-team-a
  namespace: infra
spec:
  from:
  - group: gateway.networking.k8s.io
    kind: HTTPRoute
    namespace: team-a
  to:
  - group: ""
    kind: Service
"#,
    ),
    (
        "backends.yaml",
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels:
    shared-gateway-access: "true"
---
apiVersion: v1
kind: Service
metadata:
  name: shop-api
  namespace: team-a
spec:
  selector:
    app: shop-api
  ports:
  - name: http
    port: 8080
    targetPort: 18080
    protocol: TCP
    appProtocol: http
  - name: admin
    port: 9090
    targetPort: admin
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: shop-api-1
  namespace: team-a
  labels:
    kubernetes.io/service-name: shop-api
addressType: IPv4
ports:
- name: http
  port: 18080
  protocol: TCP
endpoints:
- addresses: ["127.0.0.1"]
  conditions:
    ready: true
    serving: true
    terminating: false
- addresses: ["127.0.0.2"]
  conditions:
    ready: false
"#,
    ),
    (
        "secret.yaml",
        r#"apiVersion: v1
kind: Secret
metadata:
  name: edge-cert
  namespace: infra
type: kubernetes.io/tls
data:
  tls.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
stringData:
  tls.key: |
    -----BEGIN PRIVATE KEY-----
    not really a key
    -----END PRIVATE KEY-----
"#,
    ),
    (
        "list.json",
        r#"{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {
      "apiVersion": "v1",
      "kind": "Service",
      "metadata": {"name": "greeter", "namespace": "team-a"},
      "spec": {"ports": [{"port": 50051, "targetPort": 50051}]}
    },
    {
      "apiVersion": "gateway.networking.k8s.io/v1",
      "kind": "HTTPRoute",
      "metadata": {"name": "from-json"},
      "spec": {"rules": [{"backendRefs": [{"name": "greeter", "port": 50051}]}]}
    }
  ]
}
"#,
    ),
];

/// A fresh empty directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("portcullis-api-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` to `rel` (creating parent directories).
    pub fn write(&self, rel: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent dir");
        }
        std::fs::write(&path, text).expect("write file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
