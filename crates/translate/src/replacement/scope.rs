//! What a fenced scope becomes: a virtual host (a listener-scope policy
//! failure, or STRICT finding a host Envoy rejects) or a whole route
//! configuration (a Gateway-scope or HTTPS-listener policy failure, or
//! STRICT finding a configuration Envoy rejects). Both answer the
//! replacement 500 ([`super::BODY`]) on every path; the listener keeps
//! listening, so traffic fails closed instead of falling through.
//!
//! When a scope is fenced is decided by `policy::scope` (policies) and
//! `replacement::strict` (Envoy's verdict); this module only builds the result, so a
//! fenced scope looks the same whatever fenced it.

use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteConfiguration, RouteMatch, VirtualHost, route_match,
};

/// Gateway condition reason for a Gateway-scope replacement.
pub const GATEWAY_REPLACED: &str = "GatewayReplaced";
/// Listener condition reason for a listener-scope replacement.
pub const LISTENER_REPLACED: &str = "ListenerReplaced";

/// One route matching every path (prefix `/`: listeners normalize paths,
/// so every request path starts with `/`) that answers the 500.
pub fn catch_all_route(vh_name: &str) -> Route {
    let mut route = Route {
        name: format!("{vh_name}/replaced"),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        ..Default::default()
    };
    super::replace(&mut route);
    route
}

/// A virtual host named `name` on `domains` answering only the 500: no
/// per-filter config, no header edits (whatever was the cause is gone).
pub fn fenced_host(name: &str, domains: Vec<String>) -> VirtualHost {
    VirtualHost {
        name: name.to_string(),
        domains,
        routes: vec![catch_all_route(name)],
        ..Default::default()
    }
}

/// The single catch-all host (`*`) a fenced route configuration holds.
pub fn fenced_config_host(rc_name: &str) -> VirtualHost {
    let name = format!("{rc_name}/replaced");
    let mut route = catch_all_route(rc_name);
    route.name.clone_from(&name);
    VirtualHost {
        name,
        domains: vec!["*".into()],
        routes: vec![route],
        ..Default::default()
    }
}

/// Replaces `rc` by one catch-all 500 host, dropping every configuration-
/// level edit and per-filter config (keeps its name and the fields that
/// only say how to read it).
pub fn replace_config(rc: &mut RouteConfiguration) {
    let host = fenced_config_host(&rc.name);
    *rc = RouteConfiguration {
        name: std::mem::take(&mut rc.name),
        virtual_hosts: vec![host],
        validate_clusters: rc.validate_clusters.take(),
        ignore_port_in_host_matching: rc.ignore_port_in_host_matching,
        ..Default::default()
    };
}

/// Reports the scopes a Gateway's policies fenced: the Gateway's
/// `Accepted=False` `GatewayReplaced` (a Gateway-scope fence) or the
/// listener's `Accepted=False` `ListenerReplaced` (a listener-scope one on
/// one of the Gateway's own listeners; a ListenerSet listener's is
/// reported on the ListenerSet, [`report_listener_set`]), each naming the
/// policy and the error; a diagnostic; and one [`crate::ScopeReplacement`]
/// per fence (metrics, `describe gateway`).
pub fn report(
    gw: &crate::gateway::GatewayState<'_>,
    key: &str,
    fences: &[crate::policy::scope::ScopeFence],
    status: &mut crate::status::StatusBody,
    out: &mut crate::Output,
) {
    let stamp = crate::status::Stamp {
        generation: gw.generation,
    };
    for f in fences {
        let message = message(f);
        let listener = f.listener.and_then(|li| gw.listeners.get(li));
        out.diagnostics.push(api::Diagnostic::error(
            Some(format!("Gateway {key}")),
            Some(&gw.gateway.source),
            match listener {
                None => message.clone(),
                // The object is the Gateway: its own listener by name.
                Some(l) if l.origin == crate::listener::Origin::Gateway => {
                    format!("listener {}: {message}", l.name)
                }
                Some(_) => format!(
                    "{}: {message}",
                    f.listener
                        .map(|li| crate::policy::scope::listener_place(gw, li))
                        .unwrap_or_default()
                ),
            },
        ));
        out.scope_replacements.push(crate::ScopeReplacement {
            gateway: key.to_string(),
            scope: f.scope.to_string(),
            // The key: unique among the merged listeners (a ListenerSet
            // listener's is `namespace/set/name`).
            listener: listener.map(|l| l.key.clone()).unwrap_or_default(),
            names: f.names.clone(),
            class: f.error.class,
            message: f.error.to_string(),
        });
        let crate::status::StatusBody::Gateway(s) = status else {
            continue;
        };
        match listener {
            None => {
                let c = stamp.condition("Accepted", false, GATEWAY_REPLACED, message);
                replace_condition(&mut s.conditions, c);
            }
            Some(l) if l.origin == crate::listener::Origin::Gateway => {
                let Some(ls) = s.listeners.iter_mut().find(|s| s.name == l.name) else {
                    continue;
                };
                let c = stamp.condition("Accepted", false, LISTENER_REPLACED, message);
                replace_condition(&mut ls.conditions, c);
            }
            Some(_) => {}
        }
    }
}

/// The listener-scope fences on the listeners of ListenerSet `si` (a
/// listener of Gateway `gw`): `Accepted=False` `ListenerReplaced` on that
/// listener's entry of the ListenerSet's status.
pub fn report_listener_set(
    gw: &crate::gateway::GatewayState<'_>,
    si: usize,
    generation: i64,
    fences: &[crate::policy::scope::ScopeFence],
    status: &mut crate::status::StatusBody,
) {
    let crate::status::StatusBody::ListenerSet(s) = status else {
        return;
    };
    let stamp = crate::status::Stamp { generation };
    for f in fences {
        let Some(l) = f.listener.and_then(|li| gw.listeners.get(li)) else {
            continue;
        };
        if l.origin != crate::listener::Origin::ListenerSet(si) {
            continue;
        }
        let Some(ls) = s.listeners.iter_mut().find(|s| s.name == l.name) else {
            continue;
        };
        let c = stamp.condition("Accepted", false, LISTENER_REPLACED, message(f));
        replace_condition(&mut ls.conditions, c);
    }
}

fn message(f: &crate::policy::scope::ScopeFence) -> String {
    let what = if f.scope == crate::policy::scope::VIRTUAL_HOST {
        "virtual hosts"
    } else {
        "route configurations"
    };
    format!(
        "{what} {} replaced by a catch-all 500: {} [{}]",
        f.names.join(", "),
        f.error,
        f.error.class
    )
}

fn replace_condition(conditions: &mut Vec<crate::status::Condition>, c: crate::status::Condition) {
    match conditions.iter_mut().find(|old| old.type_ == c.type_) {
        Some(old) => *old = c,
        None => conditions.push(c),
    }
}
