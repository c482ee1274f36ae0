//! STRICT mode against the real Envoy (`envoy --mode validate` via
//! testkit): a clean configuration is left as it is; a route Envoy rejects
//! is isolated by bisection and replaced by the 500 keeping its match; the
//! result validates; an unavailable validator replaces nothing.

#[path = "support/real_envoy.rs"]
mod real_envoy;

use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption};
use envoy_types::pb::envoy::config::route::v3::route::Action;
use real_envoy::RealEnvoy;
use translate::strict::{Candidate, Validator, Verdict, check_gateway};

/// Stands for a validator that cannot run (no binary, timeouts).
struct Down;

impl Validator for Down {
    fn validate(&self, batch: &[Candidate]) -> Vec<Verdict> {
        batch
            .iter()
            .map(|_| Verdict::Unavailable("envoy: not found".into()))
            .collect()
    }
}

fn fixture(name: &str) -> api::Inputs {
    let path = format!("{}/tests/fixtures/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("fixture");
    let input = text.split("\n# ---- expected output").next().unwrap_or(&text);
    api::loader::load_str(&path, input).inputs
}

/// The real Envoy accepts `gw` as a static bootstrap (the check every
/// STRICT outcome ends with).
fn assert_envoy_accepts(gw: &translate::GatewayXds, key: &str, what: &str) {
    let bootstrap = translate::output::bootstrap::static_bootstrap(gw, key, &Default::default());
    testkit::envoy::validate(&bootstrap).expect(what);
}

fn all_routes(gw: &translate::GatewayXds) -> Vec<envoy_types::pb::envoy::config::route::v3::Route> {
    gw.route_configurations()
        .into_iter()
        .flat_map(|rc| rc.virtual_hosts)
        .flat_map(|vh| vh.routes)
        .collect()
}

#[test]
fn clean_configuration_is_unchanged_and_costs_one_call_per_route_config() {
    let inputs = fixture("ordering-across-routes");
    let settings = translate::Settings::default();
    let standard = translate::translate(&inputs, &settings);
    let envoy = RealEnvoy::default();
    let strict = translate::translate_with(&inputs, &settings, Some(&envoy));
    assert_eq!(strict, standard);
    let route_configs: usize = standard.gateways.values().map(|g| g.routes.len()).sum();
    // One skeleton per Gateway plus one per route configuration.
    assert_eq!(envoy.calls(), standard.gateways.len() + route_configs);
}

#[test]
fn a_route_envoy_rejects_is_isolated_and_replaced() {
    let inputs = fixture("ordering-across-routes");
    let out = translate::translate(&inputs, &translate::Settings::default());
    let (key, gw) = out.gateways.iter().next().expect("a gateway");
    let mut gw = translate::GatewayXds::clone(gw);
    let names: Vec<String> = all_routes(&gw).iter().map(|r| r.name.clone()).collect();
    assert!(names.len() >= 6, "{names:?}");
    // Something only Envoy catches here: a header name Envoy refuses (CR/LF),
    // written straight into the xDS (STANDARD would have caught it in the
    // HTTPRoute).
    let victim = names[names.len() / 2].clone();
    let original_match = gw.routes[0].edit(|rc| {
        let route = rc
            .virtual_hosts
            .iter_mut()
            .flat_map(|vh| vh.routes.iter_mut())
            .find(|r| r.name == victim)
            .expect("victim");
        route.request_headers_to_add.push(HeaderValueOption {
            header: Some(HeaderValue {
                key: "bad\nheader".into(),
                value: "x".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        route.r#match.clone()
    });
    let envoy = RealEnvoy::default();
    let findings = check_gateway(key, &mut gw, &envoy);
    assert_eq!(
        findings
            .rejected_routes
            .iter()
            .map(|r| r.route_name.as_str())
            .collect::<Vec<_>>(),
        vec![victim.as_str()]
    );
    assert!(
        findings.rejected_routes[0]
            .message
            .to_lowercase()
            .contains("header"),
        "{}",
        findings.rejected_routes[0].message
    );
    assert!(
        findings.replaced_configs.is_empty() && findings.problems.is_empty(),
        "{findings:?}"
    );
    // Bisection: far fewer calls than one per route.
    let calls = envoy.calls();
    assert!(
        calls < 2 + 2 * names.len(),
        "{calls} calls for {} routes",
        names.len()
    );

    let after = all_routes(&gw);
    assert_eq!(after.len(), names.len());
    for r in &after {
        let replaced = is_500(r);
        assert_eq!(replaced, r.name == victim, "{}", r.name);
        if r.name == victim {
            assert_eq!(r.r#match, original_match, "the replaced route keeps its match");
            assert!(r.request_headers_to_add.is_empty());
        }
    }
    assert_envoy_accepts(&gw, key, "the replaced configuration is accepted by Envoy");
}

/// A Gateway of a generated configuration with several virtual hosts.
fn generated_gateway() -> (String, translate::GatewayXds) {
    let text = testkit::generate::manifests(testkit::generate::Shape::with_routes(12));
    let inputs = api::loader::load_str("generated.yaml", &text).inputs;
    let out = translate::translate(&inputs, &translate::Settings::default());
    let (key, gw) = out
        .gateways
        .into_iter()
        .find(|(_, g)| {
            g.routes
                .first()
                .is_some_and(|rc| rc.decode().virtual_hosts.len() >= 2)
        })
        .expect("a Gateway with two virtual hosts");
    (key, std::sync::Arc::unwrap_or_clone(gw))
}

/// Sets the match of route `ri` of the first virtual host: a path regex
/// and, optionally, one exact header condition.
fn set_match(gw: &mut translate::GatewayXds, ri: usize, regex: &str, header: Option<&str>) {
    use envoy_types::pb::envoy::config::route::v3::HeaderMatcher;
    use envoy_types::pb::envoy::config::route::v3::header_matcher::HeaderMatchSpecifier;
    use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
    use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatcher, StringMatcher, string_matcher};
    gw.routes[0].edit(|rc| {
        if let Some(m) = rc.virtual_hosts[0].routes[ri].r#match.as_mut() {
            m.path_specifier = Some(PathSpecifier::SafeRegex(RegexMatcher {
                regex: regex.into(),
                ..Default::default()
            }));
            m.headers = header
                .map(|name| HeaderMatcher {
                    name: name.into(),
                    header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
                        match_pattern: Some(string_matcher::MatchPattern::Exact("1".into())),
                        ..Default::default()
                    })),
                    ..Default::default()
                })
                .into_iter()
                .collect();
        }
    });
}

fn path_prefix(r: &envoy_types::pb::envoy::config::route::v3::Route) -> Option<&str> {
    use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
    match r.r#match.as_ref()?.path_specifier.as_ref()? {
        PathSpecifier::Prefix(p) => Some(p),
        _ => None,
    }
}

fn is_500(r: &envoy_types::pb::envoy::config::route::v3::Route) -> bool {
    matches!(&r.action, Some(Action::DirectResponse(d)) if d.status == 500)
}

#[test]
fn a_rejected_match_is_widened_in_place_and_its_host_keeps_serving() {
    let (key, mut gw) = generated_gateway();
    let before = gw.routes[0].decode();
    assert!(
        before.virtual_hosts[0].routes.len() >= 3,
        "{:?}",
        before.virtual_hosts[0]
    );
    // A backreference (RE2 has none: the real Envoy refuses it). The 500
    // keeping that match is still refused; the route keeps its place with
    // the prefix every path it matched starts with.
    set_match(&mut gw, 1, "/r/(a)\\1", None);
    let envoy = RealEnvoy::default();
    let findings = check_gateway(&key, &mut gw, &envoy);
    assert!(findings.replaced_configs.is_empty(), "{findings:?}");
    assert!(findings.replaced_virtual_hosts.is_empty(), "{findings:?}");
    let after = gw.routes[0].decode();
    let (vh, was) = (&after.virtual_hosts[0], &before.virtual_hosts[0]);
    assert_eq!(
        findings
            .rejected_routes
            .iter()
            .map(|r| r.route_name.as_str())
            .collect::<Vec<_>>(),
        [vh.routes[1].name.as_str()]
    );
    assert_eq!(
        findings.widened_matches,
        [translate::strict::WidenedMatch {
            route_name: vh.routes[1].name.clone(),
            prefix: Some("/r/".into()),
            everything: false,
        }]
    );
    assert_eq!(vh.routes.len(), was.routes.len());
    assert_eq!(path_prefix(&vh.routes[1]), Some("/r/"));
    assert!(is_500(&vh.routes[1]));
    assert_eq!(vh.routes[0], was.routes[0], "the routes before it are untouched");
    assert_eq!(vh.routes[2..], was.routes[2..], "and those after it");
    assert_eq!(
        after.virtual_hosts[1..],
        before.virtual_hosts[1..],
        "the other hosts are untouched"
    );
    assert_envoy_accepts(&gw, &key, "the guarded configuration is accepted by Envoy");
}

#[test]
fn a_rejected_condition_beside_no_regex_widens_the_match_to_its_path_prefix() {
    let (key, mut gw) = generated_gateway();
    let before = gw.routes[0].decode();
    // A header name Envoy refuses (a line break): dropping regexes keeps
    // it, so the second step drops every condition but the path prefix.
    set_match(&mut gw, 1, "/s/(a)\\1", Some("x-bad\nname"));
    let envoy = RealEnvoy::default();
    let findings = check_gateway(&key, &mut gw, &envoy);
    assert!(findings.replaced_virtual_hosts.is_empty(), "{findings:?}");
    let after = gw.routes[0].decode();
    let vh = &after.virtual_hosts[0];
    assert_eq!(path_prefix(&vh.routes[1]), Some("/s/"));
    assert_eq!(
        findings
            .widened_matches
            .iter()
            .map(|w| w.everything)
            .collect::<Vec<_>>(),
        [true],
        "widened in the second step"
    );
    assert!(
        vh.routes[1]
            .r#match
            .as_ref()
            .is_some_and(|m| m.headers.is_empty())
    );
    assert!(is_500(&vh.routes[1]));
    assert_eq!(vh.routes[2..], before.virtual_hosts[0].routes[2..]);
    assert_envoy_accepts(&gw, &key, "the guarded configuration is accepted by Envoy");
}

/// Stands for an Envoy that refuses a path regex containing `refused`
/// (as the real one refuses constructs STANDARD cannot know of); a prefix
/// with that text is fine.
struct RefusesRegexPaths;

impl Validator for RefusesRegexPaths {
    fn validate(&self, batch: &[Candidate]) -> Vec<Verdict> {
        use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
        batch
            .iter()
            .map(|c| {
                let Some(xds) = &c.xds else {
                    return Verdict::Unavailable("no xDS".into());
                };
                let refused = xds.route_configurations().iter().any(|rc| {
                    rc.virtual_hosts.iter().flat_map(|vh| &vh.routes).any(|r| {
                        matches!(
                            r.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()),
                            Some(PathSpecifier::SafeRegex(re)) if re.regex.contains("refused")
                        )
                    })
                });
                if refused {
                    Verdict::Rejected("fake Envoy: this regex is refused".into())
                } else {
                    Verdict::Accepted
                }
            })
            .collect()
    }
}

#[test]
fn a_widened_match_is_reported_on_its_gateway_and_its_rule_replaced() {
    let inputs = api::loader::load_str(
        "widened.yaml",
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis}
spec: {controllerName: portcullis.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: portcullis
  listeners:
  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [a.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /a}}]
    filters: [{type: RequestRedirect, requestRedirect: {statusCode: 302, hostname: x.example.com}}]
  - matches: [{path: {type: RegularExpression, value: "/b/refused-[0-9]+"}}]
    filters: [{type: RequestRedirect, requestRedirect: {statusCode: 302, hostname: y.example.com}}]
"#,
    )
    .inputs;
    let settings = translate::Settings::default();
    let out = translate::translate_with(&inputs, &settings, Some(&RefusesRegexPaths));
    let widened: Vec<&str> = out
        .diagnostics
        .iter()
        .filter(|d| d.message.contains("was rejected for its match"))
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(widened.len(), 1, "{:#?}", out.diagnostics);
    assert!(
        widened[0].contains("under path prefix \"/b/refused-\" (its regular expressions dropped)"),
        "{}",
        widened[0]
    );
    let route = out
        .status
        .iter()
        .find(|s| s.kind == "HTTPRoute" && s.metadata.name == "r")
        .expect("the route's status");
    let status = translate::status::Timed::new(&route.status, &out.transition_time)
        .to_json()
        .to_string();
    assert!(
        status.contains(
            "Replaced Rule (1): spec.rules[1]: rejected by Envoy: fake Envoy: this regex is refused"
        ),
        "{status}"
    );
    let (key, gw) = out.gateways.iter().next().expect("the Gateway");
    let routes = all_routes(gw);
    assert_eq!(routes.len(), 2, "{routes:#?}");
    assert!(
        routes
            .iter()
            .any(|r| path_prefix(r) == Some("/b/refused-") && is_500(r))
    );
    assert_eq!(
        routes.iter().filter(|r| !is_500(r)).count(),
        1,
        "the other rule serves: {routes:#?}"
    );
    assert_envoy_accepts(gw, key, "the result is accepted by Envoy");
}

#[test]
fn a_route_no_widening_fixes_fences_only_its_virtual_host() {
    use envoy_types::pb::envoy::config::route::v3::Decorator;
    let (key, mut gw) = generated_gateway();
    let before = gw.routes[0].decode();
    // An empty decorator operation (Envoy requires one): the 500 keeps the
    // route's decorator and no match widening removes it, so its virtual
    // host becomes a catch-all 500.
    gw.routes[0].edit(|rc| {
        rc.virtual_hosts[0].routes[0].decorator = Some(Decorator {
            operation: String::new(),
            ..Default::default()
        });
    });
    let envoy = RealEnvoy::default();
    let findings = check_gateway(&key, &mut gw, &envoy);
    assert!(findings.replaced_configs.is_empty(), "{findings:?}");
    let fenced: Vec<&str> = findings
        .replaced_virtual_hosts
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(fenced, [before.virtual_hosts[0].name.as_str()]);
    let after = gw.routes[0].decode();
    let vh = &after.virtual_hosts[0];
    assert_eq!(
        vh.domains, before.virtual_hosts[0].domains,
        "the fenced host keeps its domains"
    );
    assert_eq!(vh.routes.len(), 1);
    assert!(is_500(&vh.routes[0]));
    assert_eq!(
        after.virtual_hosts[1..],
        before.virtual_hosts[1..],
        "the other hosts are untouched"
    );
    assert_envoy_accepts(&gw, &key, "the fenced configuration is accepted by Envoy");
}

#[test]
fn a_domain_envoy_rejects_drops_only_that_host() {
    // STANDARD refuses such a hostname (`hostname::route_hostname_problems`),
    // so the domain is written into the xDS directly: this exercises the
    // STRICT path for whatever reaches a virtual host's domains unchecked.
    let (key, mut gw) = generated_gateway();
    let before = gw.routes[0].decode();
    let rc_name = before.name.clone();
    let bad_host = before.virtual_hosts[0].name.clone();
    gw.routes[0].edit(|rc| rc.virtual_hosts[0].domains = vec!["a\nb.example.com".into()]);
    let envoy = RealEnvoy::default();
    let findings = check_gateway(&key, &mut gw, &envoy);
    assert!(
        findings.replaced_configs.is_empty(),
        "the route configuration {rc_name} must not be replaced whole: {findings:?}"
    );
    assert_eq!(findings.dropped_domains.len(), 1, "{findings:?}");
    assert_eq!(findings.dropped_domains[0].virtual_host, bad_host);
    assert_eq!(findings.dropped_domains[0].domain, "a\nb.example.com");
    let after = gw.routes[0].decode();
    assert_eq!(
        after.virtual_hosts[..],
        before.virtual_hosts[1..],
        "the host left without a domain is removed, the others are untouched"
    );
    assert_envoy_accepts(&gw, &key, "the result is accepted by Envoy");
}

#[test]
fn a_bad_domain_beside_good_ones_is_dropped_and_its_host_keeps_serving() {
    let (key, mut gw) = generated_gateway();
    let before = gw.routes[0].decode();
    let good = before.virtual_hosts[0].domains[0].clone();
    gw.routes[0].edit(|rc| {
        rc.virtual_hosts[0].domains = vec![good.clone(), "x\0y.example.com".into()];
    });
    let envoy = RealEnvoy::default();
    let findings = check_gateway(&key, &mut gw, &envoy);
    assert!(findings.replaced_configs.is_empty(), "{findings:?}");
    assert!(findings.replaced_virtual_hosts.is_empty(), "{findings:?}");
    let dropped: Vec<&str> = findings
        .dropped_domains
        .iter()
        .map(|d| d.domain.as_str())
        .collect();
    assert_eq!(dropped, ["x\0y.example.com"]);
    assert_eq!(
        gw.routes[0].decode(),
        before,
        "only the rejected domain is gone: the host keeps its routes on its valid domain"
    );
    assert_envoy_accepts(&gw, &key, "the result is accepted by Envoy");
}

#[test]
fn a_bad_domain_on_a_host_with_a_bad_route_drops_the_domain_and_guards_the_route() {
    use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
    use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher;
    let (key, mut gw) = generated_gateway();
    let before = gw.routes[0].decode();
    let good = before.virtual_hosts[0].domains[0].clone();
    gw.routes[0].edit(|rc| {
        rc.virtual_hosts[0].domains = vec![good.clone(), "x\ry.example.com".into()];
        if let Some(m) = rc.virtual_hosts[0].routes[0].r#match.as_mut() {
            m.path_specifier = Some(PathSpecifier::SafeRegex(RegexMatcher {
                regex: "(a)\\1".into(),
                ..Default::default()
            }));
        }
    });
    let envoy = RealEnvoy::default();
    let findings = check_gateway(&key, &mut gw, &envoy);
    assert!(findings.replaced_configs.is_empty(), "{findings:?}");
    let dropped: Vec<&str> = findings
        .dropped_domains
        .iter()
        .map(|d| d.domain.as_str())
        .collect();
    assert_eq!(dropped, ["x\ry.example.com"]);
    let after = gw.routes[0].decode();
    let vh = &after.virtual_hosts[0];
    assert_eq!(vh.domains, [good], "the valid domain stays");
    // The route's regex has no literal prefix: its guard is `/`, at its
    // place (the first), so the host answers 500 but keeps its routes.
    assert_eq!(vh.routes.len(), before.virtual_hosts[0].routes.len());
    assert_eq!(path_prefix(&vh.routes[0]), Some("/"));
    assert!(is_500(&vh.routes[0]));
    assert!(findings.replaced_virtual_hosts.is_empty(), "{findings:?}");
    assert_eq!(after.virtual_hosts[1..], before.virtual_hosts[1..]);
    assert_envoy_accepts(&gw, &key, "the result is accepted by Envoy");
}

#[test]
fn hosts_that_only_fail_together_replace_the_route_configuration() {
    let (key, mut gw) = generated_gateway();
    let rc_name = gw.routes[0].name.clone();
    // Two virtual hosts with one domain: each is fine alone.
    gw.routes[0].edit(|rc| rc.virtual_hosts[1].domains = rc.virtual_hosts[0].domains.clone());
    let envoy = RealEnvoy::default();
    let findings = check_gateway(&key, &mut gw, &envoy);
    assert_eq!(findings.replaced_configs.len(), 1, "{findings:?}");
    assert_eq!(findings.replaced_configs[0].0, rc_name);
    assert!(findings.replaced_configs[0].1.contains("unique"), "{findings:?}");
    let after = gw.routes[0].decode();
    let routes: Vec<_> = after.virtual_hosts.iter().flat_map(|v| &v.routes).collect();
    assert_eq!(routes.len(), 1);
    assert!(is_500(routes[0]));
    assert_envoy_accepts(&gw, &key, "the replaced configuration is accepted by Envoy");
}

/// The real Envoy with the cache a serving validator keeps: content it
/// accepted once is not checked again.
#[derive(Default)]
struct Remembering {
    envoy: RealEnvoy,
    good: std::sync::Mutex<std::collections::HashSet<u64>>,
}

impl Validator for Remembering {
    fn validate(&self, batch: &[Candidate]) -> Vec<Verdict> {
        self.envoy.validate(batch)
    }
    fn known_good(&self, key: u64) -> bool {
        self.good.lock().is_ok_and(|g| g.contains(&key))
    }
    fn remember_good(&self, keys: &[u64]) {
        if let Ok(mut g) = self.good.lock() {
            g.extend(keys.iter().copied());
        }
    }
}

#[test]
fn a_host_level_rejection_with_every_route_known_good_terminates() {
    // An edit that only breaks the hosts (here one domain in two hosts)
    // while every route was accepted before leaves no route to bisect: the
    // bisection once pushed the empty set back for ever.
    let (key, mut gw) = generated_gateway();
    let validator = std::sync::Arc::new(Remembering::default());
    let findings = check_gateway(&key, &mut gw, validator.as_ref());
    assert!(findings.replaced_configs.is_empty(), "{findings:?}");
    gw.routes[0].edit(|rc| rc.virtual_hosts[1].domains = rc.virtual_hosts[0].domains.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    let v = validator.clone();
    std::thread::spawn(move || {
        let findings = check_gateway(&key, &mut gw, v.as_ref());
        let _ = tx.send((findings, gw));
    });
    let (findings, gw) = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the STRICT check must terminate");
    assert_eq!(findings.replaced_configs.len(), 1, "{findings:?}");
    assert!(
        findings.rejected_routes.is_empty(),
        "no route is to blame for a host-level rejection: {findings:?}"
    );
    assert_envoy_accepts(&gw, "gw", "the result is accepted by Envoy");
}

#[test]
fn an_unavailable_validator_replaces_nothing_and_says_so() {
    let inputs = fixture("ordering-across-routes");
    let settings = translate::Settings::default();
    let standard = translate::translate(&inputs, &settings);
    let out = translate::translate_with(&inputs, &settings, Some(&Down));
    assert_eq!(out.gateways, standard.gateways);
    assert!(out.replacements.is_empty());
    let env: Vec<&str> = out
        .diagnostics
        .iter()
        .filter(|d| d.message.ends_with("[environment]"))
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(env.len(), standard.gateways.len(), "{:?}", out.diagnostics);
    assert!(env[0].contains("envoy: not found"), "{env:?}");
}

#[test]
fn modes_parse_and_list_the_allowed_values() {
    use translate::strict::ReplacementMode;
    assert_eq!("STRICT".parse::<ReplacementMode>(), Ok(ReplacementMode::Strict));
    assert_eq!(
        "STANDARD".parse::<ReplacementMode>(),
        Ok(ReplacementMode::Standard)
    );
    let e = "Strict".parse::<ReplacementMode>().expect_err("case matters");
    assert_eq!(
        e.to_string(),
        "invalid route replacement mode \"Strict\": allowed values are STANDARD, STRICT"
    );
}

#[test]
fn envoy_reasons_are_stable_and_name_the_constraint() {
    let dump = "[2026-11-22 15:12:39.381][18892][critical][main] [source/server/config_validation/server.cc:76] error initializing configuration '/tmp/x-1.json': goo.gle/debugproto  \nstat_prefix: \"x\"\n: Proto constraint validation failed (RouteValidationError.RequestHeadersToAdd[0]: value length must be at least 1)\n";
    assert_eq!(
        translate::strict::envoy_reason(dump),
        "Proto constraint validation failed (RouteValidationError.RequestHeadersToAdd[0]: value length must be at least 1)"
    );
    let plain = "[2026-11-22][1][critical][main] [server.cc:76] error initializing configuration '/tmp/candidate-7.json': Invalid regex '(a)\\1': invalid escape sequence: \\1\n";
    assert_eq!(
        translate::strict::envoy_reason(plain),
        "Invalid regex '(a)\\1': invalid escape sequence: \\1"
    );
}
