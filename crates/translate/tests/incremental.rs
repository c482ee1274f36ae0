//! Property test of incremental translation (ARCHITECTURE.md §7): random
//! edit sequences — add, modify and delete of HTTPRoutes, GRPCRoutes,
//! Gateways, ListenerSets, TrafficPolicies, Services, EndpointSlices (with their Service
//! or alone), Secrets, ReferenceGrants and GatewayExtensions (ext_auth, a
//! Service looked up outside the routes), valid and invalid — applied one
//! at a time;
//! after every step the incremental translator's output must equal a full
//! translation of the same inputs: every encoded xDS byte, every status,
//! every diagnostic, every report.
//!
//! Each object is its own file (as `serve` loads a directory), routes
//! excepted: they share three files, so an edit also moves the source lines
//! of the routes after it (their diagnostics must follow). `PORTCULLIS_INCREMENTAL_STEPS` sets the steps per seed (default
//! 100), `PORTCULLIS_INCREMENTAL_SEED` a single seed to replay.

use std::collections::BTreeMap;
use std::sync::Arc;

use translate::Settings;
use translate::incremental::{Full, Translator};

#[path = "support/random_edits.rs"]
mod random_edits;
use random_edits::Rng;
use random_edits::assert_same_output;
use random_edits::tls_pair;

const NAMESPACES: [&str; 2] = ["ns-0", "ns-1"];

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A second certificate and key (generated), so a Secret can change while
/// staying valid.
fn generated_pair() -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["*.example.com".to_string(), "example.com".to_string()])
        .expect("params");
    let cert = params.self_signed(&key).expect("certificate");
    (
        base64(cert.pem().as_bytes()),
        base64(key.serialize_pem().as_bytes()),
    )
}

/// The objects of the world, one manifest (file) each, by file name.
struct World {
    files: BTreeMap<String, String>,
    tls: (String, String),
    other: (String, String),
}

impl World {
    fn new(rng: &mut Rng) -> Self {
        let mut w = World {
            files: BTreeMap::new(),
            tls: tls_pair(),
            other: generated_pair(),
        };
        w.files.insert(
            "class.yaml".into(),
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: portcullis\nspec:\n  controllerName: portcullis.dev/gateway-controller\n".into(),
        );
        for g in 0..2 {
            w.gateway(rng, g);
        }
        for l in 0..2 {
            w.listener_set(rng, l);
        }
        for s in 0..4 {
            w.service(rng, s);
        }
        for s in 0..3 {
            w.secret(rng, s);
        }
        for e in 0..2 {
            w.extension(rng, e);
        }
        for r in 0..12 {
            w.route(rng, r);
        }
        for n in 0..3 {
            w.namespace(rng, n);
        }
        // Standing policies, which most edits leave as they are.
        for p in 0..3 {
            w.policy(rng, p);
        }
        w
    }

    /// Namespace `ns-0`, `ns-1` or `infra` (the routes', the
    /// ListenerSets'), labelled for the Gateways' selectors now and then;
    /// an annotation, which no selector reads, changes at random.
    fn namespace(&mut self, rng: &mut Rng, i: usize) {
        let name = ["ns-0", "ns-1", "infra"][i];
        let labels = match rng.below(4) {
            0 => String::new(),
            1 => "  labels: {team: a}\n".into(),
            2 => "  labels: {team: b}\n".into(),
            _ => "  labels: {team: a, tier: gold}\n".into(),
        };
        self.files.insert(
            format!("namespace-{i}.yaml"),
            format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n{labels}  annotations: {{note: \"{}\"}}\n",
                rng.below(3)
            ),
        );
    }

    /// Loads the world as `serve` would a directory: one file per object,
    /// except routes, three files of several documents each (an edit to
    /// one route moves the lines of the routes after it in its file).
    fn load(&self) -> api::Inputs {
        let mut files: BTreeMap<String, String> = BTreeMap::new();
        for (name, text) in &self.files {
            let file = match name.strip_prefix("route-").and_then(|r| r.strip_suffix(".yaml")) {
                Some(r) => format!("routes-{}.yaml", r.parse::<usize>().unwrap_or(0) % 3),
                None => name.clone(),
            };
            let f = files.entry(file).or_default();
            if !f.is_empty() {
                f.push_str("---\n");
            }
            f.push_str(text);
        }
        let parts = files.iter().map(|(f, t)| api::loader::load_str(f, t));
        api::loader::merge(parts).inputs
    }

    fn gateway(&mut self, rng: &mut Rng, g: usize) {
        let mut s = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: gw-{g}\n  namespace: infra\nspec:\n  gatewayClassName: portcullis\n"
        );
        // Most admit ListenerSets, some by their namespace's labels.
        match rng.below(10) {
            0..5 => s.push_str("  allowedListeners: {namespaces: {from: All}}\n"),
            5..7 => s.push_str(
                "  allowedListeners: {namespaces: {from: Selector, selector: {matchLabels: {team: a}}}}\n",
            ),
            _ => {}
        }
        s.push_str("  listeners:\n");
        for l in 0..1 + rng.below(3) {
            let hostname = match rng.below(5) {
                0 => String::new(),
                // Invalid: a listener Envoy cannot take.
                1 if rng.chance(30) => "    hostname: \"bad host\"\n".into(),
                _ => format!("    hostname: \"*.l{l}.example.com\"\n"),
            };
            // Now and then routes are admitted by their namespace's labels.
            let from = match rng.below(10) {
                0..6 => "All",
                6 => "Same",
                7 | 8 => "Selector\n        selector: {matchLabels: {team: a}}",
                _ => {
                    "Selector\n        selector: {matchExpressions: [{key: tier, operator: In, values: [gold]}]}"
                }
            };
            if rng.chance(25) {
                // tls-2 is never named: its edits rebuild nothing.
                let secret = ["tls-0", "tls-0", "tls-0", "tls-1", "tls-missing"][rng.below(5)];
                s.push_str(&format!(
                    "  - name: l{l}\n    protocol: HTTPS\n    port: 443\n{hostname}    tls:\n      certificateRefs: [{{name: {secret}}}]\n    allowedRoutes:\n      namespaces:\n        from: {from}\n"
                ));
            } else {
                s.push_str(&format!(
                    "  - name: l{l}\n    protocol: HTTP\n    port: {}\n{hostname}    allowedRoutes:\n      namespaces:\n        from: {from}\n",
                    80 + rng.below(2)
                ));
            }
        }
        self.files.insert(format!("gateway-{g}.yaml"), s);
    }

    /// ListenerSet `ls-{i}`, on one of the Gateways (gw-2 is added and
    /// deleted by edits): its listeners merge into the Gateway's, one of
    /// them now and then on the Gateway's own port and hostname (a
    /// conflict the Gateway's listener wins).
    fn listener_set(&mut self, rng: &mut Rng, i: usize) {
        let mut s = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\nmetadata:\n  name: ls-{i}\n  namespace: infra\nspec:\n  parentRef: {{name: gw-{}}}\n  listeners:\n",
            rng.below(3)
        );
        for l in 0..1 + rng.below(2) {
            let hostname = match rng.below(4) {
                0 => format!("*.l{l}.example.com"),
                _ => format!("*.s{i}.example.com"),
            };
            s.push_str(&format!(
                "  - {{name: s{l}, protocol: HTTP, port: {}, hostname: \"{hostname}\", allowedRoutes: {{namespaces: {{from: All}}}}}}\n",
                80 + rng.below(2)
            ));
        }
        self.files.insert(format!("listenerset-{i}.yaml"), s);
    }

    /// A Service and its EndpointSlices (each its own file).
    fn service(&mut self, rng: &mut Rng, i: usize) {
        self.service_object(rng, i);
        self.endpoints(rng, i);
    }

    /// Service `i` alone.
    fn service_object(&mut self, rng: &mut Rng, i: usize) {
        let ns = NAMESPACES[i % 2];
        let port = if rng.chance(85) { 80 } else { 81 };
        // Now and then a port the slices do not name (their endpoints then
        // taken at the target port: the same cluster, other endpoints).
        let (port_name, target) = if rng.chance(15) {
            ("web", 8081)
        } else {
            ("http", 8080)
        };
        // Now and then HTTP/2 to the backend (another cluster).
        let protocol = if rng.chance(15) {
            "    appProtocol: kubernetes.io/h2c\n"
        } else {
            ""
        };
        self.files.insert(
            format!("service-{i}.yaml"),
            format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{i}\n  namespace: {ns}\nspec:\n  ports:\n  - name: {port_name}\n    port: {port}\n    targetPort: {target}\n{protocol}"
            ),
        );
    }

    /// Service `i`'s EndpointSlices alone (as pods come and go): one or
    /// two slices, one or two endpoints each, some not ready, some
    /// refused by the endpoint guard.
    fn endpoints(&mut self, rng: &mut Rng, i: usize) {
        let ns = NAMESPACES[i % 2];
        // Now and then labelled for another Service of its namespace (a
        // slice that moves from one Service to another).
        let service = if rng.chance(10) { (i + 2) % 5 } else { i };
        let mut text = String::new();
        for slice in 0..1 + rng.below(2) {
            let mut endpoints = String::new();
            for _ in 0..1 + rng.below(2) {
                let address = match rng.below(6) {
                    // Refused by the endpoint guard (link-local).
                    0 => "169.254.0.1".to_string(),
                    _ => format!("127.0.0.{}", 1 + rng.below(3)),
                };
                let ready = if rng.chance(15) { "false" } else { "true" };
                endpoints.push_str(&format!(
                    "- addresses: [\"{address}\"]\n  conditions:\n    ready: {ready}\n"
                ));
            }
            if !text.is_empty() {
                text.push_str("---\n");
            }
            text.push_str(&format!(
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-{i}-{slice}\n  namespace: {ns}\n  labels:\n    kubernetes.io/service-name: svc-{service}\naddressType: IPv4\nports:\n- name: http\n  port: 8080\nendpoints:\n{endpoints}"
            ));
        }
        self.files.insert(format!("endpoints-{i}.yaml"), text);
    }

    fn secret(&mut self, rng: &mut Rng, i: usize) {
        let (crt, key) = match rng.below(5) {
            0 | 1 => self.tls.clone(),
            2 => self.other.clone(),
            // Invalid: a key that is not the certificate's.
            3 => (self.tls.0.clone(), self.other.1.clone()),
            // Invalid: not PEM.
            _ => ("bm90IGEgY2VydA==".to_string(), "bm90IGEga2V5".to_string()),
        };
        self.files.insert(
            format!("secret-{i}.yaml"),
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls-{i}\n  namespace: infra\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {crt}\n  tls.key: {key}\n"
            ),
        );
    }

    fn grant(&mut self, rng: &mut Rng, i: usize) {
        let (from, to) = if rng.chance(50) {
            ("ns-0", "ns-1")
        } else {
            ("ns-1", "ns-0")
        };
        self.files.insert(
            format!("grant-{i}.yaml"),
            format!(
                "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata:\n  name: grant-{i}\n  namespace: {to}\nspec:\n  from:\n  - {{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: {from}}}\n  to:\n  - {{group: \"\", kind: Service}}\n"
            ),
        );
    }

    fn policy(&mut self, rng: &mut Rng, i: usize) {
        let ns = NAMESPACES[rng.below(2)];
        let target = match rng.below(5) {
            4 => "SELECTOR".to_string(),
            0 => format!(
                "{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: route-{}}}",
                rng.below(14)
            ),
            // Rule targets on the first few routes (which `head` edits
            // often).
            1 => format!(
                "{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: route-{}, sectionName: named}}",
                rng.below(4)
            ),
            2 => format!(
                "{{group: gateway.networking.k8s.io, kind: Gateway, name: gw-{}}}",
                rng.below(2)
            ),
            _ => format!(
                "{{group: gateway.networking.k8s.io, kind: Gateway, name: gw-{}, sectionName: l{}}}",
                rng.below(2),
                rng.below(3)
            ),
        };
        // Gateway targets live in the Gateway's namespace.
        let ns = if target.contains("kind: Gateway") && rng.chance(80) {
            "infra"
        } else {
            ns
        };
        let targets = if target == "SELECTOR" {
            let kind = if rng.chance(80) { "HTTPRoute" } else { "GRPCRoute" };
            format!(
                "  targetSelectors: [{{group: gateway.networking.k8s.io, kind: {kind}, matchLabels: {{tier: a}}}}]\n"
            )
        } else {
            format!("  targetRefs: [{target}]\n")
        };
        let body = match rng.below(5) {
            0 => "  headerModifiers: {response: {set: [{name: x-policy, value: v1}]}}\n".to_string(),
            // ext_auth through a GatewayExtension (which looks a Service
            // up outside any route).
            4 => format!("  extAuth: {{extensionRef: {{name: auth-{}}}}}\n", rng.below(2)),
            1 => "  cors: {allowOrigins: [\"https://app.example.com\"]}\n".to_string(),
            2 => "  localRateLimit: {tokenBucket: {maxTokens: 10, tokensPerFill: 10, fillInterval: 1s}}\n"
                .to_string(),
            // Invalid: a header name Envoy refuses.
            _ => "  headerModifiers: {request: {set: [{name: \"bad header\", value: v}]}}\n".to_string(),
        };
        self.files.insert(
            format!("policy-{i}.yaml"),
            format!(
                "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata:\n  name: policy-{i}\n  namespace: {ns}\nspec:\n{targets}{body}"
            ),
        );
    }

    /// A GatewayExtension for ext_auth, its backend one of the Services
    /// (or a missing one).
    fn extension(&mut self, rng: &mut Rng, i: usize) {
        let ns = NAMESPACES[i % 2];
        let svc = rng.below(5);
        self.files.insert(
            format!("extension-{i}.yaml"),
            format!(
                "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: GatewayExtension\nmetadata:\n  name: auth-{i}\n  namespace: {ns}\nspec:\n  type: ExtAuth\n  extAuth:\n    httpService:\n      backendRef: {{name: svc-{svc}, port: 80}}\n"
            ),
        );
    }

    fn route(&mut self, rng: &mut Rng, r: usize) {
        let ns = NAMESPACES[r % 2];
        let grpc = r % 7 == 6;
        let mut parents = String::new();
        for _ in 0..1 + rng.below(2) {
            let g = rng.below(3); // gw-2 only once an edit adds it.
            if rng.chance(15) {
                parents.push_str(&format!(
                    "  - {{kind: ListenerSet, name: ls-{}, namespace: infra}}\n",
                    rng.below(3)
                ));
            } else if rng.chance(40) {
                parents.push_str(&format!(
                    "  - {{name: gw-{g}, namespace: infra, sectionName: l{}}}\n",
                    rng.below(3)
                ));
            } else {
                parents.push_str(&format!("  - {{name: gw-{g}, namespace: infra}}\n"));
            }
        }
        let host = match rng.below(4) {
            0 => String::new(),
            1 => format!(
                "  hostnames: [\"app-{}.l{}.example.com\"]\n",
                rng.below(4),
                rng.below(3)
            ),
            2 => "  hostnames: [\"shared.example.com\"]\n".to_string(),
            _ => format!("  hostnames: [\"r{r}.l0.example.com\", \"*.example.com\"]\n"),
        };
        let mut rules = String::new();
        for k in 0..1 + rng.below(3) {
            let svc = rng.below(5); // svc-4 never exists.
            let svc_ns = if rng.chance(20) {
                NAMESPACES[(r + 1) % 2]
            } else {
                ns
            };
            let name = if k == 0 && rng.chance(50) {
                "    name: named\n"
            } else {
                ""
            };
            let backend = format!(
                "    backendRefs: [{{name: svc-{svc}, namespace: {svc_ns}, port: {}}}]\n",
                if rng.chance(90) { 80 } else { 81 }
            );
            if grpc {
                let method = if rng.chance(85) { "Get" } else { "bad method!" };
                rules.push_str(&format!(
                    "  - matches:\n    - method: {{service: pkg.S{k}, method: {method}}}\n{name}{backend}"
                ));
                continue;
            }
            let matches = match rng.below(5) {
                0 => format!("    - path: {{type: PathPrefix, value: /p{k}}}\n"),
                1 => format!("    - path: {{type: Exact, value: /e{}}}\n", rng.below(3)),
                // Invalid: a regex RE2 refuses.
                2 if rng.chance(40) => "    - path: {type: RegularExpression, value: \"/(a\"}\n".to_string(),
                2 => "    - path: {type: RegularExpression, value: \"/r[0-9]+\"}\n".to_string(),
                3 => format!(
                    "    - path: {{type: PathPrefix, value: /h}}\n      headers: [{{name: x-t, value: t{}}}]\n",
                    rng.below(3)
                ),
                _ => "    - path: {type: PathPrefix, value: /}\n".to_string(),
            };
            let filters = match rng.below(6) {
                0 => "    filters:\n    - type: RequestHeaderModifier\n      requestHeaderModifier: {set: [{name: x-r, value: v}]}\n".to_string(),
                // Invalid: a header name Envoy refuses.
                1 => "    filters:\n    - type: RequestHeaderModifier\n      requestHeaderModifier: {set: [{name: \"bad header\", value: v}]}\n".to_string(),
                _ => String::new(),
            };
            rules.push_str(&format!("  - matches:\n{matches}{name}{filters}{backend}"));
        }
        // The precedence tie-break between routes is their age: a few
        // shared creation times (and none) make it decide often.
        let created = match rng.below(4) {
            0 => String::new(),
            t => format!("  creationTimestamp: \"2026-01-0{t}T00:00:00Z\"\n"),
        };
        // Labels, for the policies' targetSelectors (a relabel changes the
        // route's head: what a reused attachment must not miss).
        let labels = match rng.below(3) {
            0 => "",
            1 => "  labels: {tier: a}\n",
            _ => "  labels: {tier: b}\n",
        };
        let (api_version, kind) = if grpc {
            ("gateway.networking.k8s.io/v1", "GRPCRoute")
        } else {
            ("gateway.networking.k8s.io/v1", "HTTPRoute")
        };
        self.files.insert(
            format!("route-{r}.yaml"),
            format!(
                "apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: route-{r}\n  namespace: {ns}\n{labels}{created}spec:\n  parentRefs:\n{parents}{host}  rules:\n{rules}"
            ),
        );
    }

    /// The names of the route files.
    fn route_files(&self) -> Vec<String> {
        self.files
            .keys()
            .filter(|n| n.starts_with("route-"))
            .cloned()
            .collect()
    }

    /// A small edit of one route: one path value's first letter changed,
    /// so that its Envoy routes keep their length and count (a memo
    /// comparing anything less than the bytes' identity is caught).
    fn tweak(&mut self, rng: &mut Rng) -> Option<String> {
        let names = self.route_files();
        let name = names.get(rng.below(names.len()))?.clone();
        let text = self.files.get(&name)?;
        let at: Vec<usize> = text
            .match_indices("value: /")
            .map(|(i, m)| i + m.len())
            .filter(|&i| text.as_bytes().get(i).is_some_and(u8::is_ascii_lowercase))
            .collect();
        let i = *at.get(rng.below(at.len()))?;
        let letter = (b'a' + rng.below(26) as u8) as char;
        let mut text = text.clone();
        text.replace_range(i..i + 1, &letter.to_string());
        self.files.insert(name.clone(), text);
        Some(format!("tweak {name} at {i} to {letter}"))
    }

    /// An edit of one route's head only, what policies attach by: its
    /// labels (`tier: a` selected, `tier: b` not) or its first rule's name
    /// (`named` targeted by sectionName, `other` not). Last call's
    /// attachment must not be reused after it.
    fn head(&mut self, rng: &mut Rng) -> Option<String> {
        let names = self.route_files();
        let name = if rng.chance(50) {
            format!("route-{}.yaml", rng.below(4))
        } else {
            names.get(rng.below(names.len()))?.clone()
        };
        let text = self.files.get(&name)?.clone();
        let swaps: [(&str, &str); 4] = [
            ("  labels: {tier: a}\n", "  labels: {tier: b}\n"),
            ("  labels: {tier: b}\n", "  labels: {tier: a}\n"),
            ("    name: named\n", "    name: other\n"),
            ("    name: other\n", "    name: named\n"),
        ];
        let (from, to) = swaps
            .into_iter()
            .filter(|(from, _)| text.contains(from))
            .nth(rng.below(2))?;
        self.files.insert(name.clone(), text.replacen(from, to, 1));
        Some(format!("head of {name}: {} -> {}", from.trim(), to.trim()))
    }

    /// Two routes swap their names (each file keeps its place): the same
    /// number of routes and the same names, in other positions of the
    /// inputs and (when their namespaces differ) under other keys — what a
    /// memo of the route order must not take for the previous order.
    fn swap_names(&mut self, rng: &mut Rng) -> Option<String> {
        let names = self.route_files();
        let a = names.get(rng.below(names.len()))?.clone();
        let b = names.get(rng.below(names.len()))?.clone();
        let name_of = |text: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix("  name: "))
                .map(str::to_string)
        };
        let (ta, tb) = (self.files.get(&a)?.clone(), self.files.get(&b)?.clone());
        let (na, nb) = (name_of(&ta)?, name_of(&tb)?);
        let rename = |text: &str, from: &str, to: &str| {
            text.replacen(&format!("  name: {from}\n"), &format!("  name: {to}\n"), 1)
        };
        self.files.insert(a.clone(), rename(&ta, &na, &nb));
        self.files.insert(b.clone(), rename(&tb, &nb, &na));
        Some(format!("swap the names of {a} ({na}) and {b} ({nb})"))
    }

    /// One random edit; returns what it did (for the failure message).
    fn edit(&mut self, rng: &mut Rng) -> String {
        // Routes most often, as in real use.
        let kind = [
            "route",
            "route",
            "route",
            "route",
            "tweak",
            "tweak",
            "tweak",
            "swap",
            "gateway",
            "listenerset",
            "policy",
            "service",
            "endpoints",
            "endpoints",
            "secret",
            "grant",
            "extension",
            "namespace",
            "head",
        ][rng.below(19)];
        if kind == "head"
            && let Some(what) = self.head(rng)
        {
            return what;
        }
        if kind == "tweak"
            && let Some(what) = self.tweak(rng)
        {
            return what;
        }
        if kind == "swap"
            && let Some(what) = self.swap_names(rng)
        {
            return what;
        }
        let (max, file) = match kind {
            "route" | "tweak" | "swap" | "head" => (14, "route"),
            "gateway" => (3, "gateway"),
            "listenerset" => (3, "listenerset"),
            "policy" => (4, "policy"),
            "service" => (5, "service"),
            "endpoints" => (5, "endpoints"),
            "secret" => (3, "secret"),
            "extension" => (2, "extension"),
            "namespace" => (3, "namespace"),
            _ => (2, "grant"),
        };
        let i = rng.below(max);
        let name = format!("{file}-{i}.yaml");
        if self.files.contains_key(&name) && rng.chance(20) {
            self.files.remove(&name);
            return format!("delete {name}");
        }
        let verb = if self.files.contains_key(&name) {
            "modify"
        } else {
            "add"
        };
        match kind {
            "route" | "tweak" | "swap" | "head" => self.route(rng, i),
            "gateway" => self.gateway(rng, i),
            "listenerset" => self.listener_set(rng, i),
            "policy" => self.policy(rng, i),
            // Half the time the Service alone, its slices unchanged.
            "service" if rng.chance(50) => self.service_object(rng, i),
            "service" => self.service(rng, i),
            "endpoints" => self.endpoints(rng, i),
            "secret" => self.secret(rng, i),
            "extension" => self.extension(rng, i),
            "namespace" => self.namespace(rng, i),
            _ => self.grant(rng, i),
        }
        format!("{verb} {name}")
    }
}

fn run(seed: u64, steps: usize, totals: &mut [usize; 20]) {
    let mut rng = Rng(seed);
    let mut world = World::new(&mut rng);
    let mut translator = Translator::new();
    let mut previous_xds = None;
    for step in 0..steps {
        let what = if step == 0 {
            "initial".to_string()
        } else if rng.chance(20) {
            // Two edits in one translation, as `serve` batches the saves of
            // one debounce window (a route and an EndpointSlice, say).
            let first = world.edit(&mut rng);
            format!("{first}, then {}", world.edit(&mut rng))
        } else {
            world.edit(&mut rng)
        };
        let inputs = world.load();
        let settings = Settings {
            // As `serve`: a new time on every translation.
            transition_time: format!("2026-01-01T00:{:02}:{:02}Z", (step / 60) % 60, step % 60),
            parallelism: Some(1),
            ..Default::default()
        };
        let full = translate::translate(&inputs, &settings);
        let inc = translator.translate(Arc::new(inputs), &settings, translate::Seams::default());
        assert_same_output(&format!("step {step} (seed {seed}: {what})"), &full, &inc);
        let stats = translator.stats();
        match stats.full {
            None => totals[0] += 1,
            Some(Full::Context) => totals[1] += 1,
            Some(_) => {}
        }
        totals[2] += stats.routes_reused;
        totals[3] += stats.gateways_reused;
        totals[4] += stats.hosts_spliced;
        // A partial assembly: some host spliced without being merged.
        totals[5] += usize::from(stats.hosts_merged < stats.hosts_spliced + stats.hosts_encoded);
        // An EndpointSlice edit that rebuilt assignments of a reused Gateway.
        totals[6] += usize::from(stats.full.is_none() && stats.assignments_rebuilt > 0);
        // A Service edit translated incrementally (its readers rebuilt).
        totals[7] += usize::from(stats.full.is_none() && what.contains("service-"));
        // A Service edit alone that was a full translation: only one an
        // ext_auth provider looked up (outside the routes) is.
        totals[8] += usize::from(
            stats.full == Some(Full::Context) && what.contains(" service-") && !what.contains(", then"),
        );
        // A TrafficPolicy edit translated incrementally (the routes and
        // Gateways it reaches rebuilt).
        totals[9] += usize::from(stats.full.is_none() && what.contains("policy-"));
        // A Secret edit translated incrementally (no listener named it).
        totals[10] += usize::from(stats.full.is_none() && what.contains("secret-"));
        // A Gateway edit translated incrementally (the routes naming it
        // rebuilt, it assembled again).
        totals[11] += usize::from(stats.full.is_none() && what.contains("gateway-"));
        // A ListenerSet edit translated incrementally (as its parent's).
        totals[12] += usize::from(stats.full.is_none() && what.contains("listenerset-"));
        // A ReferenceGrant edit translated incrementally (the routes that
        // looked into its namespace rebuilt).
        totals[14] += usize::from(stats.full.is_none() && what.contains("grant-"));
        // A Namespace edit translated incrementally (the routes and
        // ListenerSets in it rebuilt), and one of them that changed the
        // xDS (a selector's verdict changed: not vacuous).
        let namespace_edit = stats.full.is_none() && what.contains("namespace-");
        totals[15] += usize::from(namespace_edit);
        totals[16] += usize::from(namespace_edit && previous_xds.as_ref() != Some(&full.gateways));
        previous_xds = Some(full.gateways.clone());
        // A GatewayExtension edit translated incrementally (judged as a
        // policy edit, every Gateway assembled again).
        totals[17] += usize::from(stats.full.is_none() && what.contains("extension-"));
        // Standing policies: last call's attachment reused (no policy and
        // no route head changed), and such a step where a policy reaches
        // a rule (not vacuous).
        totals[18] += usize::from(stats.attachment_reused);
        totals[19] += usize::from(stats.attachment_reused && !full.policy_attachments.is_empty());
        // A route accepted through a ListenerSet (so such edits matter).
        totals[13] += usize::from(full.status.iter().any(|s| match &s.status {
            translate::status::StatusBody::Route { parents } => parents.iter().any(|p| {
                p.parent_ref.kind == "ListenerSet"
                    && p.conditions
                        .iter()
                        .any(|c| c.type_ == "Accepted" && c.status == "True")
            }),
            _ => false,
        }));
    }
}

#[test]
fn incremental_equals_full_after_every_edit() {
    let steps: usize = std::env::var("PORTCULLIS_INCREMENTAL_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let seeds: Vec<u64> = match std::env::var("PORTCULLIS_INCREMENTAL_SEED") {
        Ok(s) => vec![s.parse().expect("PORTCULLIS_INCREMENTAL_SEED is a number")],
        Err(_) => vec![0x9E37_79B9_7F4A_7C15, 0xD1B5_4A32_D192_ED03, 42],
    };
    // [incremental steps, steps where the context changed, routes reused,
    // Gateways reused, virtual hosts spliced into a Gateway assembled again,
    // steps with a partial assembly, steps rebuilding a reused Gateway's
    // ClusterLoadAssignments after an EndpointSlice edit, Service edits
    // translated incrementally, Service edits alone translated in full,
    // TrafficPolicy edits translated incrementally, Secret edits
    // translated incrementally, Gateway edits and ListenerSet edits
    // translated incrementally, steps with a route accepted through a
    // ListenerSet, ReferenceGrant edits translated incrementally,
    // Namespace edits translated incrementally, and those of them that
    // changed the xDS, GatewayExtension edits translated incrementally,
    // steps reusing last call's policy attachment, and those of them
    // where a policy reaches a rule]
    let mut totals = [0usize; 20];
    for seed in seeds {
        run(seed, steps, &mut totals);
    }
    eprintln!(
        "incremental steps {}, context changes {}, routes reused {}, Gateways reused {}, hosts spliced {}, partial assemblies {}, assignments rebuilt {}, incremental Service edits {}, full Service edits {}, incremental policy edits {}, incremental Secret edits {}, incremental Gateway edits {}, incremental ListenerSet edits {}, steps with a route on a ListenerSet {}, incremental ReferenceGrant edits {}, incremental Namespace edits {} ({} changing the xDS), incremental GatewayExtension edits {}, attachments reused {} ({} with a policy on a rule)",
        totals[0],
        totals[1],
        totals[2],
        totals[3],
        totals[4],
        totals[5],
        totals[6],
        totals[7],
        totals[8],
        totals[9],
        totals[10],
        totals[11],
        totals[12],
        totals[13],
        totals[14],
        totals[15],
        totals[16],
        totals[17],
        totals[18],
        totals[19]
    );
    // Not vacuous: both paths were taken, and routes were really reused.
    assert!(totals.iter().all(|&t| t > 0), "{totals:?}");
}
