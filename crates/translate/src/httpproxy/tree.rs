//! The include tree: which proxies are roots, which roots are valid, what
//! each root's tree routes (depth-first in include order, conditions
//! merged root to leaf), and which proxies no valid root reaches.
//!
//! Rules, as Contour's `HTTPProxyProcessor` with the corrections of
//! README "HTTPProxy":
//! - A root is a proxy with `spec.virtualhost`. It is served only when its
//!   FQDN is set, no other root claims the same FQDN (case-insensitive:
//!   both are invalid, `DuplicateVhost`), it lives in a root namespace
//!   (when any are configured), it defines routes or includes, and its TLS
//!   settings resolve (a Secret in another namespace needs a
//!   TLSCertificateDelegation there). An unserved root includes nothing, so
//!   its children are orphaned unless another root reaches them.
//! - Includes are followed in order; an include whose conditions are not
//!   valid is not followed (reported) and fenced (500) for what can be
//!   expressed of its conditions (its first path condition as a prefix); a missing include or one naming a root
//!   answers 502 for its conditions; an include that closes a cycle, or
//!   names a proxy whose spec did not parse, is fenced (500) for its
//!   conditions so its traffic never falls to a broader route of the
//!   parent. Duplicate include conditions are not an error (duplicates are
//!   judged on full routes, `duplicates.rs`), and a child may be included
//!   any number of times.
//! - A route whose own conditions or actions are not valid is fenced for
//!   what can be expressed of its conditions (an invalid regex path by its
//!   literal prefix; an unreadable header or query condition dropped, which
//!   only widens the fence); the proxy's other routes are still served.

use std::collections::{BTreeMap, BTreeSet};

use api::Sourced;
use api::httpproxy::{HttpProxy, MatchCondition, Route};

use super::conditions::{self, Merged};
use super::status::{Events, Statuses};
use super::{HttpProxySettings, ProxyError, ProxyId, reason, type_};
use crate::index::Index;

/// One valid root and everything its tree routes, in processing order.
#[derive(Debug)]
pub struct VirtualHostPlan<'a> {
    pub root: ProxyId,
    pub proxy: &'a Sourced<HttpProxy>,
    /// Lower-cased.
    pub fqdn: String,
    pub tls: Option<TlsPlan>,
    pub entries: Vec<Entry<'a>>,
}

/// A root's TLS: the Secret (after delegation) and the minimum version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsPlan {
    pub secret_namespace: String,
    pub secret_name: String,
    /// `1.2` (default) or `1.3`.
    pub minimum_protocol_version: String,
}

/// One route of a tree (or what stands in for one).
#[derive(Debug)]
pub struct Entry<'a> {
    /// Conditions merged from the root down to this route.
    pub conditions: Merged,
    /// The include path from the root to the proxy holding the route
    /// (last), or to the including proxy for a 502 or fence.
    pub chain: Vec<ProxyId>,
    pub action: Action<'a>,
    /// Whether it is programmed (false for a duplicate, see
    /// `duplicates.rs`).
    pub programmed: bool,
    /// For a duplicate: the index of the entry that won.
    pub duplicate_of: Option<usize>,
}

impl Entry<'_> {
    /// The proxy holding the route.
    pub fn holder(&self) -> Option<&ProxyId> {
        self.chain.last()
    }
}

#[derive(Debug)]
pub enum Action<'a> {
    /// `spec.routes[index]` of the holder, valid.
    Route { route: &'a Route, index: usize },
    /// 502: the include `include` is missing or names a root.
    BadGateway { include: ProxyId },
    /// 500: what was meant here cannot be served.
    Fence { error: ProxyError },
}

impl Action<'_> {
    /// Whether a user wrote this route (as opposed to a 502 or fence that
    /// stands in for one).
    pub fn is_route(&self) -> bool {
        matches!(self, Action::Route { .. })
    }
}

/// Every HTTPProxy by id (a later object with the same id replaces an
/// earlier one, as everywhere the translator looks proxies up).
pub type Proxies<'a> = BTreeMap<ProxyId, &'a Sourced<HttpProxy>>;

pub fn proxies(inputs: &api::Inputs) -> Proxies<'_> {
    inputs
        .http_proxies
        .iter()
        .map(|p| (ProxyId::of(&p.object), p))
        .collect()
}

/// A root that passed the root checks: its tree is walked ([`walk`]).
#[derive(Clone, Debug)]
pub struct RootPlan<'a> {
    pub root: ProxyId,
    pub proxy: &'a Sourced<HttpProxy>,
    /// Lower-cased.
    pub fqdn: String,
    pub tls: Option<TlsPlan>,
}

/// One root's tree walked: its plan, what the walk found (on any proxy of
/// the tree), the proxies it reached (not orphans) and every proxy id it
/// looked up, present or not (what the walk's result depends on besides
/// the root's checks).
#[derive(Debug)]
pub struct Walked<'a> {
    pub plan: VirtualHostPlan<'a>,
    pub events: Events,
    pub reached: BTreeSet<ProxyId>,
    pub deps: BTreeSet<ProxyId>,
}

/// Resolves every root; records every finding in `statuses`.
pub fn resolve<'a>(
    inputs: &'a api::Inputs,
    index: &Index<'a>,
    settings: &HttpProxySettings,
    statuses: &mut Statuses,
) -> Vec<VirtualHostPlan<'a>> {
    let proxies = proxies(inputs);
    let roots = roots(inputs, index, settings, &proxies, statuses);
    let mut reached: BTreeSet<ProxyId> = BTreeSet::new();
    let mut plans = Vec::new();
    for root in roots {
        let walked = walk(&proxies, root);
        statuses.replay(&walked.events);
        reached.extend(walked.reached);
        plans.push(walked.plan);
    }
    orphans(&proxies, |id| reached.contains(id), statuses);
    plans
}

/// Records what every proxy's own object says (a spec that does not
/// read) and every root's checks (FQDN set and unique, root namespace,
/// something defined, TLS); returns the roots that pass, in id order.
/// Errors found here are recorded on the proxy concerned only, before any
/// walk's: a root's own walk records after them.
pub fn roots<'a>(
    inputs: &'a api::Inputs,
    index: &Index<'a>,
    settings: &HttpProxySettings,
    proxies: &Proxies<'a>,
    statuses: &mut Statuses,
) -> Vec<RootPlan<'a>> {
    for (id, p) in proxies {
        // Every proxy gets a status, even one nothing refers to.
        statuses.proxies.entry(id.clone()).or_default();
        for e in &p.object.load_errors {
            statuses.error(id, unreadable(e));
        }
    }

    // FQDN claims, case-insensitive.
    let mut by_fqdn: BTreeMap<String, Vec<&ProxyId>> = BTreeMap::new();
    for (id, p) in proxies {
        if let Some(vh) = &p.object.spec.virtualhost {
            by_fqdn.entry(vh.fqdn.to_ascii_lowercase()).or_default().push(id);
        }
    }

    let mut plans = Vec::new();
    for (id, p) in proxies {
        let Some(vh) = &p.object.spec.virtualhost else {
            continue;
        };
        let fqdn = vh.fqdn.to_ascii_lowercase();
        if !fqdn.trim().is_empty() {
            statuses.proxies.entry(id.clone()).or_default().fqdn = Some(fqdn.clone());
        }
        let claims = by_fqdn.get(&fqdn).map_or(0, Vec::len);
        if claims > 1 {
            let names: Vec<String> = by_fqdn[&fqdn].iter().map(ToString::to_string).collect();
            statuses.error(
                id,
                ProxyError::semantic(
                    type_::VIRTUAL_HOST_ERROR,
                    reason::DUPLICATE_VHOST,
                    "spec.virtualhost.fqdn",
                    format!(
                        "fqdn {fqdn:?} is used in multiple HTTPProxies: {}",
                        names.join(", ")
                    ),
                ),
            );
            continue;
        }
        if fqdn.trim().is_empty() {
            statuses.error(
                id,
                ProxyError::structural(
                    type_::VIRTUAL_HOST_ERROR,
                    reason::FQDN_NOT_SPECIFIED,
                    "spec.virtualhost.fqdn",
                    "Spec.VirtualHost.Fqdn must be specified",
                ),
            );
            continue;
        }
        if !settings.root_namespaces.is_empty() && !settings.root_namespaces.contains(&id.namespace) {
            statuses.error(
                id,
                ProxyError::semantic(
                    type_::ROOT_NAMESPACE_ERROR,
                    reason::ROOT_PROXY_NOT_ALLOWED_IN_NAMESPACE,
                    "spec.virtualhost",
                    "root HTTPProxy cannot be defined in this namespace",
                ),
            );
            continue;
        }
        if !p.object.load_errors.is_empty() {
            continue; // reported above; its routes are unknown
        }
        if p.object.spec.routes.is_empty() && p.object.spec.includes.is_empty() {
            statuses.error(
                id,
                ProxyError::structural(
                    type_::SPEC_ERROR,
                    reason::NOTHING_DEFINED,
                    "spec",
                    "HTTPProxy.Spec must have at least one Route, Include, or a TCPProxy",
                ),
            );
            continue;
        }
        let tls = match &vh.tls {
            None => None,
            Some(tls) => match tls_plan(inputs, index, id, tls) {
                Ok(plan) => Some(plan),
                Err(e) => {
                    statuses.error(id, e);
                    continue;
                }
            },
        };
        plans.push(RootPlan {
            root: id.clone(),
            proxy: p,
            fqdn,
            tls,
        });
    }
    plans
}

/// Walks one root's tree depth-first in include order. Reads nothing but
/// `proxies` at the ids it records in [`Walked::deps`].
pub fn walk<'a>(proxies: &Proxies<'a>, root: RootPlan<'a>) -> Walked<'a> {
    let mut events = Events::default();
    let mut reached = BTreeSet::new();
    let mut deps = BTreeSet::from([root.root.clone()]);
    let mut walk = Walk {
        proxies,
        statuses: &mut events,
        reached: &mut reached,
        deps: &mut deps,
        entries: Vec::new(),
    };
    walk.proxy(&root.root, &root.proxy.object, &[], &mut vec![root.root.clone()]);
    let entries = walk.entries;
    Walked {
        plan: VirtualHostPlan {
            root: root.root,
            proxy: root.proxy,
            fqdn: root.fqdn,
            tls: root.tls,
            entries,
        },
        events,
        reached,
        deps,
    }
}

/// Records `Orphaned` on every proxy that is not a root and that no walk
/// reached.
pub fn orphans(proxies: &Proxies<'_>, reached: impl Fn(&ProxyId) -> bool, statuses: &mut Statuses) {
    for (id, p) in proxies {
        if p.object.spec.virtualhost.is_none() && !reached(id) {
            statuses.error(
                id,
                ProxyError::referential(
                    type_::ORPHANED,
                    reason::ORPHANED,
                    "metadata",
                    "this HTTPProxy is not part of a delegation chain from a root HTTPProxy",
                ),
            );
        }
    }
}

/// The root's Secret after delegation, or Contour's TLS error.
fn tls_plan(
    inputs: &api::Inputs,
    index: &Index<'_>,
    root: &ProxyId,
    tls: &api::httpproxy::Tls,
) -> Result<TlsPlan, ProxyError> {
    let field = "spec.virtualhost.tls";
    let minimum = match tls.minimum_protocol_version.as_str() {
        "" | "1.2" => "1.2",
        "1.3" => "1.3",
        other => {
            return Err(ProxyError::semantic(
                type_::TLS_ERROR,
                reason::TLS_CONFIG_NOT_VALID,
                format!("{field}.minimumProtocolVersion"),
                format!(
                    "Spec.VirtualHost.TLS: minimumProtocolVersion {other:?} is not supported (1.2 or 1.3)"
                ),
            ));
        }
    };
    if tls.secret_name.trim().is_empty() {
        return Err(ProxyError::structural(
            type_::TLS_ERROR,
            reason::TLS_CONFIG_NOT_VALID,
            field,
            "Spec.VirtualHost.TLS: neither Passthrough nor SecretName were specified",
        ));
    }
    let (namespace, name) = match tls.secret_name.split_once('/') {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => (root.namespace.clone(), tls.secret_name.clone()),
    };
    if namespace != root.namespace && !delegated(inputs, &namespace, &name, &root.namespace) {
        return Err(ProxyError::semantic(
            type_::TLS_ERROR,
            reason::DELEGATION_NOT_PERMITTED,
            format!("{field}.secretName"),
            format!(
                "Spec.VirtualHost.TLS Secret {:?} certificate delegation not permitted",
                tls.secret_name
            ),
        ));
    }
    if index.secret(&namespace, &name).is_none() {
        return Err(ProxyError::referential(
            type_::TLS_ERROR,
            reason::SECRET_NOT_VALID,
            format!("{field}.secretName"),
            format!(
                "Spec.VirtualHost.TLS Secret {:?} is invalid: Secret not found",
                tls.secret_name
            ),
        ));
    }
    Ok(TlsPlan {
        secret_namespace: namespace,
        secret_name: name,
        minimum_protocol_version: minimum.to_string(),
    })
}

/// Whether a TLSCertificateDelegation in `namespace` lets `target` use
/// Secret `name` (`targetNamespaces: ["*"]` lets every namespace).
pub fn delegated(inputs: &api::Inputs, namespace: &str, name: &str, target: &str) -> bool {
    inputs
        .tls_certificate_delegations
        .iter()
        .filter(|d| d.object.metadata.namespace.as_deref() == Some(namespace))
        .flat_map(|d| &d.object.spec.delegations)
        .any(|d| d.secret_name == name && d.target_namespaces.iter().any(|t| t == "*" || t == target))
}

/// One root's depth-first walk.
struct Walk<'a, 's> {
    proxies: &'s Proxies<'a>,
    statuses: &'s mut Events,
    reached: &'s mut BTreeSet<ProxyId>,
    deps: &'s mut BTreeSet<ProxyId>,
    entries: Vec<Entry<'a>>,
}

impl<'a> Walk<'a, '_> {
    /// `proxy` (last of `chain`) under `inherited` conditions.
    fn proxy(
        &mut self,
        id: &ProxyId,
        proxy: &'a HttpProxy,
        inherited: &[&'a MatchCondition],
        chain: &mut Vec<ProxyId>,
    ) {
        for (i, include) in proxy.spec.includes.iter().enumerate() {
            let field = format!("spec.includes[{i}].conditions");
            let own: Vec<&MatchCondition> = include.conditions.iter().collect();
            let check = conditions::include_valid(&include.conditions, &field)
                .and_then(|()| conditions::headers_valid(&own, &field))
                .and_then(|()| conditions::queries_valid(&own, &field));
            if let Err(error) = check {
                self.statuses.error(id, error.clone());
                // The child is not included, but its space is fenced as
                // far as it can be expressed (never left to a broader
                // route of this proxy).
                if let Some(conditions) = include_fence(inherited, &include.conditions) {
                    self.entries.push(Entry {
                        conditions,
                        chain: chain.clone(),
                        action: Action::Fence { error },
                        programmed: true,
                        duplicate_of: None,
                    });
                }
                continue;
            }
            let mut merged: Vec<&'a MatchCondition> = inherited.to_vec();
            merged.extend(include.conditions.iter());
            let target = ProxyId::new(
                include
                    .namespace
                    .clone()
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or_else(|| id.namespace.clone()),
                include.name.clone(),
            );
            self.deps.insert(target.clone());
            let Some(child) = self.proxies.get(&target).copied() else {
                self.statuses.error(
                    id,
                    ProxyError::referential(
                        type_::INCLUDE_ERROR,
                        reason::INCLUDE_NOT_FOUND,
                        format!("spec.includes[{i}]"),
                        format!("include {target} not found"),
                    ),
                );
                self.push(&merged, chain, Action::BadGateway { include: target });
                continue;
            };
            if child.object.spec.virtualhost.is_some() {
                self.statuses.error(
                    id,
                    ProxyError::semantic(
                        type_::INCLUDE_ERROR,
                        reason::ROOT_INCLUDES_ROOT,
                        format!("spec.includes[{i}]"),
                        format!("root httpproxy cannot include another root httpproxy ({target})"),
                    ),
                );
                self.push(&merged, chain, Action::BadGateway { include: target });
                continue;
            }
            self.reached.insert(target.clone());
            if chain.contains(&target) {
                let mut path: Vec<String> = chain.iter().map(ToString::to_string).collect();
                path.push(target.to_string());
                let error = ProxyError::semantic(
                    type_::INCLUDE_ERROR,
                    reason::INCLUDE_CREATES_CYCLE,
                    format!("spec.includes[{i}]"),
                    format!("include creates an include cycle: {}", path.join(" -> ")),
                );
                // Contour reports the cycle on the proxy it returns to.
                self.statuses.error(&target, error.clone());
                self.push(&merged, chain, Action::Fence { error });
                continue;
            }
            if let Some(e) = child.object.load_errors.first() {
                let error = ProxyError::structural(
                    type_::SPEC_ERROR,
                    reason::SPEC_NOT_VALID,
                    "spec",
                    format!("included HTTPProxy {target} cannot be read: {e}"),
                );
                self.push(&merged, chain, Action::Fence { error });
                continue;
            }
            chain.push(target.clone());
            self.proxy(&target, &child.object, &merged, chain);
            chain.pop();
        }

        for (j, route) in proxy.spec.routes.iter().enumerate() {
            match route_problem(route, j, inherited) {
                None => {
                    let all: Vec<&'a MatchCondition> =
                        inherited.iter().copied().chain(&route.conditions).collect();
                    self.push(&all, chain, Action::Route { route, index: j });
                }
                Some((error, fence)) => {
                    self.statuses.error(id, error.clone());
                    self.entries.push(Entry {
                        conditions: fence,
                        chain: chain.clone(),
                        action: Action::Fence { error },
                        programmed: true,
                        duplicate_of: None,
                    });
                }
            }
        }
    }

    fn push(&mut self, conds: &[&'a MatchCondition], chain: &[ProxyId], action: Action<'a>) {
        self.entries.push(Entry {
            conditions: conditions::merge(conds),
            chain: chain.to_vec(),
            action,
            programmed: true,
            duplicate_of: None,
        });
    }
}

/// Why route `j` cannot be served, and the conditions its fence takes.
fn route_problem(route: &Route, j: usize, inherited: &[&MatchCondition]) -> Option<(ProxyError, Merged)> {
    let field = format!("spec.routes[{j}]");
    let actions = usize::from(!route.services.is_empty())
        + usize::from(route.request_redirect_policy.is_some())
        + usize::from(route.direct_response_policy.is_some());
    let all: Vec<&MatchCondition> = inherited.iter().copied().chain(&route.conditions).collect();
    let cond_field = format!("{field}.conditions");
    let error = if actions != 1 {
        Some(ProxyError::structural(
            type_::ROUTE_ERROR,
            reason::ROUTE_ACTION_COUNT_NOT_VALID,
            field,
            "must set exactly one of route.services or route.requestRedirectPolicy or route.directResponsePolicy",
        ))
    } else {
        conditions::route_path_valid(&route.conditions, &cond_field)
            .and_then(|()| conditions::headers_valid(&all, &cond_field))
            .and_then(|()| conditions::queries_valid(&all, &cond_field))
            .err()
    }?;
    Some((error, fence_conditions(route, inherited)))
}

/// What a fence for an invalid route matches: its conditions with what
/// cannot be expressed dropped or widened (never narrowed): a path that is
/// not valid falls back to the inherited path, or, for a regex Envoy
/// refuses, to its literal prefix; header and query conditions that do
/// not read are left out by the merge.
fn fence_conditions(route: &Route, inherited: &[&MatchCondition]) -> Merged {
    let paths: Vec<&MatchCondition> = route
        .conditions
        .iter()
        .filter(|c| !c.prefix.is_empty() || !c.exact.is_empty() || !c.regex.is_empty())
        .collect();
    let path_ok = conditions::route_path_valid(&route.conditions, "").is_ok();
    let mut owned: Vec<MatchCondition> = Vec::new();
    for c in &route.conditions {
        let mut c = c.clone();
        let has_path = !c.prefix.is_empty() || !c.exact.is_empty() || !c.regex.is_empty();
        if has_path && !path_ok {
            let single_regex = paths.len() == 1 && c.regex.starts_with('/');
            c.prefix = if single_regex {
                crate::envoy::regex::literal_prefix(&c.regex)
            } else {
                String::new()
            };
            c.exact.clear();
            c.regex.clear();
        }
        owned.push(c);
    }
    let all: Vec<&MatchCondition> = inherited.iter().copied().chain(&owned).collect();
    conditions::merge(&all)
}

/// What a fence for an include with invalid conditions matches: the
/// inherited conditions, its first path condition starting with `/` as a
/// prefix (an exact path or a regex's literal prefix widened to one), and
/// its header and query conditions that read. `None` when it has path
/// conditions and none of them can be expressed.
fn include_fence(inherited: &[&MatchCondition], conds: &[MatchCondition]) -> Option<Merged> {
    let paths = || {
        conds
            .iter()
            .filter(|c| !c.prefix.is_empty() || !c.exact.is_empty() || !c.regex.is_empty())
    };
    let path = paths().find_map(|c| {
        let p = if !c.prefix.is_empty() {
            c.prefix.clone()
        } else if !c.exact.is_empty() {
            c.exact.clone()
        } else {
            crate::envoy::regex::literal_prefix(&c.regex)
        };
        p.starts_with('/').then_some(p)
    });
    if path.is_none() && paths().next().is_some() {
        return None;
    }
    let mut owned: Vec<MatchCondition> = conds
        .iter()
        .map(|c| MatchCondition {
            prefix: String::new(),
            exact: String::new(),
            regex: String::new(),
            ..c.clone()
        })
        .collect();
    if let Some(prefix) = path {
        owned.push(MatchCondition {
            prefix,
            ..Default::default()
        });
    }
    let all: Vec<&MatchCondition> = inherited.iter().copied().chain(&owned).collect();
    Some(conditions::merge(&all))
}

/// The status error of a spec the loader could not read (`load_error` as
/// the loader words it). The loader has already reported it as a
/// diagnostic at its field's `file:line`, so the report does not repeat it.
pub(super) fn unreadable(load_error: &str) -> ProxyError {
    ProxyError::structural(
        type_::SPEC_ERROR,
        reason::SPEC_NOT_VALID,
        "spec",
        format!("HTTPProxy.Spec cannot be read: {load_error}"),
    )
}
