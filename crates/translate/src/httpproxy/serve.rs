//! Serving HTTPProxy trees on the configured Gateway (README "HTTPProxy"):
//! each valid root becomes a virtual host (domain = its FQDN) on every
//! programmed HTTP listener of that Gateway, and, with `tls`, an SNI filter
//! chain of its own on every programmed HTTPS listener.
//!
//! [`build_host`] turns every programmed entry of a tree into an Envoy route
//! (once per translation, encoded); [`install`] puts them into the
//! Gateway's IR. Nothing that cannot be programmed reaches Envoy:
//! - a route whose action cannot be built (a Service that does not
//!   resolve, a header Envoy refuses, a bad timeout…) keeps its match and
//!   answers the replacement 500;
//! - a condition Envoy cannot program (a header name it refuses, a path
//!   with characters it refuses) is dropped from the match, which only
//!   widens it: the route becomes a 500 guard at the original's
//!   precedence;
//! - an invalid root that still names an FQDN gets a virtual host whose
//!   every request answers 500, on the HTTP listeners and in the HTTPS
//!   listeners' own chains, so that its traffic does not reach another
//!   virtual host (a catch-all `*` of a Gateway API route).
//!
//! How one entry becomes an Envoy route is `routes.rs`.
//!
//! FQDN conflicts: a hostname a Gateway API route already programs on the
//! same listener (or an HTTPS listener whose own hostname is the FQDN) is
//! kept by the Gateway API route; the HTTPProxy root is reported
//! (`VirtualHostError/FQDNConflict`) and not installed on that listener.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use envoy_types::pb::envoy::config::route::v3::{
    RedirectAction, Route as EnvoyRoute, RouteMatch, redirect_action, route, route_match,
};

use super::status::{Events, Statuses};
use super::tree::VirtualHostPlan;
use super::{ProxyError, ProxyId, reason, type_};
use crate::backend::ClusterSpec;
use crate::gateway::GatewayState;
use crate::index::Index;
use crate::ir::{self, RouteOrder, RouteStore};
use crate::listener::Protocol;
use crate::route::matches::Rank;
use crate::tls::Certificate;

/// One root (or fenced FQDN) ready to install.
#[derive(Debug)]
pub struct ServedHost {
    pub root: ProxyId,
    pub fqdn: String,
    /// For an HTTPS SNI chain (TLS roots).
    pub certificate: Option<Certificate>,
    /// `tls.minimumProtocolVersion: "1.3"`.
    pub tls13_only: bool,
    /// Routes for plaintext listeners (redirects to HTTPS for a TLS root,
    /// except routes with `permitInsecure`).
    pub http: Vec<(RouteOrder, Vec<u8>)>,
    /// Routes for the root's SNI chain (TLS roots only).
    pub https: Vec<(RouteOrder, Vec<u8>)>,
}

/// Everything HTTPProxies add to the serving Gateway.
#[derive(Debug, Default)]
pub struct Served {
    /// `namespace/name` of the Gateway.
    pub gateway: String,
    /// Shared with the incremental memo's trees (`stage::Tree`).
    pub hosts: Vec<Arc<ServedHost>>,
    pub clusters: BTreeMap<String, ClusterSpec>,
}

/// A root not installed on a listener because a Gateway API route (or an
/// HTTPS listener) already claims its FQDN there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub root: ProxyId,
    pub fqdn: String,
    /// The listener's name, and its index in the Gateway's listeners.
    pub listener: String,
    pub listener_index: usize,
}

/// What [`install`] could not do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Installed {
    pub conflicts: Vec<Conflict>,
    /// Roots (and FQDNs) installed on no listener, and not for a conflict.
    pub unserved: Vec<(ProxyId, String)>,
}

/// Builds the Envoy routes of one served root (one tree), recording what
/// could not be programmed on the proxy concerned in `found`, and the
/// clusters its routes use in `clusters`. A root whose TLS Secret does
/// not read is served fenced.
pub fn build_host(
    index: &Index<'_>,
    vh: &VirtualHostPlan<'_>,
    found: &mut Events,
    clusters: &mut BTreeMap<String, ClusterSpec>,
) -> ServedHost {
    let certificate = match &vh.tls {
        None => None,
        Some(tls) => match certificate(index, &tls.secret_namespace, &tls.secret_name) {
            Ok(c) => Some(c),
            Err(message) => {
                found.error(
                    &vh.root,
                    ProxyError::referential(
                        type_::TLS_ERROR,
                        reason::SECRET_NOT_VALID,
                        "spec.virtualhost.tls.secretName",
                        format!(
                            "Spec.VirtualHost.TLS Secret \"{}/{}\" is invalid: {message}",
                            tls.secret_namespace, tls.secret_name
                        ),
                    ),
                );
                return fenced_host(&vh.root, &vh.fqdn);
            }
        },
    };
    let mut host = ServedHost {
        root: vh.root.clone(),
        fqdn: vh.fqdn.clone(),
        certificate: None,
        tls13_only: vh
            .tls
            .as_ref()
            .is_some_and(|t| t.minimum_protocol_version == "1.3"),
        http: Vec::new(),
        https: Vec::new(),
    };
    for (i, entry) in vh.entries.iter().enumerate() {
        if !entry.programmed {
            continue;
        }
        let (envoy, rank, permit_insecure) = match super::routes::entry_route(index, entry, clusters) {
            Ok(built) => built,
            Err(failed) => {
                let (mut fenced, rank, error) = *failed;
                if let Some(holder) = entry.holder() {
                    found.error(holder, error);
                }
                crate::replacement::replace(&mut fenced);
                (fenced, rank, false)
            }
        };
        let order = RouteOrder {
            rank,
            route: i,
            rule: 0,
            match_index: 0,
        };
        if certificate.is_some() {
            let plain = if permit_insecure {
                envoy.clone()
            } else {
                https_redirect(&envoy)
            };
            host.http.push((order, crate::xds::canonical::route(&plain)));
            host.https.push((order, crate::xds::canonical::route(&envoy)));
        } else {
            host.http.push((order, crate::xds::canonical::route(&envoy)));
        }
    }
    host.certificate = certificate;
    host
}

/// Invalid roots keep their FQDN fenced (a virtual host answering 500),
/// unless a served root has it: one host per FQDN, in FQDN order.
/// `served` says which roots (and FQDNs) were built by [`build_host`].
pub fn fenced_hosts(
    statuses: &Statuses,
    served_roots: &BTreeSet<&ProxyId>,
    fqdns_served: &BTreeSet<&str>,
) -> Vec<ServedHost> {
    let mut fenced: Vec<(ProxyId, String)> = statuses
        .proxies
        .iter()
        .filter(|(id, f)| !f.errors.is_empty() && !served_roots.contains(id))
        .filter_map(|(id, f)| f.fqdn.clone().map(|fqdn| (id.clone(), fqdn)))
        .filter(|(_, fqdn)| !fqdns_served.contains(fqdn.as_str()) && crate::hostname::is_valid(fqdn, false))
        .collect();
    fenced.sort_by(|a, b| a.1.cmp(&b.1));
    fenced.dedup_by(|a, b| a.1 == b.1);
    fenced.iter().map(|(id, fqdn)| fenced_host(id, fqdn)).collect()
}

/// A virtual host whose every request answers the replacement 500.
fn fenced_host(root: &ProxyId, fqdn: &str) -> ServedHost {
    let mut r = EnvoyRoute {
        name: format!("httpproxy/{root}/fenced"),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        ..Default::default()
    };
    crate::replacement::replace(&mut r);
    let order = RouteOrder {
        rank: Rank::of(2, 1, 0, 0),
        route: 0,
        rule: 0,
        match_index: 0,
    };
    ServedHost {
        root: root.clone(),
        fqdn: fqdn.to_string(),
        certificate: None,
        tls13_only: false,
        http: vec![(order, crate::xds::canonical::route(&r))],
        // Installed in the HTTPS listeners' own chains too, so that a
        // request for this FQDN over TLS does not reach another host.
        https: vec![(order, crate::xds::canonical::route(&r))],
    }
}

/// Why a root's TLS Secret cannot be served (the text follows Contour's
/// "Spec.VirtualHost.TLS Secret \"ns/name\" is invalid: ").
#[derive(Debug, thiserror::Error)]
enum CertificateError {
    #[error("Secret not found")]
    NotFound,
    #[error(transparent)]
    Invalid(#[from] crate::tls::SecretError),
}

fn certificate(index: &Index<'_>, ns: &str, name: &str) -> Result<Certificate, CertificateError> {
    let secret = index.secret(ns, name).ok_or(CertificateError::NotFound)?;
    let (cert_pem, key_pem) = crate::tls::check_secret(secret)?;
    Ok(Certificate {
        sds_name: crate::naming::secret(ns, name),
        cert_pem,
        key_pem,
    })
}

/// The same match, answering a redirect to HTTPS (Contour: 301).
fn https_redirect(r: &EnvoyRoute) -> EnvoyRoute {
    EnvoyRoute {
        name: r.name.clone(),
        r#match: r.r#match.clone(),
        action: Some(route::Action::Redirect(RedirectAction {
            scheme_rewrite_specifier: Some(redirect_action::SchemeRewriteSpecifier::HttpsRedirect(true)),
            response_code: redirect_action::RedirectResponseCode::MovedPermanently as i32,
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// Installs the served roots into the IR of the serving Gateway: a virtual
/// host per root on every programmed HTTP listener, an SNI chain per TLS
/// root on every programmed HTTPS port. Returns the FQDNs not installed
/// because something else already claims them, or no listener admits.
pub fn install(
    ir: &mut ir::Gateway,
    store: &mut RouteStore,
    gw: &GatewayState<'_>,
    served: &Served,
) -> Installed {
    let mut conflicts = Vec::new();
    let mut admitted = BTreeSet::new();
    ir.clusters
        .extend(served.clusters.iter().map(|(k, v)| (k.clone(), v.clone())));
    for (li, l) in gw.listeners.iter().enumerate().filter(|(_, l)| l.programmed()) {
        let Some(protocol) = l.protocol else { continue };
        let Some(port) = ir.ports.get_mut(&l.port) else {
            continue;
        };
        for host in &served.hosts {
            if crate::hostname::intersect(l.hostname.as_deref(), &host.fqdn).is_none() {
                continue;
            }
            match protocol {
                Protocol::Http => {
                    let Some(chain) = port.chains.first_mut() else {
                        continue;
                    };
                    if chain.virtual_hosts.contains_key(&host.fqdn) {
                        conflicts.push(Conflict {
                            root: host.root.clone(),
                            fqdn: host.fqdn.clone(),
                            listener: l.key.clone(),
                            listener_index: li,
                        });
                        continue;
                    }
                    add(chain, store, host, &host.http, &l.key);
                    admitted.insert(host.fqdn.clone());
                }
                Protocol::Https => {
                    let Some(cert) = &host.certificate else {
                        // A fenced FQDN: its 500 in the listener's own
                        // chain (unless a Gateway API route serves it).
                        let own = crate::naming::route_config(&gw.namespace, &gw.name, l.port, Some(&l.key));
                        if let Some(chain) = port.chains.iter_mut().find(|c| c.route_config == own)
                            && !host.https.is_empty()
                            && !chain.virtual_hosts.contains_key(&host.fqdn)
                        {
                            add(chain, store, host, &host.https, &l.key);
                        }
                        continue;
                    };
                    let name = crate::naming::route_config(
                        &gw.namespace,
                        &gw.name,
                        l.port,
                        Some(&format!("httpproxy:{}", host.fqdn)),
                    );
                    if port.chains.iter().any(|c| c.route_config == name) {
                        admitted.insert(host.fqdn.clone());
                        continue; // already installed by another listener on this port
                    }
                    if port.chains.iter().any(|c| c.server_names.contains(&host.fqdn)) {
                        conflicts.push(Conflict {
                            root: host.root.clone(),
                            fqdn: host.fqdn.clone(),
                            listener: l.key.clone(),
                            listener_index: li,
                        });
                        continue;
                    }
                    ir.certificates.insert(cert.sds_name.clone(), cert.clone());
                    let mut chain = ir::Chain {
                        route_config: name,
                        server_names: vec![host.fqdn.clone()],
                        certificates: vec![cert.sds_name.clone()],
                        virtual_hosts: BTreeMap::new(),
                        http_filters: Default::default(),
                        scope: ir::Scope::default(),
                        tls13_only: host.tls13_only,
                    };
                    add(&mut chain, store, host, &host.https, &l.key);
                    admitted.insert(host.fqdn.clone());
                    port.chains.push(chain);
                }
            }
        }
    }
    let conflicted: std::collections::BTreeSet<&str> =
        conflicts.iter().map(|c: &Conflict| c.fqdn.as_str()).collect();
    let unserved = served
        .hosts
        .iter()
        .filter(|h| !admitted.contains(&h.fqdn) && !conflicted.contains(h.fqdn.as_str()))
        .map(|h| (h.root.clone(), h.fqdn.clone()))
        .collect();
    Installed { conflicts, unserved }
}

fn add(
    chain: &mut ir::Chain,
    store: &mut RouteStore,
    host: &ServedHost,
    routes: &[(RouteOrder, Vec<u8>)],
    owner: &str,
) {
    let (orders, bytes): (Vec<RouteOrder>, Vec<Option<Vec<u8>>>) =
        routes.iter().map(|(o, b)| (*o, Some(b.clone()))).unzip();
    let refs = store.add(bytes, 1).into_iter().next().unwrap_or_default();
    chain.add(&host.fqdn, owner, 2, orders.into_iter().zip(refs));
}

/// Records FQDN conflicts on both sides, and roots no listener of the
/// Gateway admits. The Gateway API side keeps a contested FQDN (README
/// "HTTPProxy"): the root gets the error `VirtualHostError/FQDNConflict`
/// naming the routes (or the HTTPS listener) that keep it; each such
/// route gets, on its parent status for this Gateway, the condition
/// `Conflicted=True` (reason `HostnameConflict`, Gateway API's listener
/// vocabulary) naming the HTTPProxy, beside its `Accepted=True`; the
/// Gateway a warning diagnostic.
#[allow(clippy::too_many_arguments)]
pub fn report_conflicts(
    gateway: &str,
    gateway_index: usize,
    source: &api::Source,
    installed: &Installed,
    routes: &[crate::route::model::Route<'_>],
    bindings: &[std::sync::Arc<Vec<crate::binding::ParentBinding>>],
    statuses: &mut Statuses,
    reports: &mut [crate::route_status::RouteReport],
    out: &mut crate::Output,
) {
    for c in &installed.conflicts {
        // The routes that keep the FQDN on this listener, and through which
        // of their parentRefs.
        let mut claimers: Vec<(usize, Vec<usize>)> = Vec::new();
        for (ri, bs) in bindings.iter().enumerate() {
            let parents: Vec<usize> = bs
                .iter()
                .enumerate()
                .filter(|(_, b)| {
                    b.gateway == gateway_index
                        && b.attachments
                            .iter()
                            .any(|a| a.listener == c.listener_index && a.hostnames.contains(&c.fqdn))
                })
                .map(|(bi, _)| bi)
                .collect();
            if !parents.is_empty() {
                claimers.push((ri, parents));
            }
        }
        let by = if claimers.is_empty() {
            format!("the hostname of listener {}", c.listener)
        } else {
            let names: Vec<String> = claimers.iter().map(|(ri, _)| routes[*ri].display()).collect();
            names.join(", ")
        };
        statuses.error(
            &c.root,
            ProxyError::semantic(
                type_::VIRTUAL_HOST_ERROR,
                reason::FQDN_CONFLICT,
                "spec.virtualhost.fqdn",
                format!(
                    "fqdn {:?} on listener {} of Gateway {gateway} is also claimed by {by}, which keeps it (the Gateway API side wins); this root is not served on that listener",
                    c.fqdn, c.listener
                ),
            ),
        );
        out.diagnostics.push(api::Diagnostic::warning(
            Some(format!("Gateway {gateway}")),
            Some(source),
            format!(
                "listener {}: hostname {:?} is claimed by HTTPProxy {} too; {by} keeps it",
                c.listener, c.fqdn, c.root
            ),
        ));
        for (ri, parents) in claimers {
            let route = &routes[ri];
            let message = format!(
                "hostname {:?} on listener {} of Gateway {gateway} is also claimed by HTTPProxy {}; this route keeps it",
                c.fqdn, c.listener, c.root
            );
            out.diagnostics.push(api::Diagnostic::warning(
                Some(route.display()),
                Some(route.source),
                message.clone(),
            ));
            if let Some(report) = reports.get_mut(ri) {
                for bi in parents {
                    report.hostname_conflicts.push((bi, message.clone()));
                }
            }
        }
    }
    for (root, fqdn) in &installed.unserved {
        statuses.error(
            root,
            ProxyError::semantic(
                type_::VIRTUAL_HOST_ERROR,
                reason::NO_MATCHING_LISTENER,
                "spec.virtualhost.fqdn",
                format!(
                    "fqdn {fqdn:?} is served on no listener of Gateway {gateway} (no programmed HTTP listener, or HTTPS listener for a TLS root, admits it)"
                ),
            ),
        );
    }
}
