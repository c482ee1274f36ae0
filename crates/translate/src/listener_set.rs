//! ListenerSets (Gateway API v1.5, GEP-1713): which ListenerSets a Gateway
//! admits, and how their listeners merge into the Gateway's. This file is
//! where that decision is made.
//!
//! Data model: a ListenerSet names one parent Gateway (`spec.parentRef`).
//! The Gateway admits it through `spec.allowedListeners.namespaces.from`:
//! absent or `None` admits nothing, `Same` its own namespace, `All` every
//! namespace, `Selector` the namespaces whose labels match (a missing or
//! empty selector selects nothing, as for `allowedRoutes`). An admitted
//! set's listeners are appended to the Gateway's [`crate::listener::Listener`] list with
//! [`Origin::ListenerSet`], so binding, hostname intersection, isolation
//! (one virtual host per hostname, the most specific wins in Envoy) and
//! xDS treat them exactly as Gateway listeners. Precedence for conflicts
//! is the list order: the Gateway's own listeners first, then the sets by
//! creation time, then namespace/name (the spec's ordering).

use api::Sourced;
use api::gateway_api::experimental::gateways::{
    GatewayAllowedListenersNamespacesFrom as From, GatewayListeners,
};
use api::gateway_api::experimental::listenersets::ListenerSet;

use crate::gateway::GatewayState;
use crate::index::{Index, ns_name};
use crate::listener::{self, GATEWAY_GROUP, Origin, Problem};
use crate::selector::{self, Requirement};
use crate::status::{ListenerSetStatus, Stamp, StatusBody, reason};

/// One ListenerSet whose parent is one of our Gateways.
pub struct ListenerSetState<'a> {
    pub namespace: String,
    pub name: String,
    pub generation: i64,
    pub set: &'a Sourced<ListenerSet>,
    /// Index of the parent among the translator's Gateways.
    pub gateway: usize,
    /// Why the Gateway does not take it (Accepted=False and
    /// Programmed=False with this reason); its listeners are then not merged.
    pub refused: Option<Problem>,
}

impl ListenerSetState<'_> {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Why a parent Gateway does not admit a ListenerSet (reason
/// `NotAllowed`); `gateway` is `Gateway ns/name`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum NotAdmitted {
    #[error(
        "{gateway} does not allow ListenerSets (spec.allowedListeners.namespaces.from is None or absent)"
    )]
    NotAllowed { gateway: String },
    #[error("{gateway} allows ListenerSets from its own namespace only, not from {namespace}")]
    OtherNamespace { gateway: String, namespace: String },
    #[error("{gateway}: spec.allowedListeners.namespaces.selector does not select namespace {namespace}")]
    NotSelected { gateway: String, namespace: String },
}

/// A ListenerSet's listeners that do not read as a Gateway's (reason
/// `ListenersNotValid`).
#[derive(Debug, thiserror::Error)]
#[error("spec.listeners: cannot be read as Gateway listeners: {0}")]
struct ListenersUnreadable(#[source] serde_json::Error);

/// Whether `gateway` admits a ListenerSet from namespace `set_ns`.
fn admits(index: &Index<'_>, gateway: &GatewayState<'_>, set_ns: &str) -> Result<(), NotAdmitted> {
    let allowed = gateway.gateway.object.spec.allowed_listeners.as_ref();
    let ns = allowed.and_then(|a| a.namespaces.as_ref());
    let who = format!("Gateway {}/{}", gateway.namespace, gateway.name);
    match ns.and_then(|n| n.from.as_ref()) {
        None | Some(From::None) => Err(NotAdmitted::NotAllowed { gateway: who }),
        Some(From::Same) if set_ns == gateway.namespace => Ok(()),
        Some(From::Same) => Err(NotAdmitted::OtherNamespace {
            gateway: who,
            namespace: set_ns.to_string(),
        }),
        Some(From::All) => Ok(()),
        Some(From::Selector) => {
            let sel = ns.and_then(|n| n.selector.as_ref());
            let labels = sel.and_then(|s| s.match_labels.as_ref());
            let exprs: Vec<Requirement<'_>> = sel
                .and_then(|s| s.match_expressions.as_ref())
                .map(|es| {
                    es.iter()
                        .map(|e| Requirement {
                            key: &e.key,
                            operator: &e.operator,
                            values: e.values.as_deref().unwrap_or_default(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            // A missing or empty selector selects nothing (never every
            // namespace), and an invalid requirement selects nothing too.
            let empty = labels.is_none_or(|m| m.is_empty()) && exprs.is_empty();
            let invalid = exprs.iter().any(|r| selector::requirement_problem(r).is_some());
            if !empty && !invalid && selector::matches(labels, &exprs, &index.labels_of_namespace(set_ns)) {
                Ok(())
            } else {
                Err(NotAdmitted::NotSelected {
                    gateway: who,
                    namespace: set_ns.to_string(),
                })
            }
        }
    }
}

/// Finds each ListenerSet's parent among `gateways`, decides whether it is
/// admitted and merges the admitted sets' listeners; then finds conflicts
/// over each Gateway's merged listeners. Sets whose parent is not one of
/// ours are left out (another controller's).
pub fn attach<'a>(
    index: &Index<'_>,
    sets: &'a [Sourced<ListenerSet>],
    gateways: &mut [GatewayState<'_>],
) -> Vec<ListenerSetState<'a>> {
    type Time = api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let mut ordered: Vec<&Sourced<ListenerSet>> = sets.iter().collect();
    let key = |s: &Sourced<ListenerSet>| -> (bool, Option<Time>, (String, String)) {
        let t = s.object.metadata.creation_timestamp.clone();
        (t.is_none(), t, ns_name(&s.object.metadata))
    };
    ordered.sort_by_key(|s| key(s));
    let mut out = Vec::new();
    let mut touched = vec![false; gateways.len()];
    for set in ordered {
        let (namespace, name) = ns_name(&set.object.metadata);
        let p = &set.object.spec.parent_ref;
        if p.group.as_deref().unwrap_or(GATEWAY_GROUP) != GATEWAY_GROUP
            || p.kind.as_deref().unwrap_or("Gateway") != "Gateway"
        {
            continue;
        }
        let gw_ns = p.namespace.as_deref().unwrap_or(&namespace);
        let Some(gi) = gateways
            .iter()
            .position(|g| g.namespace == gw_ns && g.name == p.name)
        else {
            continue;
        };
        let si = out.len();
        let mut state = ListenerSetState {
            namespace: namespace.clone(),
            name: name.clone(),
            generation: set.object.metadata.generation.unwrap_or(1),
            set,
            gateway: gi,
            refused: None,
        };
        match admits(index, &gateways[gi], &namespace) {
            Err(e) => state.refused = Some((reason::NOT_ALLOWED, e.to_string())),
            Ok(()) => match as_gateway_listeners(set) {
                Err(e) => state.refused = Some((reason::LISTENERS_NOT_VALID, e.to_string())),
                Ok(specs) => {
                    let prefix = format!("{namespace}/{name}/");
                    let merged = listener::process(
                        index,
                        &namespace,
                        &specs,
                        &set.unreadable,
                        Origin::ListenerSet(si),
                        &prefix,
                    );
                    gateways[gi].listeners.extend(merged);
                    touched[gi] = true;
                }
            },
        }
        out.push(state);
    }
    for (gw, touched) in gateways.iter_mut().zip(touched) {
        if touched {
            listener::detect_conflicts(&mut gw.listeners);
        }
    }
    for (gi, gw) in gateways.iter_mut().enumerate() {
        let attached = out
            .iter()
            .enumerate()
            .filter(|(si, s)| {
                s.gateway == gi
                    && s.refused.is_none()
                    && gw
                        .listeners
                        .iter()
                        .any(|l| l.origin == Origin::ListenerSet(*si) && l.programmed())
            })
            .count();
        gw.attached_listener_sets = i32::try_from(attached).unwrap_or(i32::MAX);
    }
    out
}

/// A ListenerSet listener has the schema of a Gateway listener (the CRDs
/// share `ListenerEntry`); read it as one so that one code path checks both.
fn as_gateway_listeners(set: &Sourced<ListenerSet>) -> Result<Vec<GatewayListeners>, ListenersUnreadable> {
    serde_json::to_value(&set.object.spec.listeners)
        .and_then(serde_json::from_value)
        .map_err(ListenersUnreadable)
}

impl ListenerSetState<'_> {
    /// This set's listeners in the parent's merged list (`si` = its index
    /// in the list [`attach`] returned).
    pub fn listeners<'g>(
        &self,
        gw: &'g GatewayState<'_>,
        si: usize,
    ) -> impl Iterator<Item = &'g listener::Listener> {
        gw.listeners
            .iter()
            .filter(move |l| l.origin == Origin::ListenerSet(si))
    }

    /// The ListenerSet's status stanza (after routes were attached).
    pub fn status(&self, gw: &GatewayState<'_>, si: usize) -> StatusBody {
        let stamp = Stamp {
            generation: self.generation,
        };
        if let Some((r, m)) = &self.refused {
            return StatusBody::ListenerSet(ListenerSetStatus {
                conditions: vec![
                    stamp.condition("Accepted", false, r, m.clone()),
                    stamp.condition("Programmed", false, r, m.clone()),
                ],
                listeners: Vec::new(),
            });
        }
        let total = self.listeners(gw, si).count();
        let programmed = self.listeners(gw, si).filter(|l| l.programmed()).count();
        let conditions = if !gw.class_accepted {
            let m = format!(
                "the GatewayClass of Gateway {}/{} is not accepted",
                gw.namespace, gw.name
            );
            vec![
                stamp.condition("Accepted", false, reason::INVALID_PARAMETERS, m.clone()),
                stamp.condition("Programmed", false, reason::INVALID, m),
            ]
        } else if programmed == 0 {
            let m = format!("none of its {total} listeners is valid");
            vec![
                stamp.condition("Accepted", false, reason::LISTENERS_NOT_VALID, m.clone()),
                stamp.condition("Programmed", false, reason::LISTENERS_NOT_VALID, m),
            ]
        } else if programmed < total {
            vec![
                stamp.condition(
                    "Accepted",
                    true,
                    reason::LISTENERS_NOT_VALID,
                    format!("{} of {total} listeners are invalid", total - programmed),
                ),
                stamp.condition(
                    "Programmed",
                    true,
                    reason::PROGRAMMED,
                    "ListenerSet is programmed",
                ),
            ]
        } else {
            vec![
                stamp.condition("Accepted", true, reason::ACCEPTED, "ListenerSet is accepted"),
                stamp.condition(
                    "Programmed",
                    true,
                    reason::PROGRAMMED,
                    "ListenerSet is programmed",
                ),
            ]
        };
        StatusBody::ListenerSet(ListenerSetStatus {
            conditions,
            listeners: self
                .listeners(gw, si)
                .map(|l| crate::gateway::listener_status(l, &stamp))
                .collect(),
        })
    }

    /// Why listeners are refused, one line each, for the diagnostics (but
    /// those refused for a value the loader could not read: it reported
    /// them, at the value).
    pub fn problems(&self, gw: &GatewayState<'_>, si: usize) -> Vec<String> {
        if let Some((r, m)) = &self.refused {
            return vec![format!("Accepted=False ({r}): {m}")];
        }
        self.listeners(gw, si)
            .filter(|l| !l.loader_reported)
            .filter_map(|l| {
                let (r, m) = l.conflicted.as_ref().or(l.not_accepted.as_ref())?;
                Some(format!("listener {}: Accepted=False ({r}): {m}", l.name))
            })
            .collect()
    }
}

#[cfg(test)]
mod admission_error_tests {
    use super::*;

    #[test]
    fn admission_errors_keep_their_text() {
        assert_eq!(
            NotAdmitted::NotAllowed {
                gateway: "Gateway infra/gw".into()
            }
            .to_string(),
            "Gateway infra/gw does not allow ListenerSets (spec.allowedListeners.namespaces.from is None or absent)"
        );
        assert_eq!(
            NotAdmitted::NotSelected {
                gateway: "Gateway infra/gw".into(),
                namespace: "team".into()
            }
            .to_string(),
            "Gateway infra/gw: spec.allowedListeners.namespaces.selector does not select namespace team"
        );
    }
}
