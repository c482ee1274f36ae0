//! Gateways of our classes and their status.

use api::Sourced;
use api::gateway_api::experimental::gateways::Gateway;

use crate::index::{Index, ns_name};
use crate::listener::{self, GATEWAY_GROUP, Listener, Origin};
use crate::route::model::RouteKind;
use crate::status::{
    GatewayAddress, GatewayStatus, ListenerStatus, RouteGroupKind, Stamp, StatusBody, reason,
};

/// Where a Gateway's `status.addresses` come from.
#[derive(Clone, Copy, Debug)]
pub enum Reported<'a> {
    /// The configured address (file mode, or Kubernetes mode without
    /// provisioning): always assigned.
    Configured(&'a str),
    /// The addresses of the Service provisioned for it (Kubernetes mode,
    /// `api::Inputs::provisioned_addresses`): none yet means
    /// `Programmed=False` with reason `AddressNotAssigned`, as the Gateway
    /// API asks of an implementation that assigns addresses.
    Provisioned(&'a [api::inputs::ProvisionedAddress]),
}

pub struct GatewayState<'a> {
    pub namespace: String,
    pub name: String,
    pub generation: i64,
    pub gateway: &'a Sourced<Gateway>,
    /// False when its GatewayClass is ours but not accepted.
    pub class_accepted: bool,
    /// The Gateway's own listeners (spec order), then those of the
    /// ListenerSets it admitted (see `listener_set`).
    pub listeners: Vec<Listener>,
    /// How many ListenerSets are attached (admitted and accepted).
    pub attached_listener_sets: i32,
}

impl GatewayState<'_> {
    pub fn key(&self) -> String {
        crate::naming::gateway(&self.namespace, &self.name)
    }

    pub fn new<'a>(index: &Index<'_>, gw: &'a Sourced<Gateway>, class_accepted: bool) -> GatewayState<'a> {
        let (namespace, name) = ns_name(&gw.object.metadata);
        let mut listeners = listener::process(
            index,
            &namespace,
            &gw.object.spec.listeners,
            &gw.unreadable,
            Origin::Gateway,
            "",
        );
        listener::detect_conflicts(&mut listeners);
        GatewayState {
            namespace,
            name,
            generation: gw.object.metadata.generation.unwrap_or(1),
            gateway: gw,
            class_accepted,
            listeners,
            attached_listener_sets: 0,
        }
    }

    /// Why listeners are refused (Accepted=False), one line each, for the
    /// diagnostics: a refused listener must not only show in status. One
    /// refused for a value the loader could not read is left out: the
    /// loader reported it, at the value.
    pub fn listener_problems(&self) -> Vec<String> {
        self.own_listeners()
            .filter(|l| !l.loader_reported)
            .filter_map(|l| {
                l.not_accepted
                    .as_ref()
                    .map(|(r, m)| format!("listener {}: Accepted=False ({r}): {m}", l.name))
            })
            .collect()
    }

    /// The listeners declared on the Gateway itself.
    pub fn own_listeners(&self) -> impl Iterator<Item = &Listener> {
        self.listeners.iter().filter(|l| l.origin == Origin::Gateway)
    }

    /// The Gateway's status stanza (after routes were attached).
    pub fn status(&self, reported: Reported<'_>) -> StatusBody {
        let stamp = Stamp {
            generation: self.generation,
        };
        let programmed = self.own_listeners().filter(|l| l.programmed()).count();
        let total = self.own_listeners().count();
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
        let addresses: Vec<GatewayAddress> = match reported {
            Reported::Configured(address) => vec![GatewayAddress {
                type_: "IPAddress",
                value: address.to_string(),
            }],
            Reported::Provisioned(addresses) => addresses
                .iter()
                .map(|a| GatewayAddress {
                    type_: a.type_.as_str(),
                    value: a.value.clone(),
                })
                .collect(),
        };
        let programmed_cond = if is_programmed && addresses.is_empty() {
            stamp.condition(
                "Programmed",
                false,
                reason::ADDRESS_NOT_ASSIGNED,
                "no address is assigned to the Gateway's Service yet",
            )
        } else if is_programmed {
            stamp.condition("Programmed", true, reason::PROGRAMMED, "Gateway is programmed")
        } else {
            stamp.condition(
                "Programmed",
                false,
                reason::INVALID,
                "no listener can be programmed",
            )
        };
        let listeners = self.own_listeners().map(|l| listener_status(l, &stamp)).collect();
        StatusBody::Gateway(GatewayStatus {
            addresses,
            conditions: [accepted, programmed_cond]
                .into_iter()
                .chain(crate::default_gateway::condition(self, &stamp))
                .collect(),
            listeners,
            attached_listener_sets: self.allows_listener_sets().then_some(self.attached_listener_sets),
        })
    }

    /// Whether `spec.allowedListeners` admits any namespace at all.
    pub fn allows_listener_sets(&self) -> bool {
        use api::gateway_api::experimental::gateways::GatewayAllowedListenersNamespacesFrom as From;
        let from = self.gateway.object.spec.allowed_listeners.as_ref();
        let from = from
            .and_then(|a| a.namespaces.as_ref())
            .and_then(|n| n.from.as_ref());
        from.is_some_and(|f| *f != From::None)
    }
}

/// One listener's status (Gateway or ListenerSet listener). A conflicted
/// listener is not accepted and not programmed, with the conflict's reason
/// (ProtocolConflict / HostnameConflict), as the ListenerSet conformance
/// tests require for both kinds of listeners.
pub fn listener_status(l: &Listener, stamp: &Stamp) -> ListenerStatus {
    // The conflict's reason first: a TCP listener losing its port is
    // ProtocolConflict (upstream ListenerSetProtocolConflict), not
    // UnsupportedProtocol.
    let accepted = match (&l.conflicted, &l.not_accepted) {
        (Some((r, m)), _) => stamp.condition("Accepted", false, r, m.clone()),
        (None, Some((r, m))) => stamp.condition("Accepted", false, r, m.clone()),
        (None, None) => stamp.condition("Accepted", true, reason::ACCEPTED, "Listener is accepted"),
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
    let programmed = if let Some((r, m)) = &l.conflicted {
        stamp.condition("Programmed", false, r, m.clone())
    } else if !l.programmed() {
        let why = l.not_accepted.as_ref().map_or_else(
            || "Listener is not programmed: no usable certificate".to_string(),
            |(_, m)| format!("Listener is not programmed: {m}"),
        );
        stamp.condition("Programmed", false, reason::INVALID, why)
    } else if l.kinds.is_empty() {
        // No route kind can attach: nothing of this listener is served.
        stamp.condition(
            "Programmed",
            false,
            reason::INVALID,
            "Listener is not programmed: allowedRoutes.kinds names no supported route kind",
        )
    } else {
        stamp.condition("Programmed", true, reason::PROGRAMMED, "Listener is programmed")
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
