//! A hostile review of standing TrafficPolicies
//! (`crates/translate/src/incremental/standing_policies.rs`): last call's
//! policy compilations, attachment (which rules each policy reaches, the
//! merged features, the attachment records) and policy reports, reused
//! when no TrafficPolicy and no GatewayExtension changed and (for the
//! attachment) every route in the route order kept its head.
//!
//! Every step is translated incrementally by one `Translator` and in full,
//! and the two outputs compared (`assert_same_output`); a step meant to
//! change something checks that the full output did change (not vacuous),
//! and `Stats::attachment_reused` is asserted where the rule says what it
//! must be. As `serve` does, snapshots share the objects of documents that
//! did not change ([`Docs`]), so the by-pointer paths are taken.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use api::Inputs;
use translate::Settings;
use translate::incremental::{Full, Stats, Translator};

#[path = "support/random_edits.rs"]
mod random_edits;
use random_edits::{Rng, assert_same_output};

#[path = "support/refuses_header.rs"]
mod refuses_header;

#[path = "support/shared_docs.rs"]
mod shared_docs;
use shared_docs::Docs;

// ---------------------------------------------------------------------
// Helpers (after `incremental_hostile.rs`)
// ---------------------------------------------------------------------

/// A STRICT validator: the fake Envoy refusing one header, which panics
/// once when asked to (for the recovery case).
#[derive(Default)]
struct Strict {
    envoy: refuses_header::RefusesOneHeader,
    panic_once: AtomicBool,
}

impl translate::strict::Validator for Strict {
    fn validate(&self, batch: &[translate::strict::Candidate]) -> Vec<translate::strict::Verdict> {
        if self.panic_once.swap(false, Ordering::SeqCst) {
            panic!("validator panics once (injected)");
        }
        self.envoy.validate(batch)
    }
}

/// One translator, and a full translation of every snapshot beside it.
struct Run {
    translator: Translator,
    settings: Settings,
    step: usize,
    last: Option<translate::Output>,
    strict: Option<Strict>,
}

impl Run {
    fn new() -> Self {
        Run {
            translator: Translator::new(),
            settings: Settings {
                parallelism: Some(1),
                ..Default::default()
            },
            step: 0,
            last: None,
            strict: None,
        }
    }

    fn strict() -> Self {
        Run {
            strict: Some(Strict::default()),
            ..Run::new()
        }
    }

    /// Translates `inputs` both ways and compares them. With `panic`, the
    /// validator panics once in the incremental call (which recovers).
    fn step_with(&mut self, what: &str, inputs: &Inputs, panic: bool) -> Stats {
        self.step += 1;
        self.settings.transition_time = format!("2026-01-01T00:00:{:02}Z", self.step % 60);
        let validator = self
            .strict
            .as_ref()
            .map(|v| v as &dyn translate::strict::Validator);
        let full = translate::translate_with(inputs, &self.settings, validator);
        if panic {
            let v = self.strict.as_ref().expect("panics need STRICT");
            v.panic_once.store(true, Ordering::SeqCst);
        }
        let mut inc = self.translator.translate(
            Arc::new(inputs.clone()),
            &self.settings,
            translate::Seams {
                validator,
                hooks: None,
            },
        );
        let stats = self.translator.stats();
        if panic {
            assert_eq!(stats.full, Some(Full::Recovered), "{what}: {stats:?}");
            let w = inc.diagnostics.pop().expect("the recovery warning");
            assert!(w.message.contains("injected"), "{}", w.message);
        }
        assert_same_output(&format!("step {} ({what})", self.step), &full, &inc);
        self.last = Some(full);
        stats
    }

    fn step(&mut self, what: &str, inputs: &Inputs) -> Stats {
        self.step_with(what, inputs, false)
    }

    /// [`Run::step`], asserting that the full output (xDS, status,
    /// diagnostics, failures or attachment records) changed.
    fn changed_step(&mut self, what: &str, inputs: &Inputs) -> Stats {
        let before = self.last.take();
        let stats = self.step(what, inputs);
        let after = self.last.as_ref().expect("just translated");
        if let Some(b) = before {
            assert!(
                b.gateways != after.gateways
                    || b.status != after.status
                    || b.diagnostics != after.diagnostics
                    || b.policy_failures != after.policy_failures
                    || b.policy_attachments != after.policy_attachments,
                "{what}: the edit changed nothing (vacuous test)"
            );
        }
        stats
    }

    /// [`Run::changed_step`], asserting an incremental call that reused
    /// the attachment or not.
    fn expect(&mut self, what: &str, inputs: &Inputs, reused: bool) -> Stats {
        let s = self.changed_step(what, inputs);
        assert!(s.full.is_none() && s.attachment_reused == reused, "{what}: {s:?}");
        s
    }

    fn out(&self) -> &translate::Output {
        self.last.as_ref().expect("translated")
    }
}

/// The statuses and diagnostics of TrafficPolicy `name`, as text.
fn policy_report(out: &translate::Output, name: &str) -> String {
    let status: Vec<_> = out
        .status
        .iter()
        .filter(|s| s.kind == "TrafficPolicy" && s.metadata.name == name)
        .collect();
    let diags: Vec<_> = out
        .diagnostics
        .iter()
        .filter(|d| {
            d.object
                .as_deref()
                .is_some_and(|o| o.ends_with(&format!("/{name}")))
        })
        .collect();
    format!("{status:?} {diags:?}")
}

const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis}
spec:
  controllerName: portcullis.dev/gateway-controller
";

fn service(ns: &str, name: &str, port: u16) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {ns}}}
spec:
  ports: [{{name: http, port: {port}, targetPort: 8080}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {name}-1
  namespace: {ns}
  labels: {{kubernetes.io/service-name: {name}}}
addressType: IPv4
ports: [{{name: http, port: 8080}}]
endpoints:
- addresses: [\"127.0.0.1\"]
"
    )
}

fn gateway(ns: &str, name: &str, listeners: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: {ns}}}
spec:
  gatewayClassName: portcullis
  listeners:
{listeners}"
    )
}

const LISTENER_A: &str =
    "  - {name: a, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}\n";
const LISTENER_B: &str =
    "  - {name: b, protocol: HTTP, port: 8080, allowedRoutes: {namespaces: {from: All}}}\n";

fn policy(ns: &str, name: &str, meta: &str, targets: &str, body: &str) -> String {
    format!(
        "apiVersion: gateway.portcullis.dev/v1alpha1
kind: TrafficPolicy
metadata: {{name: {name}, namespace: {ns}{meta}}}
spec:
{targets}{body}"
    )
}

fn target(kind: &str, name: &str, section: &str) -> String {
    let section = if section.is_empty() {
        String::new()
    } else {
        format!(", sectionName: {section}")
    };
    format!("  targetRefs: [{{group: gateway.networking.k8s.io, kind: {kind}, name: {name}{section}}}]\n")
}

fn selector(kind: &str, labels: &str) -> String {
    format!(
        "  targetSelectors: [{{group: gateway.networking.k8s.io, kind: {kind}, matchLabels: {{{labels}}}}}]\n"
    )
}

fn set_header(h: &str) -> String {
    format!("  headerModifiers: {{response: {{set: [{{name: {h}, value: v}}]}}}}\n")
}

fn ext_auth(ext: &str) -> String {
    format!("  extAuth: {{extensionRef: {{name: {ext}}}}}\n")
}

fn extension(ns: &str, name: &str, backend: &str, port: u16) -> String {
    format!(
        "apiVersion: gateway.portcullis.dev/v1alpha1
kind: GatewayExtension
metadata: {{name: {name}, namespace: {ns}}}
spec:
  type: ExtAuth
  extAuth:
    httpService:
      backendRef: {{name: {backend}, port: {port}}}
"
    )
}

/// A route: `kind` HTTPRoute or GRPCRoute, `labels` flow map entries,
/// `meta` more metadata (flow entries after a comma), and its rules as
/// (name or "", discriminator: a path, or a gRPC method).
#[allow(clippy::too_many_arguments)]
fn route(
    kind: &str,
    ns: &str,
    name: &str,
    labels: &str,
    meta: &str,
    parents: &str,
    host: &str,
    rules: &[(&str, &str)],
) -> String {
    let mut body = String::new();
    for (rule, m) in rules {
        let rule = if rule.is_empty() {
            String::new()
        } else {
            format!("    name: {rule}\n")
        };
        let matches = if kind == "GRPCRoute" {
            format!("  - matches: [{{method: {{service: pkg.S, method: {m}}}}}]\n")
        } else {
            format!("  - matches: [{{path: {{type: PathPrefix, value: {m}}}}}]\n")
        };
        body.push_str(&format!(
            "{matches}{rule}    backendRefs: [{{name: web, port: 80}}]\n"
        ));
    }
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: {kind}
metadata: {{name: {name}, namespace: {ns}, labels: {{{labels}}}{meta}}}
spec:
  parentRefs: [{parents}]
  hostnames: [\"{host}\"]
  rules:
{body}"
    )
}

fn http(name: &str, labels: &str, rules: &[(&str, &str)]) -> String {
    route(
        "HTTPRoute",
        "app",
        name,
        labels,
        "",
        ON_GW,
        &format!("{name}.example.com"),
        rules,
    )
}

fn grpc(name: &str, labels: &str, rules: &[(&str, &str)]) -> String {
    route(
        "GRPCRoute",
        "app",
        name,
        labels,
        "",
        ON_GW,
        &format!("{name}.example.com"),
        rules,
    )
}

const ON_GW: &str = "{name: gw, namespace: infra}";

/// The class, Services `web` in `app` and `infra`, Gateway `gw` (listener
/// a) in `infra`.
fn base(docs: &mut Docs) {
    docs.set("00-class.yaml", CLASS);
    docs.set("10-svc-app.yaml", &service("app", "web", 80));
    docs.set("10-svc-infra.yaml", &service("infra", "web", 80));
    docs.set("20-gw.yaml", &gateway("infra", "gw", LISTENER_A));
}

// ---------------------------------------------------------------------
// Route heads: kind, duplicates, files
// ---------------------------------------------------------------------

/// HTTPRoute `a` replaced by GRPCRoute `a` (same namespace, name, labels
/// and rule names: only the kind differs), beside policies on each kind;
/// then both kinds at once, swapped between files.
#[test]
fn route_kind_swapped_under_policies_on_each_kind() {
    let mut docs = Docs::default();
    base(&mut docs);
    docs.set(
        "25-p-http.yaml",
        &policy(
            "app",
            "on-http",
            "",
            &target("HTTPRoute", "a", ""),
            &set_header("x-http"),
        ),
    );
    docs.set(
        "25-p-grpc.yaml",
        &policy(
            "app",
            "on-grpc",
            "",
            &target("GRPCRoute", "a", "r"),
            &set_header("x-grpc"),
        ),
    );
    docs.set(
        "25-p-sel.yaml",
        &policy(
            "app",
            "sel-grpc",
            "",
            &selector("GRPCRoute", "tier: gold"),
            &set_header("x-sel"),
        ),
    );
    docs.set("30-a.yaml", &http("a", "tier: gold", &[("r", "/a")]));
    docs.set("30-z.yaml", &http("z", "", &[("r", "/z")]));
    let mut run = Run::new();
    run.step("initial", &docs.inputs());
    docs.set("30-a.yaml", &grpc("a", "tier: gold", &[("r", "Get")]));
    run.expect("a becomes a GRPCRoute", &docs.inputs(), false);
    docs.set("30-z.yaml", &http("z", "", &[("r", "/z2")]));
    run.expect("z edited (heads kept)", &docs.inputs(), true);
    // Both kinds of `a` at once: HTTP a (file 30) and GRPC a (file 31).
    docs.set("30-a.yaml", &http("a", "tier: gold", &[("r", "/a")]));
    docs.set("31-a.yaml", &grpc("a", "tier: gold", &[("r", "Get")]));
    run.expect("HTTPRoute a beside GRPCRoute a", &docs.inputs(), false);
    // Swapped between the files, heads equal position by position.
    docs.set("30-a.yaml", &grpc("a", "tier: gold", &[("r", "List")]));
    docs.set("31-a.yaml", &http("a", "tier: gold", &[("r", "/a2")]));
    run.expect("the two kinds swap files", &docs.inputs(), true);
    // Swapped again, rule counts differing.
    docs.set("30-a.yaml", &http("a", "tier: gold", &[("r", "/a"), ("s", "/b")]));
    docs.set("31-a.yaml", &grpc("a", "tier: gold", &[("r", "Get")]));
    run.expect("swap back, HTTP a gains a rule", &docs.inputs(), false);
    docs.set("31-a.yaml", &grpc("a", "", &[("r", "Get")]));
    run.expect("GRPC a leaves the selector", &docs.inputs(), false);
}

/// Two HTTPRoutes with one key (`app/a`): the policies reach the first
/// in the route order. Their files' contents swapped (heads differ by
/// labels, then only by rules' paths), one removed, one renamed.
#[test]
fn duplicate_route_keys_under_standing_policies() {
    let mut docs = Docs::default();
    base(&mut docs);
    docs.set(
        "25-p-a.yaml",
        &policy(
            "app",
            "on-a",
            "",
            &target("HTTPRoute", "a", ""),
            &set_header("x-a"),
        ),
    );
    docs.set(
        "25-p-a-named.yaml",
        &policy(
            "app",
            "on-a-named",
            "",
            &target("HTTPRoute", "a", "second"),
            &set_header("x-named"),
        ),
    );
    docs.set(
        "25-p-gold.yaml",
        &policy(
            "app",
            "gold",
            "",
            &selector("HTTPRoute", "tier: gold"),
            &set_header("x-gold"),
        ),
    );
    let one = http("a", "tier: gold", &[("first", "/one")]);
    let two = http("a", "", &[("first", "/two"), ("second", "/two-b")]);
    docs.set("30-a.yaml", &one);
    docs.set("31-a.yaml", &two);
    docs.set("32-b.yaml", &http("b", "", &[("", "/b")]));
    let mut run = Run::new();
    run.step("initial", &docs.inputs());
    docs.set("30-a.yaml", &two);
    docs.set("31-a.yaml", &one);
    run.expect("duplicates swap files", &docs.inputs(), false);
    // Equal heads, other paths: swapped, the heads are equal by position.
    let three = http("a", "", &[("first", "/three"), ("second", "/three-b")]);
    docs.set("31-a.yaml", &three);
    run.expect("second duplicate takes the first's head", &docs.inputs(), false);
    docs.set("30-a.yaml", &three);
    docs.set("31-a.yaml", &two);
    run.expect("equal-headed duplicates swap files", &docs.inputs(), true);
    docs.set("32-b.yaml", &http("b", "", &[("", "/b2")]));
    run.expect("b edited beside duplicates", &docs.inputs(), true);
    docs.remove("30-a.yaml");
    run.expect("first duplicate removed", &docs.inputs(), false);
    docs.set("30-a.yaml", &http("a0", "tier: gold", &[("first", "/one")]));
    run.expect("a duplicate added back under another name", &docs.inputs(), false);
    docs.set("30-a.yaml", &http("a", "tier: gold", &[("first", "/one")]));
    run.expect("renamed back to a duplicate", &docs.inputs(), false);
}

/// A route moved between files (its source and its input position change,
/// not its head), with a regex RE2 refuses so its diagnostics name its
/// source; a policy moved between files (its source changes: it is
/// compiled again).
#[test]
fn routes_and_policies_moved_between_files() {
    let mut docs = Docs::default();
    base(&mut docs);
    docs.set(
        "25-p-a.yaml",
        &policy(
            "app",
            "on-a",
            "",
            &target("HTTPRoute", "a", "nope"),
            &set_header("x-a"),
        ),
    );
    docs.set(
        "25-p-b.yaml",
        &policy(
            "app",
            "on-b",
            "",
            &target("HTTPRoute", "b", ""),
            &set_header("bad header"),
        ),
    );
    let a = route(
        "HTTPRoute",
        "app",
        "a",
        "",
        "",
        ON_GW,
        "a.example.com",
        &[("first", "/a"), ("", "\"/(a\"")],
    )
    .replace("PathPrefix, value: \"/(a", "RegularExpression, value: \"/(a");
    docs.set("30-a.yaml", &a);
    docs.set("30-b.yaml", &http("b", "", &[("first", "/b")]));
    docs.set("30-c.yaml", &http("c", "", &[("first", "/c")]));
    let mut run = Run::new();
    run.step("initial", &docs.inputs());
    docs.remove("30-a.yaml");
    docs.set("40-a.yaml", &format!("# moved\n\n{a}"));
    let before = format!("{:?}", run.out().diagnostics);
    let s = run.step("route a moved to another file", &docs.inputs());
    assert!(s.full.is_none() && s.attachment_reused, "{s:?}");
    let after = format!("{:?}", run.out().diagnostics);
    assert!(
        before.contains("30-a.yaml") && after.contains("40-a.yaml"),
        "{after}"
    );
    docs.remove("30-c.yaml");
    docs.set("05-c.yaml", &http("c", "", &[("first", "/c2")]));
    run.expect("route c moved first and edited", &docs.inputs(), true);
    let p = policy(
        "app",
        "on-b",
        "",
        &target("HTTPRoute", "b", ""),
        &set_header("bad header"),
    );
    docs.remove("25-p-b.yaml");
    docs.set("26-p-b.yaml", &format!("# moved\n{p}"));
    let s = run.step("policy on-b moved to another file", &docs.inputs());
    assert!(s.full.is_none() && !s.attachment_reused, "{s:?}");
    docs.set("30-b.yaml", &http("b", "", &[("first", "/b2")]));
    run.expect("b edited after the policy moved", &docs.inputs(), true);
}

// ---------------------------------------------------------------------
// GatewayExtensions: what their providers look up
// ---------------------------------------------------------------------

/// Route-level and Gateway-level ext_auth policies through GatewayExtensions
/// whose Services are edited, removed and restored, beside
/// ReferenceGrant and Namespace edits (which the providers do not read)
/// and route edits (which reuse every compilation).
#[test]
fn extension_services_grants_and_namespaces() {
    let mut docs = Docs::default();
    base(&mut docs);
    docs.set(
        "05-ns-app.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n",
    );
    docs.set("11-svc-authz.yaml", &service("app", "authz", 80));
    docs.set("11-svc-authz-infra.yaml", &service("infra", "authz", 80));
    docs.set("22-ext.yaml", &extension("app", "auth", "authz", 80));
    docs.set("22-ext-infra.yaml", &extension("infra", "auth", "authz", 80));
    docs.set(
        "22-ext-far.yaml",
        &extension("app", "far", "authz", 80).replace(
            "backendRef: {name: authz, port: 80}",
            "backendRef: {name: authz, namespace: infra, port: 80}",
        ),
    );
    docs.set(
        "25-p-a.yaml",
        &policy(
            "app",
            "auth-a",
            "",
            &target("HTTPRoute", "a", ""),
            &ext_auth("auth"),
        ),
    );
    docs.set(
        "25-p-b.yaml",
        &policy(
            "app",
            "auth-b",
            "",
            &selector("HTTPRoute", "tier: gold"),
            &ext_auth("far"),
        ),
    );
    docs.set(
        "25-p-c.yaml",
        &policy(
            "app",
            "auth-c",
            "",
            &target("HTTPRoute", "c", ""),
            &ext_auth("missing"),
        ),
    );
    docs.set(
        "25-p-gw.yaml",
        &policy(
            "infra",
            "auth-gw",
            "",
            &target("Gateway", "gw", ""),
            &ext_auth("auth"),
        ),
    );
    docs.set("30-a.yaml", &http("a", "", &[("", "/a")]));
    docs.set("30-b.yaml", &http("b", "tier: gold", &[("", "/b")]));
    docs.set("30-c.yaml", &http("c", "", &[("", "/c")]));
    let mut run = Run::new();
    run.step("initial", &docs.inputs());
    docs.set("30-a.yaml", &http("a", "", &[("", "/a2")]));
    run.expect("a edited", &docs.inputs(), true);
    docs.set("11-svc-authz.yaml", &service("app", "authz", 81));
    let s = run.changed_step("the extension's Service loses its port", &docs.inputs());
    assert_eq!(s.full, Some(Full::Context), "{s:?}");
    docs.set("30-a.yaml", &http("a", "", &[("", "/a3")]));
    run.expect("a edited (extension unusable)", &docs.inputs(), true);
    docs.set("11-svc-authz.yaml", &service("app", "authz", 80));
    let s = run.changed_step("port back", &docs.inputs());
    assert_eq!(s.full, Some(Full::Context), "{s:?}");
    docs.remove("11-svc-authz-infra.yaml");
    let s = run.changed_step("the Gateway extension's Service removed", &docs.inputs());
    assert_eq!(s.full, Some(Full::Context), "{s:?}");
    docs.set("30-c.yaml", &http("c", "", &[("", "/c2")]));
    // The Gateway's scope is fenced: c's edit shows nowhere.
    let s = run.step("c edited", &docs.inputs());
    assert!(s.full.is_none() && s.attachment_reused, "{s:?}");
    docs.set("11-svc-authz-infra.yaml", &service("infra", "authz", 80));
    let s = run.changed_step("the Gateway extension's Service restored", &docs.inputs());
    assert_eq!(s.full, Some(Full::Context), "{s:?}");
    // Not read by the providers: no effect on them.
    docs.set(
        "23-grant.yaml",
        "apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: infra}
spec:
  from: [{group: gateway.portcullis.dev, kind: GatewayExtension, namespace: app}]
  to: [{group: \"\", kind: Service}]
",
    );
    docs.set("30-b.yaml", &http("b", "tier: gold", &[("", "/b2")]));
    run.expect("a grant for the far extension, b edited", &docs.inputs(), true);
    docs.set(
        "05-ns-app.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: app, labels: {team: a}}\n",
    );
    docs.set("30-b.yaml", &http("b", "tier: gold", &[("", "/b3")]));
    run.expect("namespace app relabelled, b edited", &docs.inputs(), true);
    docs.set("11-svc-missing.yaml", &service("app", "missing", 80));
    let s = run.changed_step("an unrelated Service added, c edited", &{
        docs.set("30-c.yaml", &http("c", "", &[("", "/c3")]));
        docs.inputs()
    });
    assert!(s.full.is_none() && s.attachment_reused, "{s:?}");
    docs.set("22-ext-missing.yaml", &extension("app", "missing", "missing", 80));
    let s = run.changed_step("the missing extension added", &docs.inputs());
    assert!(s.full.is_none() && !s.attachment_reused, "{s:?}");
    docs.remove("11-svc-missing.yaml");
    let s = run.changed_step("its Service removed", &docs.inputs());
    assert_eq!(s.full, Some(Full::Context), "{s:?}");
}

// ---------------------------------------------------------------------
// Gateways, listeners and ListenerSets beside standing policies
// ---------------------------------------------------------------------

/// Policies on the Gateway, on one listener, on a ListenerSet (and its
/// listener) and on routes; the Gateway's and the set's listeners edited
/// while every route keeps its head (the attachment is reused; the scopes
/// and the reports are not).
#[test]
fn gateway_and_listener_set_edits_beside_standing_policies() {
    let mut docs = Docs::default();
    base(&mut docs);
    docs.set(
        "20-gw.yaml",
        &gateway("infra", "gw", &format!("{LISTENER_A}{LISTENER_B}")),
    );
    let ls = |port: u16, name: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: ls, namespace: infra, labels: {{tier: edge}}}}
spec:
  parentRef: {{name: gw}}
  listeners:
  - {{name: {name}, protocol: HTTP, port: {port}, hostname: \"*.ls.example.com\", allowedRoutes: {{namespaces: {{from: All}}}}}}
"
        )
    };
    let gw_allows_sets = |listeners: &str| {
        gateway("infra", "gw", listeners).replace(
            "  listeners:\n",
            "  allowedListeners: {namespaces: {from: All}}\n  listeners:\n",
        )
    };
    docs.set(
        "20-gw.yaml",
        &gw_allows_sets(&format!("{LISTENER_A}{LISTENER_B}")),
    );
    docs.set("21-ls.yaml", &ls(9090, "s"));
    docs.set(
        "25-p-gw.yaml",
        &policy(
            "infra",
            "on-gw",
            "",
            &target("Gateway", "gw", ""),
            &format!("{}  timeouts: {{request: 5s}}\n", set_header("x-gw")),
        ),
    );
    docs.set(
        "25-p-listener.yaml",
        &policy(
            "infra",
            "on-b",
            "",
            &target("Gateway", "gw", "b"),
            &set_header("x-gw"),
        ),
    );
    docs.set(
        "25-p-ls.yaml",
        &policy(
            "infra",
            "on-ls",
            "",
            &selector("ListenerSet", "tier: edge"),
            &set_header("x-ls"),
        ),
    );
    docs.set(
        "25-p-ls-s.yaml",
        &policy(
            "infra",
            "on-ls-s",
            "",
            &target("ListenerSet", "ls", "s"),
            &set_header("bad header"),
        ),
    );
    docs.set(
        "25-p-a.yaml",
        &policy(
            "app",
            "on-a",
            "",
            &target("HTTPRoute", "a", ""),
            &set_header("x-gw"),
        ),
    );
    let on = |section: &str| format!("{{name: gw, namespace: infra, sectionName: {section}}}");
    let a = |parents: &str, path: &str| {
        route(
            "HTTPRoute",
            "app",
            "a",
            "",
            "",
            parents,
            "a.example.com",
            &[("", path)],
        )
    };
    docs.set("30-a.yaml", &a(ON_GW, "/a"));
    docs.set(
        "30-s.yaml",
        &route(
            "HTTPRoute",
            "app",
            "s",
            "",
            "",
            "{kind: ListenerSet, name: ls, namespace: infra}",
            "x.ls.example.com",
            &[("", "/s")],
        ),
    );
    let mut run = Run::new();
    run.step("initial", &docs.inputs());
    docs.set("30-a.yaml", &a(&on("b"), "/a"));
    run.expect("a bound to listener b only", &docs.inputs(), true);
    docs.set("20-gw.yaml", &gw_allows_sets(LISTENER_A));
    let s = run.changed_step("listener b removed", &docs.inputs());
    assert!(s.full.is_some() || s.attachment_reused, "{s:?}");
    docs.set(
        "20-gw.yaml",
        &gw_allows_sets(&format!("{LISTENER_A}{LISTENER_B}")),
    );
    run.changed_step("listener b back", &docs.inputs());
    docs.set("21-ls.yaml", &ls(9090, "t"));
    let s = run.changed_step("the set's listener renamed", &docs.inputs());
    assert!(s.full.is_some() || s.attachment_reused, "{s:?}");
    docs.set("30-a.yaml", &a(&on("a"), "/a2"));
    run.expect("a on listener a", &docs.inputs(), true);
    docs.set("21-ls.yaml", &ls(9090, "s").replace("tier: edge", "tier: core"));
    let s = run.changed_step("the set relabelled", &docs.inputs());
    assert!(s.full.is_some() || s.attachment_reused, "{s:?}");
    docs.set("20-gw.yaml", &gw_allows_sets(LISTENER_B));
    let s = run.changed_step("listener a replaced by b", &docs.inputs());
    assert!(s.full.is_some() || s.attachment_reused, "{s:?}");
    docs.remove("21-ls.yaml");
    run.changed_step("the set removed", &docs.inputs());
    docs.remove("20-gw.yaml");
    run.changed_step("the Gateway removed", &docs.inputs());
    docs.set("30-a.yaml", &a(&on("a"), "/a3"));
    run.step("a edited without a Gateway", &docs.inputs());
    docs.set("20-gw.yaml", &gw_allows_sets(LISTENER_A));
    run.changed_step("the Gateway back", &docs.inputs());
}

// ---------------------------------------------------------------------
// STRICT: policy errors made after attaching
// ---------------------------------------------------------------------

/// Under STRICT, a listener policy whose header the fake Envoy refuses is
/// blamed with an error naming the virtual host it was placed on, which a
/// route's hostname decides: the route's hostname edited (its head kept,
/// the attachment reused), the policy's report must follow.
#[test]
fn strict_blame_follows_route_hostnames() {
    let mut docs = Docs::default();
    base(&mut docs);
    docs.set(
        "20-gw.yaml",
        &gateway("infra", "gw", &format!("{LISTENER_A}{LISTENER_B}")),
    );
    docs.set(
        "25-p-l.yaml",
        &policy(
            "infra",
            "refused",
            "",
            &target("Gateway", "gw", "a"),
            &set_header(refuses_header::REFUSED),
        ),
    );
    docs.set(
        "25-p-b.yaml",
        &policy(
            "app",
            "on-b",
            "",
            &target("HTTPRoute", "b", ""),
            &set_header("x-fine"),
        ),
    );
    let a = |host: &str, path: &str| route("HTTPRoute", "app", "a", "", "", ON_GW, host, &[("", path)]);
    docs.set("30-a.yaml", &a("one.example.com", "/a"));
    let b = |labels: &str, path: &str| {
        let on_b = "{name: gw, namespace: infra, sectionName: b}";
        route(
            "HTTPRoute",
            "app",
            "b",
            labels,
            "",
            on_b,
            "b.example.com",
            &[("", path)],
        )
    };
    docs.set("30-b.yaml", &b("", "/b"));
    let mut run = Run::strict();
    run.step("initial", &docs.inputs());
    let before = policy_report(run.out(), "refused");
    assert!(before.contains("rejected by Envoy"), "{before}");
    docs.set("30-a.yaml", &a("two.example.com", "/a"));
    run.expect("a's hostname edited", &docs.inputs(), true);
    let after = policy_report(run.out(), "refused");
    assert_ne!(before, after, "the blamed virtual host is named");
    docs.set("30-a.yaml", &a("two.example.com", "/a2"));
    // a's virtual host is fenced: its path shows nowhere.
    let s = run.step("a's path edited", &docs.inputs());
    assert!(s.full.is_none() && s.attachment_reused, "{s:?}");
    docs.set("30-b.yaml", &b("", "/b2"));
    run.expect("b's path edited", &docs.inputs(), true);
    docs.set("30-a.yaml", &a("one.example.com", "/a"));
    run.expect("a's hostname back", &docs.inputs(), true);
    // A panic in an incremental call: made again in full from no memo.
    docs.set("30-b.yaml", &b("", "/b3"));
    run.step_with("b edited, the validator panics", &docs.inputs(), true);
    docs.set("30-a.yaml", &a("three.example.com", "/a"));
    run.expect("a's hostname edited after the recovery", &docs.inputs(), true);
    docs.set("30-b.yaml", &b("tier: gold", "/b3"));
    run.step_with("b relabelled, the validator panics", &docs.inputs(), true);
    docs.set("30-b.yaml", &b("tier: gold", "/b4"));
    run.expect("b edited after the recovery", &docs.inputs(), true);
}

// ---------------------------------------------------------------------
// Precedence by creation time, settings
// ---------------------------------------------------------------------

/// Policies with creation times reaching the same rules (the older wins
/// each feature, the other is told, naming the route); the routes' heads
/// and bodies edited; the settings changed between route edits.
#[test]
fn creation_times_conflicts_and_settings() {
    let mut docs = Docs::default();
    base(&mut docs);
    let created = |t: u8| format!(", creationTimestamp: \"2026-01-0{t}T00:00:00Z\"");
    docs.set(
        "25-p-old.yaml",
        &policy(
            "app",
            "z-old",
            &created(1),
            &selector("HTTPRoute", "tier: gold"),
            &set_header("x-old"),
        ),
    );
    docs.set(
        "25-p-new.yaml",
        &policy(
            "app",
            "a-new",
            &created(2),
            &target("HTTPRoute", "a", ""),
            &set_header("x-new"),
        ),
    );
    docs.set(
        "25-p-rule.yaml",
        &policy(
            "app",
            "m-rule",
            &created(3),
            &target("HTTPRoute", "a", "r"),
            &set_header("x-rule"),
        ),
    );
    docs.set(
        "25-p-none.yaml",
        &policy(
            "app",
            "n-none",
            "",
            &target("HTTPRoute", "b", ""),
            &set_header("x-none"),
        ),
    );
    let a = |labels: &str, rule: &str, path: &str, created_at: &str| {
        route(
            "HTTPRoute",
            "app",
            "a",
            labels,
            created_at,
            ON_GW,
            "a.example.com",
            &[(rule, path)],
        )
    };
    docs.set("30-a.yaml", &a("tier: gold", "r", "/a", ""));
    docs.set("30-b.yaml", &http("b", "tier: gold", &[("", "/b")]));
    let mut run = Run::new();
    run.step("initial", &docs.inputs());
    docs.set("30-a.yaml", &a("tier: gold", "r", "/a", &created(5)));
    let s = run.step("a given a creation time", &docs.inputs());
    assert!(s.full.is_none() && s.attachment_reused, "{s:?}");
    docs.set("30-a.yaml", &a("tier: gold", "other", "/a", &created(5)));
    run.expect("a's rule renamed", &docs.inputs(), false);
    docs.set("30-a.yaml", &a("tier: gold", "other", "/a2", &created(5)));
    run.expect("a's path edited", &docs.inputs(), true);
    run.settings.status_address = "10.0.0.9".into();
    let s = run.changed_step("settings: status address", &docs.inputs());
    assert_eq!(s.full, Some(Full::Context), "{s:?}");
    docs.set("30-b.yaml", &http("b", "", &[("", "/b")]));
    run.expect("b leaves the selector", &docs.inputs(), false);
    run.settings.controller_name = "other.dev/controller".into();
    let s = run.changed_step("settings: controller name", &docs.inputs());
    assert_eq!(s.full, Some(Full::Context), "{s:?}");
    run.settings.controller_name = Settings::default().controller_name;
    run.changed_step("settings: controller name back", &docs.inputs());
    docs.set("30-a.yaml", &a("tier: gold", "r", "/a2", &created(5)));
    run.expect("a's rule named r again", &docs.inputs(), false);
    docs.set("30-b.yaml", &http("b", "", &[("", "/b2")]));
    run.expect("b edited", &docs.inputs(), true);
}

/// Routes no policy may reach added, removed and renamed beside routes
/// policies reach, in the same steps as edits that change what those
/// reached routes report (their Gateways): the policies' reports read
/// the reached routes by position in the route order, which the added and
/// removed routes shift.
#[test]
fn unreached_routes_added_and_removed_beside_reached_ones() {
    let mut docs = Docs::default();
    base(&mut docs);
    docs.set("20-gw2.yaml", &gateway("app", "gw2", LISTENER_B));
    docs.set(
        "25-p-m.yaml",
        &policy(
            "app",
            "on-m",
            "",
            &target("HTTPRoute", "m", ""),
            &set_header("x-m"),
        ),
    );
    docs.set(
        "25-p-sel.yaml",
        &policy(
            "app",
            "sel",
            "",
            &selector("GRPCRoute", "tier: gold"),
            &set_header("x-sel"),
        ),
    );
    let r = |kind: &str, ns: &str, name: &str, labels: &str, parents: &str, m: &str| {
        route(
            kind,
            ns,
            name,
            labels,
            "",
            parents,
            &format!("{name}.example.com"),
            &[("", m)],
        )
    };
    let (gw, gw2, nowhere) = (ON_GW, "{name: gw2}", "{name: none}");
    docs.set("30-m.yaml", &r("HTTPRoute", "app", "m", "", gw, "/m"));
    docs.set("30-n.yaml", &r("HTTPRoute", "app", "n", "", gw, "/n"));
    docs.set("30-g.yaml", &r("GRPCRoute", "app", "g", "tier: gold", gw, "Get"));
    let mut run = Run::new();
    run.step("initial", &docs.inputs());
    docs.set("31-a.yaml", &r("HTTPRoute", "app", "a", "", gw, "/a"));
    docs.set("30-m.yaml", &r("HTTPRoute", "app", "m", "", gw2, "/m"));
    run.changed_step("a added first, m moved to gw2", &docs.inputs());
    docs.set("30-g.yaml", &r("GRPCRoute", "app", "g", "tier: gold", gw2, "Get"));
    docs.set("31-b.yaml", &r("HTTPRoute", "app", "b", "", gw, "/b"));
    run.changed_step("b added, g moved to gw2", &docs.inputs());
    docs.remove("31-a.yaml");
    docs.set("30-m.yaml", &r("HTTPRoute", "app", "m", "", nowhere, "/m"));
    run.changed_step("a removed, m detached", &docs.inputs());
    docs.set("31-a.yaml", &r("HTTPRoute", "other", "a", "", gw, "/a"));
    docs.set("30-m.yaml", &r("HTTPRoute", "app", "m", "", gw, "/m"));
    run.changed_step("a added in another namespace, m on gw", &docs.inputs());
    docs.set("31-n.yaml", &r("HTTPRoute", "app", "n", "", gw2, "/n2"));
    docs.set("30-g.yaml", &r("GRPCRoute", "app", "g", "tier: gold", gw, "Get"));
    run.changed_step("a duplicate n added, g back on gw", &docs.inputs());
    docs.set(
        "31-h.yaml",
        &r("GRPCRoute", "other", "h", "tier: gold", gw, "Get"),
    );
    docs.set("30-m.yaml", &r("HTTPRoute", "app", "m", "", gw2, "/m"));
    run.changed_step("a GRPCRoute in another namespace, m on gw2", &docs.inputs());
    docs.set("31-i.yaml", &r("GRPCRoute", "app", "i", "", gw, "List"));
    run.expect("a GRPCRoute the selector may reach", &docs.inputs(), false);
    docs.remove("30-n.yaml");
    docs.set("30-n2.yaml", &r("HTTPRoute", "app", "n2", "", gw, "/n"));
    docs.set("30-m.yaml", &r("HTTPRoute", "app", "m", "", gw, "/m"));
    run.changed_step("n renamed n2, m on gw", &docs.inputs());
    docs.set("30-m.yaml", &r("HTTPRoute", "app", "m", "", gw2, "/m2"));
    run.expect("m on gw2", &docs.inputs(), true);
    docs.remove("30-m.yaml");
    run.expect("m removed", &docs.inputs(), false);
    docs.set("30-m.yaml", &r("HTTPRoute", "app", "m", "", gw, "/m"));
    run.expect("m back", &docs.inputs(), false);
}

// ---------------------------------------------------------------------
// What attaching adds to policies' errors and warnings
// ---------------------------------------------------------------------

/// Policies whose targets attaching refuses or warns about (another
/// namespace, a kind that cannot be targeted, a missing route, a missing
/// rule name, a selector selecting nothing), and a sectionName matching
/// two rules of one route; routes in `default` written with and without
/// their namespace; body and head edits.
#[test]
fn attach_errors_warnings_and_defaulted_namespaces() {
    let mut docs = Docs::default();
    base(&mut docs);
    docs.set("10-svc-default.yaml", &service("default", "web", 80));
    let ns_target =
        "  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: a, namespace: app}]\n";
    docs.set(
        "25-p-other-ns.yaml",
        &policy("default", "other-ns", "", ns_target, &set_header("x-1")),
    );
    let svc_target = "  targetRefs: [{group: \"\", kind: Service, name: web}]\n";
    docs.set(
        "25-p-svc.yaml",
        &policy("default", "svc", "", svc_target, &set_header("x-2")),
    );
    docs.set(
        "25-p-missing.yaml",
        &policy(
            "default",
            "missing",
            "",
            &target("HTTPRoute", "gone", ""),
            &set_header("x-3"),
        ),
    );
    docs.set(
        "25-p-rule.yaml",
        &policy(
            "default",
            "rule-r",
            "",
            &target("HTTPRoute", "a", "r"),
            &set_header("x-4"),
        ),
    );
    docs.set(
        "25-p-sel.yaml",
        &policy(
            "default",
            "sel",
            "",
            &selector("GRPCRoute", "tier: gold"),
            &set_header("x-5"),
        ),
    );
    docs.set(
        "25-p-a.yaml",
        &policy(
            "default",
            "on-a",
            "",
            &target("HTTPRoute", "a", ""),
            &set_header("x-4"),
        ),
    );
    // `a` in namespace default: `ns` is ", namespace: default" or "".
    let a = |ns: &str, rules: &[(&str, &str)]| {
        let mut text = route("HTTPRoute", "default", "a", "", "", ON_GW, "a.example.com", rules);
        text = text.replace(", namespace: default,", &format!("{ns},"));
        text
    };
    docs.set("30-a.yaml", &a("", &[("r", "/one"), ("r", "/two")]));
    docs.set("30-b.yaml", &http("b", "", &[("", "/b")]));
    let mut run = Run::new();
    run.step("initial", &docs.inputs());
    docs.set(
        "30-a.yaml",
        &a(", namespace: default", &[("r", "/one2"), ("r", "/two")]),
    );
    run.expect("a's namespace written out, its path edited", &docs.inputs(), true);
    docs.set("30-a.yaml", &a("", &[("r", "/one2"), ("r", "/two2")]));
    run.expect(
        "a's namespace left out, its second path edited",
        &docs.inputs(),
        true,
    );
    docs.set("30-a.yaml", &a("", &[("s", "/one2"), ("r", "/two2")]));
    run.expect("a's first rule renamed: r is the second", &docs.inputs(), false);
    docs.set("30-a.yaml", &a("", &[("s", "/one3"), ("r", "/two2")]));
    run.expect("a's first path edited", &docs.inputs(), true);
    docs.set(
        "31-gone.yaml",
        &route(
            "HTTPRoute",
            "default",
            "gone",
            "",
            "",
            ON_GW,
            "g.example.com",
            &[("", "/g")],
        ),
    );
    run.expect("the missing route added", &docs.inputs(), false);
    docs.set("30-b.yaml", &http("b", "", &[("", "/b2")]));
    run.expect("b edited", &docs.inputs(), true);
}

// ---------------------------------------------------------------------
// A random walk over route heads, policies and extensions
// ---------------------------------------------------------------------

struct Walk {
    docs: Docs,
}

const KINDS: [&str; 2] = ["HTTPRoute", "GRPCRoute"];
const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const RULES: [&str; 3] = ["", "r", "s"];
const LABELS: [&str; 3] = ["", "tier: gold", "tier: gold, x: y"];

impl Walk {
    fn new(rng: &mut Rng) -> Self {
        let mut w = Walk {
            docs: Docs::default(),
        };
        base(&mut w.docs);
        w.docs.set("20-gw2.yaml", &gateway("app", "gw2", LISTENER_B));
        w.docs.set("11-svc-authz.yaml", &service("app", "authz", 80));
        w.docs.set("10-svc-other.yaml", &service("other", "web", 80));
        for i in 0..2 {
            w.extension(rng, i);
        }
        for i in 0..5 {
            w.policy(rng, i);
        }
        for i in 0..6 {
            w.route(rng, i);
        }
        w
    }

    fn extension(&mut self, rng: &mut Rng, i: usize) {
        let file = format!("22-ext-{i}.yaml");
        match rng.below(4) {
            0 => self.docs.remove(&file),
            1 => self
                .docs
                .set(&file, &extension("app", &format!("auth-{i}"), "nope", 80)),
            _ => self
                .docs
                .set(&file, &extension("app", &format!("auth-{i}"), "authz", 80)),
        }
    }

    fn policy(&mut self, rng: &mut Rng, i: usize) {
        let kind = KINDS[rng.below(2)];
        let targets = match rng.below(6) {
            0 => selector(kind, LABELS[1 + rng.below(2)]),
            1 => target(kind, NAMES[rng.below(4)], RULES[1 + rng.below(2)]),
            2 => target("Gateway", ["gw2", "gw3"][rng.below(2)], ""),
            _ => target(kind, NAMES[rng.below(4)], ""),
        };
        let body = match rng.below(6) {
            0 => ext_auth(&format!("auth-{}", rng.below(3))),
            1 => set_header("bad header"),
            2 => "  timeouts: {request: 5s}\n".to_string(),
            _ => set_header(["x-one", "x-two"][rng.below(2)]),
        };
        let meta = match rng.below(3) {
            0 => String::new(),
            t => format!(", creationTimestamp: \"2026-01-0{t}T00:00:00Z\""),
        };
        self.docs.set(
            &format!("25-p-{i}.yaml"),
            &policy("app", &format!("p-{i}"), &meta, &targets, &body),
        );
    }

    /// Route file `i`: a random kind, name (so duplicates), labels, rule
    /// names and count, Gateway and path.
    fn route(&mut self, rng: &mut Rng, i: usize) {
        let kind = KINDS[usize::from(rng.chance(25))];
        // Names and a namespace no policy targets, besides those they do.
        let name = ["a", "b", "c", "d", "e", "f"][rng.below(6)];
        let ns = ["app", "app", "other"][rng.below(3)];
        let n = 1 + rng.below(2);
        let ms: Vec<String> = (0..n)
            .map(|k| match kind {
                "GRPCRoute" => format!("M{}", rng.below(3) + k),
                _ => format!("/p{}", rng.below(3) + k),
            })
            .collect();
        let rules: Vec<(&str, &str)> = ms.iter().map(|m| (RULES[rng.below(3)], m.as_str())).collect();
        let parents = [
            "{name: gw, namespace: infra}",
            "{name: gw2}",
            "{name: gw2}, {name: gw, namespace: infra}",
        ][rng.below(3)];
        let text = route(
            kind,
            ns,
            name,
            LABELS[rng.below(3)],
            "",
            parents,
            &format!("h{}.example.com", rng.below(3)),
            &rules,
        );
        self.docs.set(&format!("30-r-{i}.yaml"), &text);
    }

    /// Keeps route file `i`'s head and edits its paths only.
    fn route_body(&mut self, rng: &mut Rng, i: usize) -> bool {
        let file = format!("30-r-{i}.yaml");
        let Some(text) = self.docs.files.get(&file) else {
            return false;
        };
        let to = format!("/q{}", rng.below(4));
        let edited = text.replacen("value: /p", &format!("value: {to}"), 1);
        let edited = if edited == *text {
            text.replacen("method: M", &format!("method: Q{}", rng.below(4)), 1)
        } else {
            edited
        };
        self.docs.set(&file, &edited);
        true
    }

    fn edit(&mut self, rng: &mut Rng) -> String {
        match rng.below(20) {
            0 => {
                let i = rng.below(2);
                self.extension(rng, i);
                format!("extension auth-{i}")
            }
            1 => {
                let port = [80, 81][rng.below(2)];
                self.docs.set("11-svc-authz.yaml", &service("app", "authz", port));
                format!("Service authz port {port}")
            }
            2 => {
                let i = rng.below(5);
                self.policy(rng, i);
                format!("policy p-{i}")
            }
            3 => {
                let listeners = [LISTENER_A, LISTENER_B][rng.below(2)];
                self.docs.set("20-gw3.yaml", &gateway("app", "gw3", listeners));
                "Gateway gw3 set".into()
            }
            4 => {
                // Moved to another file (source, input order).
                let i = rng.below(6);
                let (from, to) = (format!("30-r-{i}.yaml"), format!("31-r-{i}.yaml"));
                let (from, to) = if self.docs.files.contains_key(&from) {
                    (from, to)
                } else {
                    (to, from)
                };
                match self.docs.files.remove(&from) {
                    Some(text) => {
                        self.docs.set(&to, &text);
                        format!("route file {from} moved to {to}")
                    }
                    None => "nothing".into(),
                }
            }
            5 => {
                let i = rng.below(6);
                self.docs.remove(&format!("30-r-{i}.yaml"));
                format!("route {i} removed")
            }
            6..12 => {
                let i = rng.below(6);
                if self.route_body(rng, i) {
                    format!("route {i}'s paths")
                } else {
                    self.route(rng, i);
                    format!("route {i} set")
                }
            }
            _ => {
                let i = rng.below(6);
                self.route(rng, i);
                format!("route {i} set")
            }
        }
    }
}

fn walk(seed: u64, steps: usize, strict: bool) -> (usize, usize) {
    let mut rng = Rng(seed);
    let mut w = Walk::new(&mut rng);
    let mut run = if strict { Run::strict() } else { Run::new() };
    let mut history = Vec::new();
    let mut reused = 0;
    run.step(&format!("seed {seed:#x} initial"), &w.docs.inputs());
    let mut incremental = 0;
    for step in 0..steps {
        let what = w.edit(&mut rng);
        history.push(what.clone());
        let inputs = w.docs.inputs();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run.step(&format!("seed {seed:#x} step {step}: {what}"), &inputs)
        }));
        match result {
            Ok(s) => {
                incremental += usize::from(s.full.is_none());
                reused += usize::from(s.attachment_reused);
            }
            Err(e) => {
                eprintln!("seed {seed:#x} failed at step {step}; edits: {history:#?}");
                for (name, text) in &w.docs.files {
                    eprintln!("--- {name}\n{text}");
                }
                std::panic::resume_unwind(e);
            }
        }
    }
    (incremental, reused)
}

/// `PORTCULLIS_STANDING_SEEDS` and `PORTCULLIS_STANDING_STEPS` make it
/// longer (the default: 6 seeds of 60 steps).
#[test]
fn random_walk_over_route_heads_policies_and_extensions() {
    let seeds: u64 = std::env::var("PORTCULLIS_STANDING_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let steps = std::env::var("PORTCULLIS_STANDING_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let (mut inc, mut reused) = (0, 0);
    for i in 1..=seeds {
        let seed = 0x57A4_D100_0000_0000 ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let (a, b) = walk(seed, steps, i % 3 == 0);
        inc += a;
        reused += b;
    }
    eprintln!("{inc} incremental steps, {reused} reusing the attachment");
    assert!(inc > 0 && reused > 0, "{inc} incremental, {reused} reused");
}
