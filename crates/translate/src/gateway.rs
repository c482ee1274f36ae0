//! Gateways of our classes and their status.

use api::Sourced;
use api::gateway_api::experimental::gateways::Gateway;

use crate::index::{Index, ns_name};
use crate::listener::{self, GATEWAY_GROUP, Listener};
use crate::route::model::RouteKind;
use crate::status::{
    GatewayAddress, GatewayStatus, ListenerStatus, RouteGroupKind, Stamp, StatusBody, reason,
};

pub struct GatewayState<'a> {
    pub namespace: String,
    pub name: String,
    pub generation: i64,
    pub gateway: &'a Sourced<Gateway>,
    /// False when its GatewayClass is ours but not accepted.
    pub class_accepted: bool,
    pub listeners: Vec<Listener>,
}

impl GatewayState<'_> {
    pub fn key(&self) -> String {
        crate::naming::gateway(&self.namespace, &self.name)
    }

    pub fn new<'a>(index: &Index<'_>, gw: &'a Sourced<Gateway>, class_accepted: bool) -> GatewayState<'a> {
        let (namespace, name) = ns_name(&gw.object.metadata);
        let listeners = listener::process(index, &namespace, &gw.object.spec.listeners);
        GatewayState {
            namespace,
            name,
            generation: gw.object.metadata.generation.unwrap_or(1),
            gateway: gw,
            class_accepted,
            listeners,
        }
    }

    /// Why listeners are refused (Accepted=False), one line each, for the
    /// diagnostics: a refused listener must not only show in status.
    pub fn listener_problems(&self) -> Vec<String> {
        self.listeners
            .iter()
            .filter_map(|l| {
                l.not_accepted
                    .as_ref()
                    .map(|(r, m)| format!("listener {}: Accepted=False ({r}): {m}", l.name))
            })
            .collect()
    }

    /// The Gateway's status stanza (after routes were attached).
    pub fn status(&self, time: &str, address: &str) -> StatusBody {
        let stamp = Stamp {
            generation: self.generation,
            time,
        };
        let programmed = self.listeners.iter().filter(|l| l.programmed()).count();
        let total = self.listeners.len();
        let accepted = if !self.class_accepted {
            stamp.condition(
                "Accepted",
                false,
                reason::INVALID_PARAMETERS,
                "GatewayClass is not accepted",
            )
        } else if programmed == total {
            stamp.condition("Accepted", true, reason::ACCEPTED, "Gateway is accepted")
        } else {
            let ok = programmed > 0;
            stamp.condition(
                "Accepted",
                ok,
                reason::LISTENERS_NOT_VALID,
                format!("{} of {} listeners are invalid", total - programmed, total),
            )
        };
        let is_programmed = self.class_accepted && programmed > 0;
        let programmed_cond = if is_programmed {
            stamp.condition("Programmed", true, reason::PROGRAMMED, "Gateway is programmed")
        } else {
            stamp.condition(
                "Programmed",
                false,
                reason::INVALID,
                "no listener can be programmed",
            )
        };
        let listeners = self
            .listeners
            .iter()
            .map(|l| listener_status(l, &stamp))
            .collect();
        StatusBody::Gateway(GatewayStatus {
            addresses: vec![GatewayAddress {
                type_: "IPAddress",
                value: address.to_string(),
            }],
            conditions: [accepted, programmed_cond]
                .into_iter()
                .chain(crate::default_gateway::condition(self, &stamp))
                .collect(),
            listeners,
        })
    }
}

fn listener_status(l: &Listener, stamp: &Stamp<'_>) -> ListenerStatus {
    let accepted = match &l.not_accepted {
        None => stamp.condition("Accepted", true, reason::ACCEPTED, "Listener is accepted"),
        Some((r, m)) => stamp.condition("Accepted", false, r, m.clone()),
    };
    let conflicted = match &l.conflicted {
        None => stamp.condition("Conflicted", false, reason::NO_CONFLICTS, "No conflicts"),
        Some((r, m)) => stamp.condition("Conflicted", true, r, m.clone()),
    };
    let resolved = match &l.unresolved {
        None => stamp.condition(
            "ResolvedRefs",
            true,
            reason::RESOLVED_REFS,
            "All references are resolved",
        ),
        Some((r, m)) => stamp.condition("ResolvedRefs", false, r, m.clone()),
    };
    let programmed = if l.programmed() {
        stamp.condition("Programmed", true, reason::PROGRAMMED, "Listener is programmed")
    } else {
        stamp.condition("Programmed", false, reason::INVALID, "Listener is not programmed")
    };
    let supported_kinds = l
        .kinds
        .iter()
        .map(|k| RouteGroupKind {
            group: GATEWAY_GROUP,
            kind: match k {
                RouteKind::Http => "HTTPRoute",
                RouteKind::Grpc => "GRPCRoute",
            },
        })
        .collect();
    ListenerStatus {
        name: l.name.clone(),
        supported_kinds,
        attached_routes: l.attached_routes,
        conditions: vec![accepted, programmed, resolved, conflicted],
    }
}
