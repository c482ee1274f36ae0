//! An [`Effective`](super::Effective) policy on one Envoy route.

use envoy_types::pb::envoy::config::core::v3::HeaderValueOption;
use envoy_types::pb::envoy::config::route::v3::{
    FilterConfig, Route, RouteConfiguration, VirtualHost, route,
};
use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3::{
    CheckSettings, ExtAuthzPerRoute, ext_authz_per_route,
};
use envoy_types::pb::google::protobuf::Any;
use envoy_types::util::pack_any;

use super::{CORS_FILTER, Features, LOCAL_RATE_LIMIT_FILTER, RBAC_FILTER, ext_auth};

/// Applies the merged features. Header edits from policies go before the
/// rule's own (so the rule's filters, the more specific, win a `set`);
/// timeouts and retries only fill what the rule left unset.
pub fn apply(f: &Features, r: &mut Route) {
    let mut req_add = Vec::new();
    let mut resp_add = Vec::new();
    for mods in [&f.header_modifiers, &f.transformation].into_iter().flatten() {
        req_add.extend(mods.0.add.iter().cloned());
        resp_add.extend(mods.1.add.iter().cloned());
        r.request_headers_to_remove.extend(mods.0.remove.iter().cloned());
        r.response_headers_to_remove.extend(mods.1.remove.iter().cloned());
    }
    r.request_headers_to_add.splice(0..0, req_add);
    r.response_headers_to_add.splice(0..0, resp_add);
    r.typed_per_filter_config.extend(per_filter(f));
    if let Some(route::Action::Route(a)) = r.action.as_mut() {
        if let Some(t) = &f.timeouts {
            if a.timeout.is_none() {
                a.timeout.clone_from(&t.request);
            }
            if a.idle_timeout.is_none() {
                a.idle_timeout.clone_from(&t.idle);
            }
        }
        if let Some(rp) = &f.retry
            && a.retry_policy.is_none()
        {
            a.retry_policy = Some(rp.clone());
        }
    }
}

/// The per-filter configs the features set, by filter name: the same at
/// every level (route, virtual host, route configuration), where Envoy
/// lets the most specific level win per filter.
pub fn per_filter(f: &Features) -> Vec<(String, Any)> {
    let mut out = Vec::new();
    if let Some(c) = &f.cors {
        out.push((CORS_FILTER.into(), pack_any(c.clone())));
    }
    if let Some(l) = &f.local_rate_limit {
        out.push((LOCAL_RATE_LIMIT_FILTER.into(), pack_any(l.clone())));
    }
    if let Some(rb) = &f.rbac {
        out.push((RBAC_FILTER.into(), pack_any(rb.clone())));
    }
    if let Some(ext_auth::Use::Enable { filter_name }) = &f.ext_auth {
        // A FilterConfig switches on a filter disabled in the HCM; Envoy
        // wants a config inside, so it carries default check settings.
        let per_route = ExtAuthzPerRoute {
            r#override: Some(ext_authz_per_route::Override::CheckSettings(
                CheckSettings::default(),
            )),
        };
        out.push((
            filter_name.clone(),
            pack_any(FilterConfig {
                config: Some(pack_any(per_route)),
                ..Default::default()
            }),
        ));
    }
    out
}

/// Header edits of the features: (request add, request remove, response
/// add, response remove).
type Edits = (
    Vec<HeaderValueOption>,
    Vec<String>,
    Vec<HeaderValueOption>,
    Vec<String>,
);

fn edits(f: &Features) -> Edits {
    let mut e = Edits::default();
    for mods in [&f.header_modifiers, &f.transformation].into_iter().flatten() {
        e.0.extend(mods.0.add.iter().cloned());
        e.1.extend(mods.0.remove.iter().cloned());
        e.2.extend(mods.1.add.iter().cloned());
        e.3.extend(mods.1.remove.iter().cloned());
    }
    e
}

/// Whether the features edit headers (the route configuration then asks
/// Envoy to let the most specific level win a header).
pub fn edits_headers(f: &Features) -> bool {
    f.header_modifiers.is_some() || f.transformation.is_some()
}

/// A listener-scope policy on its virtual host (timeouts have no
/// virtual-host field: `policy::scope` warns; a route's own retry policy
/// replaces the host's in Envoy).
pub fn apply_host(f: &Features, vh: &mut VirtualHost) {
    let (req_add, req_rm, resp_add, resp_rm) = edits(f);
    vh.request_headers_to_add.extend(req_add);
    vh.request_headers_to_remove.extend(req_rm);
    vh.response_headers_to_add.extend(resp_add);
    vh.response_headers_to_remove.extend(resp_rm);
    vh.typed_per_filter_config.extend(per_filter(f));
    if let Some(rp) = &f.retry {
        vh.retry_policy = Some(rp.clone());
    }
}

/// A Gateway-scope (or HTTPS-listener-scope) policy on its route
/// configuration (retry goes on each host that has none, see
/// `xds::route`).
pub fn apply_config(f: &Features, rc: &mut RouteConfiguration) {
    let (req_add, req_rm, resp_add, resp_rm) = edits(f);
    rc.request_headers_to_add.extend(req_add);
    rc.request_headers_to_remove.extend(req_rm);
    rc.response_headers_to_add.extend(resp_add);
    rc.response_headers_to_remove.extend(resp_rm);
    rc.typed_per_filter_config.extend(per_filter(f));
}
