//! The resident validator (Envoys fed over ADS) against the process one
//! (`envoy --mode validate`), both on the real Envoy: the same verdicts on
//! real STRICT candidates and on hand-broken ones, Envoy's reason in
//! rejections, recovery from a killed resident Envoy, and no Envoy left
//! once the validator is dropped.
//!
//! One test: it counts this process's Envoy children, which other tests
//! running beside it would disturb.

mod common;

use std::sync::{Arc, Mutex};

use envoy_types::pb::envoy::config::core::v3::{
    DataSource, HeaderValue, HeaderValueOption, address, data_source, socket_address,
};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route_match};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::secret;
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher;
use portcullis::validator::{Backend, EnvoyValidator, Options, ValidatorMetrics};
use translate::GatewayXds;
use translate::output::{BootstrapOptions, static_bootstrap};
use translate::strict::{Candidate, Validator, Verdict, check_gateway};

fn envoy() -> std::path::PathBuf {
    testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"))
}

fn validator(backend: Backend) -> EnvoyValidator {
    let options = Options {
        backend,
        parallelism: 2,
        ..Options::default()
    };
    EnvoyValidator::new(envoy(), options, ValidatorMetrics::default()).expect("validator")
}

/// Keeps the candidates the STRICT algorithm builds, answering through
/// the process validator.
struct Recording<'a> {
    inner: &'a EnvoyValidator,
    seen: Mutex<Vec<Candidate>>,
}

impl Validator for Recording<'_> {
    fn validate(&self, batch: &[Candidate]) -> Vec<Verdict> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.extend(batch.iter().cloned());
        }
        self.inner.validate(batch)
    }
}

fn fixture(name: &str) -> api::Inputs {
    let path = format!(
        "{}/../translate/tests/fixtures/{name}.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("fixture");
    let input = text.split("\n# ---- expected output").next().unwrap_or(&text);
    api::loader::load_str(&path, input).inputs
}

fn gateways(name: &str) -> Vec<(String, GatewayXds)> {
    translate::translate(&fixture(name), &translate::Settings::default())
        .gateways
        .into_iter()
        .map(|(key, gw)| (key, Arc::unwrap_or_clone(gw)))
        .collect()
}

fn candidate(label: &str, partial: GatewayXds) -> Candidate {
    Candidate {
        label: label.into(),
        bootstrap: static_bootstrap(&partial, "portcullis-strict", &BootstrapOptions::default()),
        xds: Some(Arc::new(partial)),
    }
}

fn partial(gw: &GatewayXds) -> GatewayXds {
    GatewayXds {
        clusters: Vec::new(),
        endpoints: Vec::new(),
        ..gw.clone()
    }
}

/// Edits the Gateway's first route (route configurations are kept encoded).
fn edit_first_route(
    gw: &mut GatewayXds,
    f: impl FnOnce(&mut envoy_types::pb::envoy::config::route::v3::Route),
) {
    let Some(rc) = gw
        .routes
        .iter_mut()
        .find(|rc| rc.decode().virtual_hosts.iter().any(|vh| !vh.routes.is_empty()))
    else {
        return;
    };
    rc.edit(|rc| {
        if let Some(r) = rc
            .virtual_hosts
            .iter_mut()
            .flat_map(|vh| vh.routes.iter_mut())
            .next()
        {
            f(r);
        }
    });
}

/// `base`'s partial xDS with a request header added to its first route.
fn with_header(base: &GatewayXds, key: &str, value: &str) -> GatewayXds {
    let mut gw = partial(base);
    edit_first_route(&mut gw, |r| {
        r.request_headers_to_add.push(HeaderValueOption {
            header: Some(HeaderValue {
                key: key.into(),
                value: value.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
    });
    gw
}

/// Candidates Envoy must reject, each with a word of the reason.
fn broken() -> Vec<(Candidate, &'static str)> {
    let mut out = Vec::new();
    let (_, base) = gateways("basic-http").into_iter().next().expect("a gateway");

    out.push((
        candidate(
            "header name with a newline",
            with_header(&base, "x-bad\nname", "v"),
        ),
        "",
    ));

    let mut gw = partial(&base);
    edit_first_route(&mut gw, |r| {
        if let Some(m) = &mut r.r#match {
            m.path_specifier = Some(route_match::PathSpecifier::SafeRegex(RegexMatcher {
                regex: "a(".into(),
                ..Default::default()
            }));
        }
    });
    out.push((candidate("invalid regex", gw), "missing )"));

    let mut gw = partial(&base);
    if let Some(l) = gw.listeners.first_mut()
        && let Some(fc) = l
            .filter_chains
            .first()
            .cloned()
            .or(l.default_filter_chain.clone())
    {
        // Two filter chains with the same match.
        l.filter_chains.push(fc.clone());
        l.filter_chains.push(fc);
    }
    out.push((candidate("duplicate filter chains", gw), ""));

    for (key, gw) in gateways("https-termination") {
        let mut gw = partial(&gw);
        for s in &mut gw.secrets {
            if let Some(secret::Type::TlsCertificate(c)) = &mut s.r#type {
                c.certificate_chain = Some(DataSource {
                    specifier: Some(data_source::Specifier::InlineString("not a certificate".into())),
                    ..Default::default()
                });
            }
        }
        out.push((candidate(&format!("{key}: bad certificate"), gw), ""));
    }
    out
}

/// Real STRICT candidates: the algorithm's own, on fixtures, one of them
/// with a poisoned route (so that bisection candidates appear too).
fn real(process: &EnvoyValidator) -> Vec<Candidate> {
    let recording = Recording {
        inner: process,
        seen: Mutex::new(Vec::new()),
    };
    for name in [
        "basic-http",
        "ordering-across-routes",
        "https-termination",
        "grpcroute-basic",
        "filter-request-header-modifier",
    ] {
        for (key, mut gw) in gateways(name) {
            check_gateway(&key, &mut gw, &recording);
        }
    }
    for (key, mut gw) in gateways("ordering-across-routes") {
        edit_first_route(&mut gw, |r| {
            if let Some(m) = &mut r.r#match {
                m.path_specifier = Some(route_match::PathSpecifier::SafeRegex(RegexMatcher {
                    regex: "a{1000}".into(),
                    ..Default::default()
                }));
            }
        });
        check_gateway(&key, &mut gw, &recording);
    }
    let mut seen = recording.seen.into_inner().unwrap_or_default();
    // The same listener moved to another port: a static bootstrap accepts
    // it, and so must a resident Envoy that saw the first address.
    if let Some((_, gw)) = gateways("basic-http").into_iter().next() {
        for port in [18080, 18081] {
            let mut gw = partial(&gw);
            for l in &mut gw.listeners {
                if let Some(address::Address::SocketAddress(a)) =
                    l.address.as_mut().and_then(|a| a.address.as_mut())
                {
                    a.port_specifier = Some(socket_address::PortSpecifier::PortValue(port));
                }
            }
            seen.push(candidate(&format!("listener on {port}"), gw));
        }
    }
    seen
}

/// Pids of this process's Envoy children.
fn envoy_children() -> Vec<u32> {
    common::envoy_children(std::process::id())
}

fn kind(v: &Verdict) -> &'static str {
    match v {
        Verdict::Accepted => "accepted",
        Verdict::Rejected(_) => "rejected",
        Verdict::Unavailable(_) => "unavailable",
    }
}

#[test]
fn resident_and_process_validators_agree_recover_and_leave_nothing_behind() {
    let process = validator(Backend::Process);
    let candidates = real(&process);
    assert!(candidates.len() >= 8, "{} candidates", candidates.len());
    let broken = broken();

    let resident = validator(Backend::Resident);
    let mut all: Vec<Candidate> = candidates.clone();
    all.extend(broken.iter().map(|(c, _)| c.clone()));
    // A secret no listener names: Envoy never asks for it over SDS, so the
    // resident validator must not wait for its ACK (that would time out
    // into a process fallback, counted below).
    let (_, tls) = gateways("https-termination")
        .into_iter()
        .next()
        .expect("a TLS gateway");
    let mut extra = partial(&tls);
    let mut spare = extra.secrets.first().cloned().expect("a secret");
    spare.name = "default/unreferenced".into();
    extra.secrets.push(spare);
    all.push(candidate("an unreferenced secret", extra));
    let expected = process.validate(&all);
    // Warm up: the first calls start the resident Envoys, under the same
    // 5 s cap as any answer, which a loaded machine may miss (a process
    // fallback). Fresh candidates (uncached: their content differs from
    // `all`'s) until a batch needs no fallback with both Envoys running.
    let (_, base) = gateways("basic-http").into_iter().next().expect("a gateway");
    let mut warm = false;
    for round in 0..10 {
        let before = resident.metrics.fallbacks.get();
        let batch: Vec<Candidate> = (0..4)
            .map(|i| {
                candidate(
                    &format!("warm-up {round}.{i}"),
                    with_header(&base, "x-warm-up", &format!("{round}-{i}")),
                )
            })
            .collect();
        for (c, v) in batch.iter().zip(resident.validate(&batch)) {
            assert_eq!(kind(&v), "accepted", "{}: {v:?}", c.label);
        }
        if resident.metrics.fallbacks.get() == before && envoy_children().len() == 2 {
            warm = true;
            break;
        }
    }
    assert!(warm, "the resident Envoys did not warm up in 10 batches");
    let warmed = resident.metrics.fallbacks.get();
    let got = resident.validate(&all);
    assert_eq!(
        resident.metrics.fallbacks.get(),
        warmed,
        "every verdict came from a resident Envoy"
    );
    for ((c, e), g) in all.iter().zip(&expected).zip(&got) {
        assert_eq!(kind(g), kind(e), "{}: resident {g:?}, process {e:?}", c.label);
    }
    assert!(expected.iter().any(|v| matches!(v, Verdict::Accepted)));
    for ((c, word), v) in broken.iter().zip(&got[candidates.len()..]) {
        match v {
            Verdict::Rejected(m) => assert!(
                !m.is_empty() && m.contains(word),
                "{}: Envoy's reason expected, got {m:?}",
                c.label
            ),
            other => panic!("{}: rejected expected, got {other:?}", c.label),
        }
    }

    // Kill the resident Envoys mid-way: the next verdicts are still right
    // (a restarted Envoy, or the process fallback).
    let pids = envoy_children();
    assert!(!pids.is_empty(), "resident Envoys are running");
    for pid in pids {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    // Uncached: fresh labels do not matter, content does; change it.
    let mut again: Vec<Candidate> = Vec::new();
    for (c, _) in &broken {
        again.push(c.clone());
    }
    if let Some(c) = candidates.first() {
        let mut x = c.xds.as_deref().cloned().expect("xds form");
        x.routes.push(
            (&RouteConfiguration {
                name: "unreferenced".into(),
                ..Default::default()
            })
                .into(),
        );
        again.push(candidate("after kill", x));
    }
    let fresh = validator(Backend::Process).validate(&again);
    let after = resident.validate(&again);
    for ((c, e), g) in again.iter().zip(&fresh).zip(&after) {
        assert_eq!(
            kind(g),
            kind(e),
            "after kill, {}: resident {g:?}, process {e:?}",
            c.label
        );
    }
    // And later calls use a restarted resident Envoy again.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let later = resident.validate(&all[..1]);
    assert_eq!(kind(&later[0]), kind(&expected[0]));

    // Envoy 1.40 segfaults loading `%COALESCE(1)%` (STANDARD refuses it,
    // so this candidate is built by hand). A crash on a candidate is that
    // candidate's fault: both backends reject it (the resident one through
    // its process fallback) instead of calling it an environment error,
    // which would let it through to the data plane. A clean candidate in
    // the same batch, and after it, is still accepted.
    let (_, base) = gateways("basic-http").into_iter().next().expect("a gateway");
    let clean = candidate("clean", partial(&base));
    let crash = candidate(
        "a format string Envoy crashes on",
        with_header(&base, "x-crash", "%COALESCE(1)%"),
    );
    for (name, v) in [("process", &process), ("resident", &resident)] {
        let got = v.validate(&[crash.clone(), clean.clone()]);
        match &got[0] {
            Verdict::Rejected(m) => assert!(
                m.contains("Envoy crashed loading it") && m.contains("Segmentation fault"),
                "{name}: {m}"
            ),
            other => panic!("{name}: the crash is a rejection, got {other:?}"),
        }
        assert_eq!(kind(&got[1]), "accepted", "{name}: {:?}", got[1]);
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after = resident.validate(std::slice::from_ref(&clean));
    assert_eq!(kind(&after[0]), "accepted", "{:?}", after[0]);

    drop(resident);
    drop(process);
    assert_eq!(
        envoy_children(),
        Vec::<u32>::new(),
        "no Envoy outlives the validator"
    );
}
