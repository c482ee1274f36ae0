//! Running the hooks for one Gateway, as Envoy Gateway runs them, and what
//! a failure means (ARCHITECTURE.md §3, "extension hooks"):
//!
//! | hook | called for | failed (`failOpen: false`) |
//! | --- | --- | --- |
//! | `PostRouteModify` | each Envoy route of a rule that uses extension resources (`extensionRef`) or is targeted by an extension policy; before it is encoded | that route answers the 500, keeping its match; its rule is reported replaced |
//! | `PostVirtualHostModify` | each virtual host (not one already fenced) | that host becomes a catch-all 500 keeping its name and domains |
//! | `PostClusterModify`, `PostEndpointsModify` | each cluster of a backendRef to a `backendResources` kind (a placeholder: EDS, no endpoints) and its load assignment | the cluster is left out: the routes' share for it answers 500 (`cluster_not_found_response_code`), as for any invalid backend |
//! | `PostHTTPListenerModify` | each listener (one per port) | the listener keeps listening, unmodified; every route configuration it serves becomes a catch-all 500 |
//! | `PostTranslateModify` | once, after assembly, with what `translation` includes | the Gateway keeps its own unmodified resources (see below) |
//!
//! A reply is "failed" also when it would make Envoy NACK
//! ([`super::check`]). With `failOpen: true` the unmodified resource is
//! kept and a warning is reported instead.
//!
//! `PostTranslateModify` failing keeps portcullis's own clusters, secrets
//! (and listeners and routes, if included): everything portcullis generated
//! is complete and valid without the extension, and what the extension's
//! other hooks made depend on its additions (a cluster an extension's
//! route or filter names) fails closed by itself in Envoy: a route naming
//! an absent cluster answers an error, never another backend. So nothing
//! more is fenced; the failure is reported on the Gateway (diagnostic,
//! condition-free) and counted as a scope replacement of scope
//! `translation` so metrics see it.
//!
//! Only hooks listed in the registration run; each runs as one batch per
//! Gateway ([`super::Hooks`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration, VirtualHost, route};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};

use super::{
    ClusterCall, EndpointsCall, ExtensionResource, Hook, HookError, HookFailure, Hooks, ListenerCall, Reply,
    RouteCall, TranslateCall, VirtualHostCall,
};
use crate::GatewayXds;
use crate::error::RuleError;
use crate::policy::scope::{ROUTE_CONFIGURATION, ScopeFence, VIRTUAL_HOST};
use crate::replacement::{self, scope as fence};
use crate::xds::encoded::EncodedRouteConfiguration;

/// One Envoy route waiting for `PostRouteModify`, with its context.
#[derive(Clone, Debug)]
pub struct PendingRoute {
    /// Its slot in the routes its listener's work produced.
    pub slot: usize,
    /// The rule it was generated from (index in `spec.rules`).
    pub rule: usize,
    pub route: Route,
    pub hostnames: Vec<String>,
    pub resources: Vec<ExtensionResource>,
    pub policies: Vec<ExtensionResource>,
    /// The HTTP filters the scopes above it configure: switched off if the
    /// hook fails and the route becomes the 500.
    pub inherited: Vec<String>,
}

/// What became of one pending route.
#[derive(Debug)]
pub enum RouteOutcome {
    Unchanged,
    /// The hook's reply, checked.
    Modified(Route),
    /// The hook failed (closed): the route answers the 500 with its match;
    /// the error goes on the rule.
    Failed {
        replaced: Route,
        error: RuleError,
    },
    /// The hook failed, fail-open: the route is kept unmodified.
    Warned(String),
}

/// What the hooks of one Gateway found, for status and diagnostics.
#[derive(Debug, Default)]
pub struct Findings {
    /// Scopes fenced because a hook failed (reported as policy fences are,
    /// `replacement::scope::report`).
    pub fences: Vec<ScopeFence>,
    /// Gateway-level problems: (message, is_error).
    pub problems: Vec<(String, bool)>,
    /// What each hook replaced (Envoy names → the hook's manager): STRICT
    /// attributes what Envoy rejects among them to the hook.
    pub modified_routes: BTreeMap<String, String>,
    pub modified_hosts: BTreeMap<String, String>,
    pub modified_configs: BTreeMap<String, String>,
    /// Extension-backend clusters left out because their hook failed:
    /// `cluster` scope replacements (no Gateway condition: the Gateway
    /// serves, only the share of traffic for them answers 500).
    pub dropped_clusters: Vec<(String, RuleError)>,
    /// Envoy listener name → the Gateway listeners on its port.
    pub listener_names: BTreeMap<String, Vec<usize>>,
    /// `PostTranslateModify` failed: `translation` scope replacement.
    pub translation_failed: Option<RuleError>,
}

/// A reply's error as a rule or scope error.
fn hook_error(field: &str, e: &HookError) -> RuleError {
    RuleError::extension(field, e.to_string())
}

/// A failed call as the error of a scope (virtual host, listener,
/// cluster, translation): `extension MANAGER: HOOK failed: …`.
fn scope_error(e: &HookError) -> RuleError {
    RuleError::extension(format!("extension {}", e.manager), e.failure.to_string())
}

/// A reply that does not pass [`super::check`], as a hook failure. Never
/// fail-open: the unmodified resource would be safe, but a reply Envoy
/// would refuse is the extension's bug and must show as a fence.
fn invalid(hook: Hook, manager: &str, fail_open: bool, message: String) -> HookError {
    HookError {
        manager: manager.to_string(),
        failure: HookFailure::InvalidReply {
            hook,
            message: format!("Envoy would reject it: {message}"),
        },
        fail_open,
    }
}

/// A reply does not say which configured manager made it (a chain of
/// managers answers as one): replies portcullis refuses, and what they
/// replaced, are attributed to "extension server".
const ANSWERED_BY: &str = "server";

/// The replies, exactly one per call: a missing reply is a failed call.
fn padded<T>(mut replies: Vec<Reply<T>>, n: usize, hook: Hook) -> Vec<Reply<T>> {
    replies.truncate(n);
    while replies.len() < n {
        replies.push(Err(HookError {
            manager: ANSWERED_BY.to_string(),
            failure: HookFailure::InvalidReply {
                hook,
                message: "no reply for this call".into(),
            },
            fail_open: false,
        }));
    }
    replies
}

/// `PostRouteModify` for one Gateway's pending routes, in one batch.
pub fn post_route(hooks: &dyn Hooks, pending: &[PendingRoute]) -> Vec<RouteOutcome> {
    if pending.is_empty() {
        return Vec::new();
    }
    let calls = pending
        .iter()
        .map(|p| RouteCall {
            route: p.route.clone(),
            hostnames: p.hostnames.clone(),
            extension_resources: p.resources.clone(),
            extension_policies: p.policies.clone(),
        })
        .collect();
    let replies = padded(hooks.post_route_modify(calls), pending.len(), Hook::Route);
    pending
        .iter()
        .zip(replies)
        .map(|(p, reply)| {
            let reply = reply.and_then(|r| match r {
                None => Ok(None),
                Some(r) => match super::check::check(&r) {
                    Ok(()) => Ok(Some(r)),
                    Err(m) => Err(invalid(
                        Hook::Route,
                        ANSWERED_BY,
                        false,
                        format!("route {}: {m}", r.name),
                    )),
                },
            });
            match reply {
                Ok(None) => RouteOutcome::Unchanged,
                Ok(Some(r)) => RouteOutcome::Modified(r),
                Err(e) if e.fail_open => RouteOutcome::Warned(format!(
                    "spec.rules[{}]: {e}; route {} kept unmodified (failOpen)",
                    p.rule, p.route.name
                )),
                Err(e) => {
                    let mut replaced = p.route.clone();
                    replacement::replace(&mut replaced);
                    RouteOutcome::Failed {
                        replaced,
                        error: hook_error(&format!("spec.rules[{}]", p.rule), &e),
                    }
                }
            }
        })
        .collect()
}

/// `PostClusterModify` for the extension-backend clusters (`clusters`:
/// name → its backend resources), then `PostEndpointsModify` for their
/// load assignments; one batch each. A failure drops the cluster (and its
/// endpoints): routes naming a missing cluster answer 500.
pub fn post_cluster(
    hooks: &dyn Hooks,
    built: &mut GatewayXds,
    clusters: &BTreeMap<String, Vec<ExtensionResource>>,
    endpoints_hook: bool,
    findings: &mut Findings,
) {
    if clusters.is_empty() {
        return;
    }
    let mut dropped: BTreeSet<String> = BTreeSet::new();
    let fail = |findings: &mut Findings, name: &str, e: HookError| {
        if e.fail_open {
            findings
                .problems
                .push((format!("cluster {name}: {e}; kept unmodified (failOpen)"), false));
            return false;
        }
        findings.problems.push((
            format!("cluster {name}: {e}; the cluster is left out, routes to it answer 500"),
            true,
        ));
        findings
            .dropped_clusters
            .push((name.to_string(), scope_error(&e)));
        true
    };
    let at: Vec<usize> = (0..built.clusters.len())
        .filter(|&i| clusters.contains_key(&built.clusters[i].name))
        .collect();
    let calls: Vec<ClusterCall> = at
        .iter()
        .map(|&i| ClusterCall {
            cluster: (*built.clusters[i]).clone(),
            backend_extension_resources: clusters.get(&built.clusters[i].name).cloned().unwrap_or_default(),
        })
        .collect();
    let replies = padded(hooks.post_cluster_modify(calls), at.len(), Hook::Cluster);
    for (i, reply) in at.into_iter().zip(replies) {
        let name = built.clusters[i].name.clone();
        let reply = reply.and_then(|r| match r {
            None => Ok(None),
            Some(r) if r.name != name => Err(invalid(
                Hook::Cluster,
                ANSWERED_BY,
                false,
                format!("cluster {name} renamed to {:?}", r.name),
            )),
            Some(r) => match super::check::check(&r) {
                Ok(()) => Ok(Some(r)),
                Err(m) => Err(invalid(
                    Hook::Cluster,
                    ANSWERED_BY,
                    false,
                    format!("cluster {name}: {m}"),
                )),
            },
        });
        match reply {
            Ok(None) => {}
            Ok(Some(r)) => built.clusters[i] = Arc::new(r),
            Err(e) => {
                if fail(findings, &name, e) {
                    dropped.insert(name);
                }
            }
        }
    }
    if endpoints_hook {
        let at: Vec<usize> = (0..built.endpoints.len())
            .filter(|&i| {
                let n = &built.endpoints[i].cluster_name;
                clusters.contains_key(n) && !dropped.contains(n)
            })
            .collect();
        let calls: Vec<EndpointsCall> = at
            .iter()
            .map(|&i| EndpointsCall {
                load_assignment: (*built.endpoints[i]).clone(),
            })
            .collect();
        let replies = padded(hooks.post_endpoints_modify(calls), at.len(), Hook::Endpoints);
        for (i, reply) in at.into_iter().zip(replies) {
            let name = built.endpoints[i].cluster_name.clone();
            let reply = reply.and_then(|r| match r {
                None => Ok(None),
                Some(r) if r.cluster_name != name => Err(invalid(
                    Hook::Endpoints,
                    ANSWERED_BY,
                    false,
                    format!("load assignment of {name} renamed to {:?}", r.cluster_name),
                )),
                Some(r) => match super::check::check(&r) {
                    Ok(()) => Ok(Some(r)),
                    Err(m) => Err(invalid(
                        Hook::Endpoints,
                        ANSWERED_BY,
                        false,
                        format!("endpoints of {name}: {m}"),
                    )),
                },
            });
            match reply {
                Ok(None) => {}
                Ok(Some(r)) => built.endpoints[i] = Arc::new(r),
                Err(e) => {
                    if fail(findings, &name, e) {
                        dropped.insert(name);
                    }
                }
            }
        }
    }
    built.clusters.retain(|c| !dropped.contains(&c.name));
    built.endpoints.retain(|e| !dropped.contains(&e.cluster_name));
}

/// A host [`fence::fenced_host`] or [`fence::fenced_config_host`] made:
/// a fence is never handed to an extension (it could un-fence it).
fn is_fence(vh: &VirtualHost) -> bool {
    matches!(vh.routes.as_slice(), [r] if r.name.ends_with("/replaced")
        && matches!(&r.action, Some(route::Action::DirectResponse(d)) if d.status == 500))
}

/// `PostVirtualHostModify` for every virtual host of the Gateway, in one
/// batch. `owners`: virtual host name → the Gateway listener that owns
/// it (for the listener's condition when it is fenced).
pub fn post_virtual_host(
    hooks: &dyn Hooks,
    built: &mut GatewayXds,
    owners: &BTreeMap<String, usize>,
    findings: &mut Findings,
) {
    let mut configs: Vec<RouteConfiguration> = built
        .routes
        .iter()
        .map(EncodedRouteConfiguration::decode)
        .collect();
    let mut at = Vec::new();
    let mut calls = Vec::new();
    for (ci, rc) in configs.iter().enumerate() {
        for (hi, vh) in rc.virtual_hosts.iter().enumerate() {
            if is_fence(vh) {
                continue;
            }
            at.push((ci, hi));
            calls.push(VirtualHostCall {
                virtual_host: vh.clone(),
            });
        }
    }
    if calls.is_empty() {
        return;
    }
    let n = calls.len();
    let replies = padded(hooks.post_virtual_host_modify(calls), n, Hook::VirtualHost);
    let mut changed = BTreeSet::new();
    for ((ci, hi), reply) in at.into_iter().zip(replies) {
        let Some(rc) = configs.get_mut(ci) else { continue };
        // The filters the route configuration's scope configures: a fenced
        // host switches them off (its traffic meets the 500, not a 403).
        let above: Vec<String> = rc.typed_per_filter_config.keys().cloned().collect();
        let Some(vh) = rc.virtual_hosts.get_mut(hi) else {
            continue;
        };
        let name = vh.name.clone();
        let reply = reply.and_then(|r| match r {
            None => Ok(None),
            // Renaming or re-homing a host would move traffic between
            // scopes this Gateway's listeners decided: refused.
            Some(r) if r.name != name => Err(invalid(
                Hook::VirtualHost,
                ANSWERED_BY,
                false,
                format!("virtual host {name} renamed to {:?}", r.name),
            )),
            Some(r) => match super::check::check(&r) {
                Ok(()) => Ok(Some(r)),
                Err(m) => Err(invalid(
                    Hook::VirtualHost,
                    ANSWERED_BY,
                    false,
                    format!("virtual host {name}: {m}"),
                )),
            },
        });
        match reply {
            Ok(None) => {}
            Ok(Some(r)) => {
                *vh = r;
                changed.insert(ci);
                findings.modified_hosts.insert(name, ANSWERED_BY.to_string());
            }
            Err(e) if e.fail_open => findings.problems.push((
                format!("virtual host {name}: {e}; kept unmodified (failOpen)"),
                false,
            )),
            Err(e) => {
                let domains = std::mem::take(&mut vh.domains);
                *vh = fence::fenced_host(&name, domains);
                crate::replacement::disable_filters(&mut vh.typed_per_filter_config, above);
                changed.insert(ci);
                findings.fences.push(ScopeFence {
                    listener: owners.get(&name).copied(),
                    scope: VIRTUAL_HOST,
                    names: vec![name],
                    error: scope_error(&e),
                });
            }
        }
    }
    for ci in changed {
        if let (Some(rc), Some(slot)) = (configs.get(ci), built.routes.get_mut(ci)) {
            // A modified host may clash with another (name or domain):
            // Envoy would refuse the whole configuration.
            *slot = EncodedRouteConfiguration::new(rc);
        }
    }
    // Whole-configuration checks after the per-host replacements: a clash
    // fences the configuration (the hosts that clash are the extension's).
    for (ci, rc) in configs.iter_mut().enumerate() {
        if let Err(m) = super::check::check(rc) {
            let name = rc.name.clone();
            fence::replace_config(rc);
            if let Some(slot) = built.routes.get_mut(ci) {
                *slot = EncodedRouteConfiguration::new(rc);
            }
            findings.fences.push(ScopeFence {
                listener: None,
                scope: ROUTE_CONFIGURATION,
                names: vec![name],
                error: RuleError::extension(
                    format!("extension {ANSWERED_BY}"),
                    format!(
                        "{} replies make a route configuration Envoy would reject: {m}",
                        Hook::VirtualHost
                    ),
                ),
            });
        }
    }
}

/// The route configurations a listener's connection managers fetch.
fn route_configs_of(l: &Listener) -> Vec<String> {
    let mut out = Vec::new();
    for chain in &l.filter_chains {
        for f in &chain.filters {
            let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else {
                continue;
            };
            let Ok(hcm) = <HttpConnectionManager as prost::Message>::decode(any.value.as_slice()) else {
                continue;
            };
            if let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = hcm.route_specifier
                && !out.contains(&rds.route_config_name)
            {
                out.push(rds.route_config_name);
            }
        }
    }
    out
}

/// One Envoy listener's context: the Gateway listeners on its port (indices
/// into the merged listeners, for their conditions) and the extension policies targeting them.
pub struct ListenerScope {
    pub envoy_name: String,
    pub gateway_listeners: Vec<usize>,
    pub policies: Vec<ExtensionResource>,
}

/// `PostHTTPListenerModify` for every listener, in one batch.
pub fn post_http_listener(
    hooks: &dyn Hooks,
    built: &mut GatewayXds,
    scopes: &[ListenerScope],
    findings: &mut Findings,
) {
    if built.listeners.is_empty() {
        return;
    }
    let calls: Vec<ListenerCall> = built
        .listeners
        .iter()
        .map(|l| ListenerCall {
            listener: l.clone(),
            extension_resources: scopes
                .iter()
                .find(|s| s.envoy_name == l.name)
                .map(|s| s.policies.clone())
                .unwrap_or_default(),
        })
        .collect();
    let n = calls.len();
    let replies = padded(hooks.post_http_listener_modify(calls), n, Hook::HttpListener);
    let mut fenced_configs = BTreeSet::new();
    for (l, reply) in built.listeners.iter_mut().zip(replies) {
        let name = l.name.clone();
        let reply = reply.and_then(|r| match r {
            None => Ok(None),
            Some(r) if r.name != name => Err(invalid(
                Hook::HttpListener,
                ANSWERED_BY,
                false,
                format!("listener {name} renamed to {:?}", r.name),
            )),
            Some(r) => match super::check::check(&r) {
                Ok(()) => Ok(Some(r)),
                Err(m) => Err(invalid(
                    Hook::HttpListener,
                    ANSWERED_BY,
                    false,
                    format!("listener {name}: {m}"),
                )),
            },
        });
        match reply {
            Ok(None) => {}
            Ok(Some(r)) => *l = r,
            Err(e) if e.fail_open => findings
                .problems
                .push((format!("listener {name}: {e}; kept unmodified (failOpen)"), false)),
            Err(e) => {
                // The listener keeps listening (unmodified); its traffic
                // answers the 500.
                let configs = route_configs_of(l);
                fenced_configs.extend(configs.iter().cloned());
                let gateway_listeners = scopes
                    .iter()
                    .find(|s| s.envoy_name == name)
                    .map(|s| s.gateway_listeners.clone())
                    .unwrap_or_default();
                let error = scope_error(&e);
                if gateway_listeners.is_empty() {
                    findings.fences.push(ScopeFence {
                        listener: None,
                        scope: ROUTE_CONFIGURATION,
                        names: configs,
                        error,
                    });
                } else {
                    for gl in gateway_listeners {
                        findings.fences.push(ScopeFence {
                            listener: Some(gl),
                            scope: ROUTE_CONFIGURATION,
                            names: configs.clone(),
                            error: error.clone(),
                        });
                    }
                }
            }
        }
    }
    for rc in built
        .routes
        .iter_mut()
        .filter(|rc| fenced_configs.contains(&rc.name))
    {
        rc.edit(fence::replace_config);
    }
}

/// `PostTranslateModify` once for the Gateway, with the resources
/// `includes` select; the reply's lists replace those kinds whole.
pub fn post_translate(
    hooks: &dyn Hooks,
    built: &mut GatewayXds,
    policies: Vec<ExtensionResource>,
    findings: &mut Findings,
) {
    let includes = hooks.registration().translation;
    let call = TranslateCall {
        extension_resources: policies,
        clusters: if includes.clusters {
            built.clusters.iter().map(|c| (**c).clone()).collect()
        } else {
            Vec::new()
        },
        secrets: if includes.secrets {
            built.secrets.clone()
        } else {
            Vec::new()
        },
        listeners: if includes.listeners {
            built.listeners.clone()
        } else {
            Vec::new()
        },
        routes: if includes.routes {
            built.route_configurations()
        } else {
            Vec::new()
        },
    };
    let reply = hooks.post_translate_modify(call).and_then(|r| match r {
        None => Ok(None),
        Some(r) => match check_translate(&r, includes) {
            Ok(()) => Ok(Some(r)),
            Err(e) => Err(invalid(Hook::Translation, ANSWERED_BY, false, e.to_string())),
        },
    });
    match reply {
        Ok(None) => {}
        Ok(Some(r)) => {
            if includes.clusters {
                built.clusters = r.clusters.into_iter().map(Arc::new).collect();
            }
            if includes.secrets {
                built.secrets = r.secrets;
            }
            if includes.listeners {
                built.listeners = r.listeners;
            }
            if includes.routes {
                for rc in &r.routes {
                    findings
                        .modified_configs
                        .insert(rc.name.clone(), ANSWERED_BY.to_string());
                }
                built.routes = r.routes.iter().map(EncodedRouteConfiguration::new).collect();
            }
        }
        Err(e) if e.fail_open => findings.problems.push((
            format!("{e}; the Gateway's resources kept unmodified (failOpen)"),
            false,
        )),
        Err(e) => {
            findings.problems.push((
                format!(
                    "{e}; the Gateway's own resources are kept unmodified, without the extension's additions"
                ),
                true,
            ));
            findings.translation_failed = Some(scope_error(&e));
        }
    }
}

/// Why a `PostTranslateModify` reply cannot be used; `kind` is the
/// resource kind ("cluster", "route configuration", …).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TranslateReplyError {
    #[error("a {kind} without a name")]
    Unnamed { kind: &'static str },
    #[error("{kind} {name:?} is returned twice")]
    Duplicate { kind: &'static str, name: String },
    #[error("{kind} {name}: {error}")]
    Resource {
        kind: &'static str,
        name: String,
        #[source]
        error: super::check::ReplyError,
    },
}

/// Every resource of a `PostTranslateModify` reply checked, and names
/// unique per kind (Envoy refuses a duplicate).
fn check_translate(
    r: &super::TranslateReply,
    includes: super::TranslationIncludes,
) -> Result<(), TranslateReplyError> {
    fn each<M: prost::Message + prost::Name>(
        kind: &'static str,
        items: &[M],
        name: impl Fn(&M) -> &str,
    ) -> Result<(), TranslateReplyError> {
        let mut seen = BTreeSet::new();
        for m in items {
            let n = name(m);
            if n.is_empty() {
                return Err(TranslateReplyError::Unnamed { kind });
            }
            if !seen.insert(n.to_string()) {
                return Err(TranslateReplyError::Duplicate {
                    kind,
                    name: n.to_string(),
                });
            }
            super::check::check(m).map_err(|error| TranslateReplyError::Resource {
                kind,
                name: n.to_string(),
                error,
            })?;
        }
        Ok(())
    }
    if includes.clusters {
        each("cluster", &r.clusters, |c| &c.name)?;
    }
    if includes.secrets {
        each("secret", &r.secrets, |s| &s.name)?;
    }
    if includes.listeners {
        each("listener", &r.listeners, |l| &l.name)?;
    }
    if includes.routes {
        each("route configuration", &r.routes, |rc| &rc.name)?;
    }
    Ok(())
}

/// STRICT for what the listener, cluster, endpoints and translation hooks
/// replaced: STRICT's own pass (`strict::check_gateway`) bisects route
/// configurations but takes listeners and secrets as given (a rejected
/// skeleton is only reported) and never sees clusters. So, before it, the
/// hook-modified non-route resources are asked of the real Envoy as two
/// candidates: the listeners and secrets (no routes), and the clusters and
/// endpoints (with portcullis's own listeners). A rejected candidate's
/// resources go back to what portcullis generated; the listeners whose
/// reply was rejected have their traffic fenced (as a failed
/// `PostHTTPListenerModify`); everything is reported as the hook's.
pub fn strict_precheck(
    validator: &dyn crate::strict::Validator,
    key: &str,
    before: &GatewayXds,
    built: &mut GatewayXds,
    listener_names: &BTreeMap<String, Vec<usize>>,
    findings: &mut Findings,
) {
    use crate::output::bootstrap::{BootstrapOptions, static_bootstrap};
    use crate::strict::{Candidate, Verdict};
    let candidate = |label: String, partial: GatewayXds| Candidate {
        label,
        bootstrap: static_bootstrap(&partial, "portcullis-strict", &BootstrapOptions::default()),
        xds: Some(std::sync::Arc::new(partial)),
    };
    let listeners_changed = built.listeners != before.listeners || built.secrets != before.secrets;
    let clusters_changed = built.clusters != before.clusters || built.endpoints != before.endpoints;
    let mut batch = Vec::new();
    if listeners_changed {
        batch.push(candidate(
            format!("{key} listeners and secrets as the extension replied"),
            GatewayXds {
                listeners: built.listeners.clone(),
                secrets: built.secrets.clone(),
                ..Default::default()
            },
        ));
    }
    if clusters_changed {
        batch.push(candidate(
            format!("{key} clusters as the extension replied"),
            GatewayXds {
                listeners: before.listeners.clone(),
                secrets: before.secrets.clone(),
                clusters: built.clusters.clone(),
                endpoints: built.endpoints.clone(),
                ..Default::default()
            },
        ));
    }
    if batch.is_empty() {
        return;
    }
    let mut verdicts = validator.validate(&batch).into_iter();
    let mut verdict = |changed: bool| changed.then(|| verdicts.next()).flatten();
    let listeners_verdict = verdict(listeners_changed);
    let clusters_verdict = verdict(clusters_changed);
    let rejected = |v: &Option<Verdict>| match v {
        Some(Verdict::Rejected(m)) => Some(m.clone()),
        _ => None,
    };
    for v in [&listeners_verdict, &clusters_verdict] {
        if let Some(Verdict::Unavailable(m)) = v {
            findings.problems.push((
                format!("STRICT validation of the extension's replies for {key} unavailable: {m}"),
                false,
            ));
        }
    }
    if let Some(m) = rejected(&listeners_verdict) {
        let error = RuleError::extension(
            format!("extension {ANSWERED_BY}"),
            format!(
                "the {} / {} replies were rejected by Envoy: {m}",
                Hook::HttpListener,
                Hook::Translation
            ),
        );
        let mut fenced = BTreeSet::new();
        for l in &before.listeners {
            if built.listeners.iter().find(|b| b.name == l.name) == Some(l) {
                continue;
            }
            let configs = route_configs_of(l);
            fenced.extend(configs.iter().cloned());
            let names = listener_names.get(&l.name).cloned().unwrap_or_default();
            if names.is_empty() {
                findings.fences.push(ScopeFence {
                    listener: None,
                    scope: ROUTE_CONFIGURATION,
                    names: configs.clone(),
                    error: error.clone(),
                });
            }
            for gl in names {
                findings.fences.push(ScopeFence {
                    listener: Some(gl),
                    scope: ROUTE_CONFIGURATION,
                    names: configs.clone(),
                    error: error.clone(),
                });
            }
        }
        if fenced.is_empty() {
            // Only secrets changed: nothing to fence, ours are complete.
            findings
                .problems
                .push((format!("{error}; the Gateway's own secrets are kept"), true));
        }
        built.listeners = before.listeners.clone();
        built.secrets = before.secrets.clone();
        for rc in built.routes.iter_mut().filter(|rc| fenced.contains(&rc.name)) {
            rc.edit(fence::replace_config);
        }
    }
    if let Some(m) = rejected(&clusters_verdict) {
        findings.problems.push((
            format!(
                "extension {ANSWERED_BY}: the {} / {} / {} replies were rejected by Envoy: {m}; the Gateway's own clusters are kept",
                Hook::Cluster,
                Hook::Endpoints,
                Hook::Translation
            ),
            true,
        ));
        for c in &built.clusters {
            if !before.clusters.contains(c) && before.clusters.iter().any(|b| b.name == c.name) {
                findings.dropped_clusters.push((
                    c.name.clone(),
                    RuleError::extension(
                        format!("extension {ANSWERED_BY}"),
                        format!("rejected by Envoy: {m}"),
                    ),
                ));
            }
        }
        built.clusters = before.clusters.clone();
        built.endpoints = before.endpoints.clone();
    }
}

#[cfg(test)]
mod reply_tests {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;

    use super::*;

    fn cluster(name: &str) -> Cluster {
        Cluster {
            name: name.to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn a_translate_reply_error_names_the_kind_and_the_resource() {
        let includes = super::super::TranslationIncludes {
            listeners: false,
            routes: false,
            clusters: true,
            secrets: false,
        };
        let twice = super::super::TranslateReply {
            clusters: vec![cluster("a"), cluster("a")],
            ..Default::default()
        };
        let err = check_translate(&twice, includes).err();
        assert_eq!(
            err,
            Some(TranslateReplyError::Duplicate {
                kind: "cluster",
                name: "a".into()
            })
        );
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some(r#"cluster "a" is returned twice"#)
        );
        let unnamed = super::super::TranslateReply {
            clusters: vec![cluster("")],
            ..Default::default()
        };
        let err = check_translate(&unnamed, includes).err();
        assert_eq!(err, Some(TranslateReplyError::Unnamed { kind: "cluster" }));
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("a cluster without a name")
        );
    }
}
