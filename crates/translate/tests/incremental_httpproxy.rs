//! The incremental translator's HTTPProxy tree memo
//! (`translate/src/incremental/httpproxy.rs`, ARCHITECTURE.md §7):
//!
//! - random edit sequences of HTTPProxies — add, modify and delete of
//!   roots and children; includes (present, missing, naming a root,
//!   cycles, invalid conditions, across namespaces); duplicate routes and
//!   duplicate FQDNs; TLS roots with and without delegation — mixed with
//!   edits of Services, TLSCertificateDelegations and an HTTPRoute that
//!   claims a root's FQDN: after every step the incremental output (xDS
//!   bytes, status, diagnostics, reports) equals a full translation's;
//! - an edit of one child recomputes exactly the trees that include it,
//!   and reuses every other (which fails if the memo is bypassed).
//!
//! `PORTCULLIS_INCREMENTAL_STEPS` sets the steps per seed (default 120),
//! `PORTCULLIS_INCREMENTAL_SEED` a single seed to replay.

use std::collections::BTreeMap;
use std::sync::Arc;

use translate::Settings;
use translate::httpproxy::{HttpProxySettings, ProxyId};
use translate::incremental::Translator;

#[path = "support/random_edits.rs"]
mod random_edits;
use random_edits::Rng;
use random_edits::assert_same_output;
use random_edits::tls_pair;

const ROOTS: usize = 4;
const CHILDREN: usize = 8;
/// Where children live (an include names the namespace or not).
const CHILD_NS: [&str; 2] = ["apps", "team"];
const PREFIXES: [&str; 5] = ["/", "/a", "/a/", "/b", "/c"];

fn child_ns(c: usize) -> &'static str {
    CHILD_NS[c % 2]
}

/// The world, one manifest per file name.
struct World {
    files: BTreeMap<String, String>,
}

impl World {
    fn new(rng: &mut Rng) -> Self {
        let (crt, key) = tls_pair();
        let mut w = World {
            files: BTreeMap::new(),
        };
        w.files.insert(
            "base.yaml".into(),
            format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: portcullis}}\nspec: {{controllerName: portcullis.dev/gateway-controller}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: infra}}\nspec:\n  gatewayClassName: portcullis\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80, allowedRoutes: {{namespaces: {{from: All}}}}}}\n  - name: https\n    protocol: HTTPS\n    port: 443\n    tls: {{certificateRefs: [{{name: gw-cert}}]}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: gw-cert, namespace: infra}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {crt}\n  tls.key: {key}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: tls, namespace: apps}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {crt}\n  tls.key: {key}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: shared, namespace: certs}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {crt}\n  tls.key: {key}\n"
            ),
        );
        for s in 0..2 {
            w.service(rng, s);
        }
        w.delegation(rng);
        w.http_route(rng);
        for r in 0..ROOTS {
            w.root(rng, r);
        }
        for c in 0..CHILDREN {
            w.child(rng, c);
        }
        w
    }

    fn load(&self) -> api::Inputs {
        let parts = self.files.iter().map(|(f, t)| api::loader::load_str(f, t));
        api::loader::merge(parts).inputs
    }

    fn service(&mut self, rng: &mut Rng, i: usize) {
        let name = format!("service-{i}.yaml");
        if rng.chance(15) {
            self.files.remove(&name);
            return;
        }
        let port = if rng.chance(85) { 80 } else { 81 };
        let ns = CHILD_NS[i % 2];
        self.files.insert(
            name,
            format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: s{i}, namespace: {ns}}}\nspec:\n  ports: [{{name: http, port: {port}}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: s{i}-a, namespace: {ns}, labels: {{kubernetes.io/service-name: s{i}}}}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints: [{{addresses: [\"127.0.0.{}\"]}}]\n",
                1 + rng.below(3)
            ),
        );
    }

    fn delegation(&mut self, rng: &mut Rng) {
        if rng.chance(40) {
            self.files.remove("delegation.yaml");
            return;
        }
        let targets = if rng.chance(50) { "[apps]" } else { "[\"*\"]" };
        self.files.insert(
            "delegation.yaml".into(),
            format!(
                "apiVersion: projectcontour.io/v1\nkind: TLSCertificateDelegation\nmetadata: {{name: d, namespace: certs}}\nspec:\n  delegations:\n  - {{secretName: shared, targetNamespaces: {targets}}}\n"
            ),
        );
    }

    /// An HTTPRoute that claims one root's FQDN (or none) on the Gateway.
    fn http_route(&mut self, rng: &mut Rng) {
        if rng.chance(40) {
            self.files.remove("httproute.yaml");
            return;
        }
        self.files.insert(
            "httproute.yaml".into(),
            format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r, namespace: apps}}\nspec:\n  parentRefs: [{{name: edge, namespace: infra}}]\n  hostnames: [host-{}.example.com]\n  rules:\n  - backendRefs: [{{name: s0, port: 80}}]\n",
                rng.below(ROOTS + 1)
            ),
        );
    }

    fn conditions(rng: &mut Rng, include: bool) -> String {
        let mut c = Vec::new();
        match rng.below(10) {
            0 => {}
            // Invalid on an include (Contour refuses exact there).
            1 if include => c.push("{exact: /x}".to_string()),
            2 if !include => c.push("{regex: '/r.*'}".to_string()),
            _ => c.push(format!("{{prefix: {}}}", PREFIXES[rng.below(PREFIXES.len())])),
        }
        if rng.chance(15) {
            c.push("{header: {name: x-t, present: true}}".into());
        }
        if rng.chance(5) {
            c.push("{queryParameter: {name: q, exact: v}}".into());
        }
        format!("[{}]", c.join(", "))
    }

    fn includes(rng: &mut Rng, n: usize) -> String {
        let mut s = String::new();
        for _ in 0..n {
            let (name, ns) = match rng.below(12) {
                // Missing.
                0 => ("child-missing".to_string(), "apps"),
                // A root (RootIncludesRoot).
                1 => (format!("root-{}", rng.below(ROOTS)), "apps"),
                _ => {
                    let c = rng.below(CHILDREN);
                    (format!("child-{c}"), child_ns(c))
                }
            };
            let namespace = if ns == "apps" && rng.chance(50) {
                String::new()
            } else {
                format!(", namespace: {ns}")
            };
            s.push_str(&format!(
                "  - {{name: {name}{namespace}, conditions: {}}}\n",
                Self::conditions(rng, true)
            ));
        }
        if s.is_empty() {
            String::new()
        } else {
            format!("  includes:\n{s}")
        }
    }

    fn routes(rng: &mut Rng, n: usize, ns: &str) -> String {
        let mut s = String::new();
        for _ in 0..n {
            let service = match rng.below(8) {
                0 => "missing".to_string(),
                _ => format!("s{}", usize::from(ns == "team")),
            };
            let action = if rng.chance(10) {
                "    directResponsePolicy: {statusCode: 204}\n".to_string()
            } else {
                format!("    services: [{{name: {service}, port: 80}}]\n")
            };
            s.push_str(&format!(
                "  - conditions: {}\n{action}",
                Self::conditions(rng, false)
            ));
        }
        if s.is_empty() {
            String::new()
        } else {
            format!("  routes:\n{s}")
        }
    }

    fn root(&mut self, rng: &mut Rng, r: usize) {
        let name = format!("root-{r}.yaml");
        if rng.chance(10) {
            self.files.remove(&name);
            return;
        }
        let fqdn = match rng.below(12) {
            // Another root's FQDN, upper-cased (DuplicateVhost).
            0 => format!("HOST-{}.example.com", rng.below(ROOTS)),
            _ => format!("host-{r}.example.com"),
        };
        let tls = match rng.below(8) {
            0 => ", tls: {secretName: tls}".to_string(),
            1 => ", tls: {secretName: certs/shared}".to_string(),
            2 => ", tls: {secretName: certs/shared, minimumProtocolVersion: \"1.3\"}".to_string(),
            3 => ", tls: {secretName: nope}".to_string(),
            _ => String::new(),
        };
        let n = rng.below(4);
        let includes = Self::includes(rng, n);
        let n = rng.below(3);
        let routes = Self::routes(rng, n, "apps");
        self.files.insert(
            name,
            format!(
                "apiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {{name: root-{r}, namespace: apps}}\nspec:\n  virtualhost: {{fqdn: {fqdn}{tls}}}\n{includes}{routes}"
            ),
        );
    }

    fn child(&mut self, rng: &mut Rng, c: usize) {
        let name = format!("child-{c}.yaml");
        if rng.chance(10) {
            self.files.remove(&name);
            return;
        }
        let ns = child_ns(c);
        let includes = if rng.chance(30) {
            let n = 1 + rng.below(2);
            Self::includes(rng, n)
        } else {
            String::new()
        };
        let n = 1 + rng.below(3);
        let routes = Self::routes(rng, n, ns);
        // Occasionally a field portcullis does not read: the spec is
        // unreadable and the child fenced.
        let extra = if rng.chance(5) {
            "  routes:\n  - services: [{name: s0, port: 80}]\n    corsPolicy: {allowOrigin: ['*']}\n"
                .to_string()
        } else {
            routes
        };
        self.files.insert(
            name,
            format!(
                "apiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {{name: child-{c}, namespace: {ns}}}\nspec:\n{includes}{extra}"
            ),
        );
    }

    /// One random edit; returns what it did.
    fn edit(&mut self, rng: &mut Rng) -> String {
        match rng.below(20) {
            0..=5 => {
                let r = rng.below(ROOTS);
                self.root(rng, r);
                format!("root-{r}")
            }
            6..=14 => {
                let c = rng.below(CHILDREN);
                self.child(rng, c);
                format!("child-{c}")
            }
            15 | 16 => {
                let s = rng.below(2);
                self.service(rng, s);
                format!("service s{s}")
            }
            17 => {
                self.delegation(rng);
                "delegation".into()
            }
            _ => {
                self.http_route(rng);
                "httproute".into()
            }
        }
    }
}

fn settings(step: usize, root_namespaces: Vec<String>) -> Settings {
    Settings {
        transition_time: format!("2026-01-01T00:{:02}:{:02}Z", (step / 60) % 60, step % 60),
        parallelism: Some(1),
        http_proxy: HttpProxySettings {
            root_namespaces,
            gateway: Some(("infra".into(), "edge".into())),
        },
        ..Default::default()
    }
}

#[test]
fn incremental_httpproxy_equals_full_after_every_edit() {
    let steps: usize = std::env::var("PORTCULLIS_INCREMENTAL_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let seeds: Vec<u64> = match std::env::var("PORTCULLIS_INCREMENTAL_SEED") {
        Ok(s) => vec![s.parse().expect("PORTCULLIS_INCREMENTAL_SEED is a number")],
        Err(_) => vec![0x9E37_79B9_7F4A_7C15, 0xD1B5_4A32_D192_ED03, 7, 42],
    };
    // [trees reused, trees recomputed, steps with a served tree reused]
    let mut totals = [0usize; 3];
    for seed in seeds {
        let mut rng = Rng(seed);
        let mut world = World::new(&mut rng);
        // One seed in two limits roots to `apps` (a root in another
        // namespace is refused): children in `team` are never roots anyway.
        let roots = if seed % 2 == 0 {
            vec!["apps".to_string()]
        } else {
            Vec::new()
        };
        let mut translator = Translator::new();
        for step in 0..steps {
            let what = if step == 0 {
                "initial".to_string()
            } else {
                world.edit(&mut rng)
            };
            let inputs = world.load();
            let settings = settings(step, roots.clone());
            let full = translate::translate(&inputs, &settings);
            let inc = translator.translate(Arc::new(inputs), &settings, translate::Seams::default());
            assert_same_output(&format!("seed {seed} step {step} ({what})"), &full, &inc);
            let trees = translator.httpproxy_trees();
            totals[0] += trees.reused;
            totals[1] += trees.recomputed.len();
            totals[2] += usize::from(trees.reused > 0);
        }
    }
    eprintln!(
        "trees reused {}, recomputed {}, steps reusing a tree {}",
        totals[0], totals[1], totals[2]
    );
    // Not vacuous: trees were reused and recomputed.
    assert!(totals.iter().all(|&t| t > 0), "{totals:?}");
}

/// A fixed world: roots `r0`..`r4` each include their own child `c<i>`;
/// `shared` is included by `r1` and `r3` (and includes `leaf`); `r4`
/// includes `ghost`, which exists only with `ghost` set (else a 502).
/// Which trees contain which child is known from the manifests, not from
/// the implementation.
fn fixed(edited: Option<(&str, &str)>) -> api::Inputs {
    fixed_with(edited, false)
}

fn fixed_with(edited: Option<(&str, &str)>, ghost: bool) -> api::Inputs {
    let mut s = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: portcullis}\nspec: {controllerName: portcullis.dev/gateway-controller}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: infra}\nspec:\n  gatewayClassName: portcullis\n  listeners:\n  - {name: http, protocol: HTTP, port: 80}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: apps}\nspec:\n  ports: [{name: http, port: 80}]\n",
    );
    let route = |name: &str, default: &str| -> String {
        match edited {
            Some((n, path)) if n == name => path.to_string(),
            _ => default.to_string(),
        }
    };
    for i in 0..5 {
        let shared = match i {
            1 | 3 => "  - {name: shared, conditions: [{prefix: /shared}]}\n",
            4 => "  - {name: ghost, conditions: [{prefix: /ghost}]}\n",
            _ => "",
        };
        s.push_str(&format!(
            "---\napiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {{name: r{i}, namespace: apps}}\nspec:\n  virtualhost: {{fqdn: r{i}.example.com}}\n  includes:\n  - {{name: c{i}, conditions: [{{prefix: /c}}]}}\n{shared}---\napiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {{name: c{i}, namespace: apps}}\nspec:\n  routes:\n  - conditions: [{{prefix: {}}}]\n    services: [{{name: s, port: 80}}]\n",
            route(&format!("c{i}"), "/x")
        ));
    }
    s.push_str(&format!(
        "---\napiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {{name: shared, namespace: apps}}\nspec:\n  includes:\n  - {{name: leaf, conditions: [{{prefix: /l}}]}}\n  routes:\n  - conditions: [{{prefix: {}}}]\n    services: [{{name: s, port: 80}}]\n---\napiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {{name: leaf, namespace: apps}}\nspec:\n  routes:\n  - conditions: [{{prefix: {}}}]\n    services: [{{name: s, port: 80}}]\n",
        route("shared", "/s"),
        route("leaf", "/x"),
    ));
    if ghost {
        s.push_str("---\napiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {name: ghost, namespace: apps}\nspec:\n  routes:\n  - services: [{name: s, port: 80}]\n");
    }
    api::loader::load_str("fixed.yaml", &s).inputs
}

fn ids(names: &[&str]) -> Vec<ProxyId> {
    names.iter().map(|n| ProxyId::new("apps", *n)).collect()
}

#[test]
fn an_edit_of_one_child_recomputes_exactly_its_trees() {
    let settings = settings(0, Vec::new());
    let mut t = Translator::new();
    let first = t.translate(Arc::new(fixed(None)), &settings, translate::Seams::default());
    assert_eq!(
        t.httpproxy_trees().recomputed,
        ids(&["r0", "r1", "r2", "r3", "r4"])
    );

    // (edited proxy, the trees that contain it)
    let cases: [(&str, &[&str]); 3] = [
        ("c2", &["r2"]),
        ("shared", &["r1", "r3"]),
        ("leaf", &["r1", "r3"]),
    ];
    for (proxy, trees) in cases {
        let inputs = fixed(Some((proxy, "/edited")));
        let inc = t.translate(Arc::new(inputs), &settings, translate::Seams::default());
        let stats = t.httpproxy_trees().clone();
        assert_eq!(stats.recomputed, ids(trees), "editing {proxy}");
        assert_eq!(stats.reused, 5 - trees.len(), "editing {proxy}");
        // Route works of Gateway API routes are untouched: not a context
        // change.
        assert_eq!(t.stats().full, None, "editing {proxy}");
        let full = translate::translate(&fixed(Some((proxy, "/edited"))), &settings);
        assert_same_output(&format!("editing {proxy}"), &full, &inc);
        assert_ne!(inc.gateways, first.gateways, "editing {proxy} changed nothing");
        // Back to the original: the same trees again.
        let _ = t.translate(Arc::new(fixed(None)), &settings, translate::Seams::default());
        assert_eq!(t.httpproxy_trees().recomputed, ids(trees), "restoring {proxy}");
    }

    // A missing include created, then deleted again: only the tree that
    // names it (its 502 becomes the child's route, and back).
    for ghost in [true, false] {
        let inc = t.translate(
            Arc::new(fixed_with(None, ghost)),
            &settings,
            translate::Seams::default(),
        );
        assert_eq!(t.httpproxy_trees().recomputed, ids(&["r4"]), "ghost {ghost}");
        assert_same_output(
            &format!("ghost {ghost}"),
            &translate::translate(&fixed_with(None, ghost), &settings),
            &inc,
        );
    }

    // Nothing changed: nothing recomputed.
    let _ = t.translate(Arc::new(fixed(None)), &settings, translate::Seams::default());
    assert_eq!(t.httpproxy_trees().recomputed, Vec::<ProxyId>::new());
    assert_eq!(t.httpproxy_trees().reused, 5);
}
