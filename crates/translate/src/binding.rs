//! Route binding: which listeners of which Gateway a route attaches to, and
//! why not when it does not. This file is where that decision is made.
//!
//! For each `parentRef`: the Gateway must be one of ours; `sectionName` and
//! `port` narrow the candidate listeners (`NoMatchingParent` if none is
//! left); the listener must allow the route's kind and namespace
//! (`NotAllowedByListeners`), and be accepted and not conflicted (a route
//! whose only candidates are refused listeners is not accepted either,
//! `NotAllowedByListeners` naming their state); and the route's valid
//! hostnames must intersect the listener's (`NoMatchingListenerHostname`).
//! Invalid route hostnames (`hostname::route_hostname_problems`) are never
//! programmed; a route whose hostnames are all invalid is refused
//! (`UnsupportedValue`) rather than read as naming none, which would make
//! it a catch-all for every host of the listener.
//!
//! A parentRef of kind `ListenerSet` names an admitted ListenerSet; its
//! candidates are that set's listeners (merged into the parent Gateway's,
//! see `listener_set`), and a parentRef of kind `Gateway` only ever
//! reaches the Gateway's own listeners (upstream
//! ListenerSetGatewayParentSectionNameNotFound).

use crate::gateway::GatewayState;
use crate::hostname;
use crate::index::Index;
use crate::listener::{AllowedNamespaces, GATEWAY_GROUP, Listener, Origin};
use crate::listener_set::ListenerSetState;
use crate::route::model::{ParentRef, Route};
use crate::selector::{self, Requirement};
use crate::status::reason;

/// A route attached to one listener, serving these hostnames there.
#[derive(Clone, Debug)]
pub struct Attachment {
    pub listener: usize,
    pub hostnames: Vec<String>,
}

/// The outcome for one parentRef of a route that names one of our Gateways.
#[derive(Clone, Debug)]
pub struct ParentBinding {
    pub parent_index: usize,
    pub gateway: usize,
    /// Empty when not accepted; then `refused` says why.
    pub attachments: Vec<Attachment>,
    pub refused: Option<(&'static str, String)>,
}

/// `Same` is relative to the object declaring the listener (the Gateway or
/// the ListenerSet).
fn namespace_allowed(index: &Index<'_>, listener: &Listener, route_ns: &str) -> bool {
    match &listener.allowed_namespaces {
        AllowedNamespaces::Same => listener.namespace == route_ns,
        AllowedNamespaces::All => true,
        // No requirement selects nothing (`listener::selector_problem`
        // refuses such a listener too), never every namespace.
        AllowedNamespaces::Selector {
            match_labels,
            expressions,
        } if match_labels.as_ref().is_none_or(|m| m.is_empty()) && expressions.is_empty() => false,
        AllowedNamespaces::Selector {
            match_labels,
            expressions,
        } => {
            let reqs: Vec<Requirement<'_>> = expressions
                .iter()
                .map(|(k, op, v)| Requirement {
                    key: k,
                    operator: op,
                    values: v,
                })
                .collect();
            selector::matches(match_labels.as_ref(), &reqs, &index.labels_of_namespace(route_ns))
        }
    }
}

/// What a parentRef names among ours: a Gateway (its own listeners) or a
/// ListenerSet (its listeners, on its parent Gateway).
enum Parent {
    Gateway(usize),
    ListenerSet(usize),
}

fn find_parent(
    gateways: &[GatewayState],
    sets: &[ListenerSetState],
    route_ns: &str,
    p: &ParentRef,
) -> Option<Parent> {
    if p.group != GATEWAY_GROUP {
        return None;
    }
    let ns = p.namespace.as_deref().unwrap_or(route_ns);
    match p.kind.as_ref() {
        "Gateway" => gateways
            .iter()
            .position(|g| g.namespace == ns && g.name == p.name)
            .map(Parent::Gateway),
        "ListenerSet" => sets
            .iter()
            .position(|s| s.namespace == ns && s.name == p.name)
            .map(Parent::ListenerSet),
        _ => None,
    }
}

pub fn bind(
    index: &Index<'_>,
    gateways: &[GatewayState],
    sets: &[ListenerSetState],
    route: &Route,
) -> Vec<ParentBinding> {
    let mut out = Vec::new();
    for (parent_index, p) in route.parent_refs().iter().enumerate() {
        match find_parent(gateways, sets, route.namespace, p) {
            None => {}
            Some(Parent::Gateway(gi)) => {
                out.push(bind_one(
                    index,
                    &gateways[gi],
                    gi,
                    Origin::Gateway,
                    parent_index,
                    p,
                    route,
                ));
            }
            Some(Parent::ListenerSet(si)) => {
                let set = &sets[si];
                let gi = set.gateway;
                if let Some((r, _)) = &set.refused {
                    out.push(ParentBinding {
                        parent_index,
                        gateway: gi,
                        attachments: Vec::new(),
                        refused: Some((
                            reason::NOT_ALLOWED_BY_LISTENERS,
                            format!(
                                "ListenerSet {}/{} is not attached to Gateway {}/{} ({r})",
                                set.namespace, set.name, gateways[gi].namespace, gateways[gi].name
                            ),
                        )),
                    });
                    continue;
                }
                out.push(bind_one(
                    index,
                    &gateways[gi],
                    gi,
                    Origin::ListenerSet(si),
                    parent_index,
                    p,
                    route,
                ));
            }
        }
    }
    out
}

pub fn bind_one(
    index: &Index<'_>,
    gw: &GatewayState,
    gi: usize,
    origin: Origin,
    parent_index: usize,
    p: &ParentRef,
    route: &Route,
) -> ParentBinding {
    let refuse = |r: &'static str, m: String| ParentBinding {
        parent_index,
        gateway: gi,
        attachments: Vec::new(),
        refused: Some((r, m)),
    };
    let candidates: Vec<usize> = gw
        .listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| l.origin == origin)
        .filter(|(_, l)| p.section_name.as_deref().is_none_or(|s| s == l.name))
        .filter(|(_, l)| p.port.is_none_or(|port| port == l.port))
        .map(|(i, _)| i)
        .collect();
    if candidates.is_empty() {
        let what = match (&p.section_name, p.port) {
            (Some(s), Some(port)) => format!("no listener named {s:?} on port {port}"),
            (Some(s), None) => format!("no listener named {s:?}"),
            (None, Some(port)) => format!("no listener on port {port}"),
            (None, None) => "the Gateway has no listeners".to_string(),
        };
        return refuse(
            reason::NO_MATCHING_PARENT,
            format!("Gateway {}/{}: {what}", gw.namespace, gw.name),
        );
    }
    // A listener that is not accepted or is conflicted is not programmed:
    // a route only on such listeners is not accepted (spec: AttachedRoutes
    // counts routes with Accepted=True only).
    let (usable, refused): (Vec<usize>, Vec<usize>) = candidates.into_iter().partition(|&i| {
        let l = &gw.listeners[i];
        l.not_accepted.is_none() && l.conflicted.is_none()
    });
    if usable.is_empty() {
        let states: Vec<String> = refused
            .iter()
            .map(|&i| {
                let l = &gw.listeners[i];
                let r = match (&l.not_accepted, &l.conflicted) {
                    (Some((r, _)), _) => format!("Accepted=False ({r})"),
                    (None, Some((r, _))) => format!("Conflicted=True ({r})"),
                    (None, None) => String::new(),
                };
                format!("{} is {r}", l.name)
            })
            .collect();
        return refuse(
            reason::NOT_ALLOWED_BY_LISTENERS,
            format!(
                "no listener of Gateway {}/{} can take routes: listener {}",
                gw.namespace,
                gw.name,
                states.join(", listener ")
            ),
        );
    }
    let allowed: Vec<usize> = usable
        .into_iter()
        .filter(|&i| {
            let l = &gw.listeners[i];
            l.allows_kind(route.kind) && namespace_allowed(index, l, route.namespace)
        })
        .collect();
    if allowed.is_empty() {
        return refuse(
            reason::NOT_ALLOWED_BY_LISTENERS,
            format!(
                "no listener of Gateway {}/{} allows {} from namespace {}",
                gw.namespace,
                gw.name,
                route.kind.kind(),
                route.namespace
            ),
        );
    }
    let valid_hostnames = hostname::valid_route_hostnames(route.hostnames());
    if !route.hostnames().is_empty() && valid_hostnames.is_empty() {
        return refuse(
            reason::UNSUPPORTED_VALUE,
            format!(
                "no valid hostname: {}",
                hostname::route_hostname_problems(route.hostnames()).join("; ")
            ),
        );
    }
    let attachments: Vec<Attachment> = allowed
        .into_iter()
        .filter_map(|i| {
            let hostnames = hostname::effective(gw.listeners[i].hostname.as_deref(), &valid_hostnames);
            (!hostnames.is_empty()).then_some(Attachment {
                listener: i,
                hostnames,
            })
        })
        .collect();
    if attachments.is_empty() {
        return refuse(
            reason::NO_MATCHING_LISTENER_HOSTNAME,
            format!(
                "no hostname of the route ({}) matches a listener of Gateway {}/{}",
                route.hostnames().join(", "),
                gw.namespace,
                gw.name
            ),
        );
    }
    ParentBinding {
        parent_index,
        gateway: gi,
        attachments,
        refused: None,
    }
}
