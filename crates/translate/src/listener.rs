//! Gateway listeners: protocol support, TLS references, allowed route kinds
//! and namespaces, and conflicts between listeners that share a port.
//!
//! Each listener ends with an [`Listener`] record that says whether it is
//! programmed into Envoy and carries the conditions for its status.

use std::collections::{BTreeMap, HashMap};

use api::gateway_api::experimental::gateways::{
    GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom, GatewayListenersTlsMode,
};

use crate::hostname;
use crate::index::Index;
use crate::route::model::RouteKind;
use crate::status::reason;
use crate::tls::{self, Certificate};

pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Http,
    Https,
}

impl Protocol {
    pub fn scheme(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Https => "https",
        }
    }
}

/// Which namespaces may attach routes.
#[derive(Clone, Debug, PartialEq)]
pub enum AllowedNamespaces {
    Same,
    All,
    Selector {
        match_labels: Option<BTreeMap<String, String>>,
        expressions: Vec<(String, String, Vec<String>)>,
    },
}

/// (reason, message) of a condition that is not True.
pub type Problem = (&'static str, String);

/// Where a listener was declared: on the Gateway itself or in one of the
/// ListenerSets it admitted (index into `GatewayState::listener_sets`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    Gateway,
    ListenerSet(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Listener {
    pub name: String,
    /// Unique among the Gateway's merged listeners (a ListenerSet listener
    /// may share its name with a Gateway listener): the owner of virtual
    /// hosts and the HTTPS route configuration name.
    pub key: String,
    pub origin: Origin,
    /// The namespace of the object that declares it (Gateway or
    /// ListenerSet): `allowedRoutes.namespaces.from: Same` and certificate
    /// references are relative to it.
    pub namespace: String,
    /// The protocol as written (conflicts compare it, supported or not).
    pub protocol_name: String,
    pub port: i32,
    /// None when the protocol is not supported (see `accepted`).
    pub protocol: Option<Protocol>,
    pub hostname: Option<String>,
    pub allowed_namespaces: AllowedNamespaces,
    /// Route kinds this listener accepts (valid ones only).
    pub kinds: Vec<RouteKind>,
    pub certificates: Vec<Certificate>,
    /// Accepted=False reason, if any.
    pub not_accepted: Option<Problem>,
    /// ResolvedRefs=False reason, if any.
    pub unresolved: Option<Problem>,
    /// Conflicted=True reason, if any.
    pub conflicted: Option<Problem>,
    /// Whether an HTTPS listener lacks usable certificates (cannot be programmed).
    pub missing_certificates: bool,
    pub attached_routes: i32,
    /// Refused for a value the loader could not read: the loader reported
    /// it at the value's `file:line`, so the Gateway's and ListenerSet's
    /// diagnostics do not repeat it (its status says it).
    pub loader_reported: bool,
}

impl Listener {
    /// Whether Envoy gets this listener.
    pub fn programmed(&self) -> bool {
        self.not_accepted.is_none() && self.conflicted.is_none() && !self.missing_certificates
    }

    pub fn allows_kind(&self, kind: RouteKind) -> bool {
        self.kinds.contains(&kind)
    }
}

fn supported_kinds(protocol: Protocol) -> &'static [RouteKind] {
    match protocol {
        Protocol::Http | Protocol::Https => &[RouteKind::Http, RouteKind::Grpc],
    }
}

fn kind_by_name(group: &str, kind: &str) -> Option<RouteKind> {
    match (group, kind) {
        (GATEWAY_GROUP, "HTTPRoute") => Some(RouteKind::Http),
        (GATEWAY_GROUP, "GRPCRoute") => Some(RouteKind::Grpc),
        _ => None,
    }
}

/// Builds and checks the listeners one object (Gateway or ListenerSet)
/// declares; conflicts are found over the merged list ([`detect_conflicts`]).
pub fn process(
    index: &Index<'_>,
    owner_ns: &str,
    specs: &[GatewayListeners],
    unreadable: &[api::Unreadable],
    origin: Origin,
    key_prefix: &str,
) -> Vec<Listener> {
    specs
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let owner_kind = match origin {
                Origin::Gateway => "Gateway",
                Origin::ListenerSet(_) => "ListenerSet",
            };
            let mut l = one(index, owner_kind, owner_ns, i, l);
            // A value the loader could not read: the loader put an inert
            // listener in its place (`api::Unreadable`, `rule` = the
            // listener's index); refused whatever else it says.
            if let Some(u) = unreadable.iter().find(|u| u.is_in("listeners", i)) {
                l.not_accepted = Some((reason::INVALID, u.to_string()));
                // Its references were not read: none is claimed missing.
                l.unresolved = None;
                l.conflicted = None;
                l.loader_reported = true;
            }
            l.origin = origin;
            l.key = format!("{key_prefix}{}", l.name);
            l
        })
        .collect()
}

fn one(
    index: &Index<'_>,
    owner_kind: &'static str,
    gateway_ns: &str,
    position: usize,
    spec: &GatewayListeners,
) -> Listener {
    let mut not_accepted = None;
    let mut unresolved = None;
    let protocol = match spec.protocol.as_str() {
        "HTTP" => Some(Protocol::Http),
        "HTTPS" => Some(Protocol::Https),
        other => {
            not_accepted = Some((
                reason::UNSUPPORTED_PROTOCOL,
                format!("protocol {other} is not supported (supported: HTTP, HTTPS)"),
            ));
            None
        }
    };
    if !(1..=65535).contains(&spec.port) {
        not_accepted = Some((
            reason::PORT_UNAVAILABLE,
            format!("port {} is out of range 1-65535", spec.port),
        ));
    }
    if let Some(h) = spec.hostname.as_deref()
        && !hostname::is_valid(h, true)
        && not_accepted.is_none()
    {
        // The API server's validation would have refused it; Envoy would
        // refuse a control character in a domain or SNI name (a NACK of the
        // whole listener or route configuration), so only this listener is
        // refused.
        not_accepted = Some((
            reason::UNSUPPORTED_VALUE,
            format!(
                "spec.listeners[{position}].hostname: {h:?} is not a valid hostname (RFC 1123 DNS subdomain in lower case, an optional leading \"*.\" label, no IP address)"
            ),
        ));
    }

    if !is_valid_section_name(&spec.name) && not_accepted.is_none() {
        // The name reaches Envoy (HTTPS route configuration names) and
        // status; the API server would have refused it.
        not_accepted = Some((
            reason::UNSUPPORTED_VALUE,
            format!(
                "spec.listeners[{position}].name: {:?} is not a valid listener name (lower-case RFC 1123 subdomain, at most 253 characters)",
                spec.name
            ),
        ));
    }

    // Allowed kinds: explicit list filtered to what the protocol supports.
    let (kinds, bad_kinds): (Vec<_>, Vec<_>) =
        match spec.allowed_routes.as_ref().and_then(|a| a.kinds.as_ref()) {
            Some(list) => {
                let mut good = Vec::new();
                let mut bad = Vec::new();
                for k in list {
                    let group = k.group.as_deref().unwrap_or(GATEWAY_GROUP);
                    match kind_by_name(group, &k.kind) {
                        Some(rk) if protocol.is_some_and(|p| supported_kinds(p).contains(&rk)) => {
                            if !good.contains(&rk) {
                                good.push(rk);
                            }
                        }
                        _ => bad.push(format!("{group}/{}", k.kind)),
                    }
                }
                (good, bad)
            }
            None => (
                protocol.map(|p| supported_kinds(p).to_vec()).unwrap_or_default(),
                Vec::new(),
            ),
        };
    if !bad_kinds.is_empty() {
        unresolved = Some((
            reason::INVALID_ROUTE_KINDS,
            format!(
                "allowedRoutes.kinds: unsupported route kinds {}",
                bad_kinds.join(", ")
            ),
        ));
    }

    let allowed_namespaces = match spec.allowed_routes.as_ref().and_then(|a| a.namespaces.as_ref()) {
        None => AllowedNamespaces::Same,
        Some(ns) => match ns.from {
            None | Some(GatewayListenersAllowedRoutesNamespacesFrom::Same) => AllowedNamespaces::Same,
            Some(GatewayListenersAllowedRoutesNamespacesFrom::All) => AllowedNamespaces::All,
            Some(GatewayListenersAllowedRoutesNamespacesFrom::Selector) => {
                let sel = ns.selector.as_ref();
                let match_labels = sel.and_then(|s| s.match_labels.clone());
                let expressions: Vec<(String, String, Vec<String>)> = sel
                    .and_then(|s| s.match_expressions.as_ref())
                    .map(|es| {
                        es.iter()
                            .map(|e| {
                                (
                                    e.key.clone(),
                                    e.operator.clone(),
                                    e.values.clone().unwrap_or_default(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if let Some(problem) = selector_problem(match_labels.as_ref(), &expressions)
                    && not_accepted.is_none()
                {
                    not_accepted = Some((problem.reason(), format!("spec.listeners[{position}].{problem}")));
                }
                AllowedNamespaces::Selector {
                    match_labels,
                    expressions,
                }
            }
        },
    };

    let mut certificates = Vec::new();
    let mut missing_certificates = false;
    if protocol == Some(Protocol::Https) {
        let tls = spec.tls.as_ref();
        if matches!(
            tls.and_then(|t| t.mode.as_ref()),
            Some(GatewayListenersTlsMode::Passthrough)
        ) {
            not_accepted = Some((
                reason::UNSUPPORTED_PROTOCOL,
                "tls.mode Passthrough is not supported on HTTPS listeners".into(),
            ));
        }
        let refs = tls
            .and_then(|t| t.certificate_refs.as_deref())
            .unwrap_or_default();
        for r in refs {
            match tls::resolve(
                index,
                owner_kind,
                gateway_ns,
                r.group.as_deref().unwrap_or(""),
                r.kind.as_deref().unwrap_or("Secret"),
                r.namespace.as_deref(),
                &r.name,
            ) {
                Ok(c) => certificates.push(c),
                Err(e) => {
                    unresolved.get_or_insert_with(|| (e.reason(), e.to_string()));
                }
            }
        }
        if refs.is_empty() {
            unresolved.get_or_insert((
                reason::INVALID_CERTIFICATE_REF,
                "tls.certificateRefs: an HTTPS listener needs at least one certificate".into(),
            ));
        }
        missing_certificates = certificates.is_empty() || certificates.len() != refs.len();
    }

    Listener {
        name: spec.name.clone(),
        key: spec.name.clone(),
        origin: Origin::Gateway,
        namespace: gateway_ns.to_string(),
        protocol_name: spec.protocol.clone(),
        port: spec.port,
        protocol,
        hostname: spec.hostname.clone(),
        allowed_namespaces,
        kinds,
        certificates,
        not_accepted,
        unresolved,
        conflicted: None,
        missing_certificates,
        attached_routes: 0,
        loader_reported: false,
    }
}

/// The CRD's `SectionName`: `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`,
/// at most 253 characters.
fn is_valid_section_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Why `from: Selector` selects nothing: the spec requires a selector with
/// `from: Selector`, so a missing one (a misspelt `selectr:` reads as
/// missing) or one without any requirement is refused rather than read as
/// Kubernetes' empty selector (every namespace): a typo must not open the
/// listener to every tenant. An invalid `matchExpressions` entry is refused
/// as the API server would. The listener is then not accepted
/// ([`SelectorError::reason`]); each message names its field under the
/// listener.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error(
        "allowedRoutes.namespaces.selector: from: Selector needs a selector with at least one matchLabels or matchExpressions entry; no namespace is selected"
    )]
    Empty,
    /// Every invalid `matchExpressions` entry, by index.
    #[error("{}", requirements_text(.0))]
    Requirements(Vec<(usize, crate::selector::RequirementError)>),
}

impl SelectorError {
    /// The listener's `Accepted=False` reason.
    pub fn reason(&self) -> &'static str {
        reason::UNSUPPORTED_VALUE
    }
}

fn requirements_text(problems: &[(usize, crate::selector::RequirementError)]) -> String {
    problems
        .iter()
        .map(|(i, p)| format!("allowedRoutes.namespaces.selector.matchExpressions[{i}]: {p}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The [`SelectorError`] of a listener's selector; `None` when it is usable.
fn selector_problem(
    match_labels: Option<&BTreeMap<String, String>>,
    expressions: &[(String, String, Vec<String>)],
) -> Option<SelectorError> {
    if match_labels.is_none_or(BTreeMap::is_empty) && expressions.is_empty() {
        return Some(SelectorError::Empty);
    }
    let problems: Vec<_> = expressions
        .iter()
        .enumerate()
        .filter_map(|(i, (key, operator, values))| {
            crate::selector::requirement_problem(&crate::selector::Requirement {
                key,
                operator,
                values,
            })
            .map(|p| (i, p))
        })
        .collect();
    (!problems.is_empty()).then_some(SelectorError::Requirements(problems))
}

/// Listeners sharing a port must agree on the protocol, and must differ in
/// hostname. The first listener on a port keeps it; later ones that
/// conflict are marked Conflicted and not programmed. `listeners` is the
/// merged list in precedence order (the Gateway's own listeners in spec
/// order, then each admitted ListenerSet's, see `listener_set`). The
/// protocol is compared as written, so an unsupported protocol (TCP) still
/// claims or loses its port as the spec orders. A repeated listener name is
/// a conflict within one object only (a ListenerSet may reuse a Gateway
/// listener's name).
pub fn detect_conflicts(listeners: &mut [Listener]) {
    let mut port_protocol: HashMap<i32, (String, String)> = HashMap::new();
    let mut seen_hostnames: HashMap<(i32, Option<String>), String> = HashMap::new();
    let mut seen_names: HashMap<(Origin, String), usize> = HashMap::new();
    #[allow(clippy::needless_range_loop)] // later listeners are mutated by index
    for i in 0..listeners.len() {
        listeners[i].conflicted = None;
        let l = &listeners[i];
        if let Some(first) = seen_names.get(&(l.origin, l.name.clone())) {
            let msg = format!("listener name {:?} is already used by listener {}", l.name, first);
            listeners[i].conflicted = Some((reason::HOSTNAME_CONFLICT, msg));
            continue;
        }
        seen_names.insert((l.origin, l.name.clone()), i);
        let unsupported_only = matches!(&l.not_accepted, Some((r, _)) if *r == reason::UNSUPPORTED_PROTOCOL);
        if l.not_accepted.is_some() && !unsupported_only {
            continue;
        }
        match port_protocol.get(&l.port) {
            Some((p, owner)) if *p != l.protocol_name => {
                let msg = format!(
                    "port {} is already used with protocol {p} by listener {owner}",
                    l.port
                );
                listeners[i].conflicted = Some((reason::PROTOCOL_CONFLICT, msg));
                continue;
            }
            Some(_) => {}
            None => {
                port_protocol.insert(l.port, (l.protocol_name.clone(), l.key.clone()));
            }
        }
        if l.protocol.is_none() {
            continue;
        }
        let key = (l.port, l.hostname.clone());
        if let Some(other) = seen_hostnames.get(&key) {
            let msg = format!(
                "listener {} already serves hostname {} on port {}",
                other,
                l.hostname.as_deref().unwrap_or("(any)"),
                l.port
            );
            listeners[i].conflicted = Some((reason::HOSTNAME_CONFLICT, msg));
            continue;
        }
        seen_hostnames.insert(key, l.key.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::is_valid_section_name;

    #[test]
    fn a_selector_error_names_every_invalid_requirement() {
        use super::{SelectorError, selector_problem};
        let exprs = vec![
            ("team".to_string(), "In".to_string(), Vec::new()),
            ("tier".to_string(), "Exists".to_string(), Vec::new()),
            ("zone".to_string(), "Near".to_string(), vec!["a".to_string()]),
        ];
        let problem = selector_problem(None, &exprs).expect("two entries are invalid");
        assert!(
            matches!(&problem, SelectorError::Requirements(p) if p.len() == 2),
            "{problem:?}"
        );
        assert_eq!(
            problem.to_string(),
            "allowedRoutes.namespaces.selector.matchExpressions[0]: operator In needs at least one value (key \"team\"); \
             allowedRoutes.namespaces.selector.matchExpressions[2]: unknown operator \"Near\" (key \"zone\"; allowed: In, NotIn, Exists, DoesNotExist)"
        );
        assert_eq!(selector_problem(None, &[]), Some(SelectorError::Empty));
        assert_eq!(selector_problem(None, &exprs[1..2]), None);
    }

    #[test]
    fn section_names_follow_the_crd_pattern() {
        for good in ["http", "https-foo", "80", "a.b", "a-1.b-2"] {
            assert!(is_valid_section_name(good), "{good:?}");
        }
        let long = "a".repeat(254);
        for bad in [
            "",
            "HTTP",
            "a_b",
            "-a",
            "a-",
            "a..b",
            ".a",
            "a\nb",
            "a/b",
            long.as_str(),
        ] {
            assert!(!is_valid_section_name(bad), "{bad:?}");
        }
    }
}
