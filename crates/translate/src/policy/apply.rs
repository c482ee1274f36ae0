//! An [`Effective`](super::Effective) policy on one Envoy route.

use envoy_types::pb::envoy::config::route::v3::{FilterConfig, Route, route};
use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3::{
    CheckSettings, ExtAuthzPerRoute, ext_authz_per_route,
};
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
    if let Some(c) = &f.cors {
        r.typed_per_filter_config
            .insert(CORS_FILTER.into(), pack_any(c.clone()));
    }
    if let Some(l) = &f.local_rate_limit {
        r.typed_per_filter_config
            .insert(LOCAL_RATE_LIMIT_FILTER.into(), pack_any(l.clone()));
    }
    if let Some(rb) = &f.rbac {
        r.typed_per_filter_config
            .insert(RBAC_FILTER.into(), pack_any(rb.clone()));
    }
    if let Some(ext_auth::Use::Enable { filter_name }) = &f.ext_auth {
        // A FilterConfig switches on a filter disabled in the HCM; Envoy
        // wants a config inside, so it carries default check settings.
        let per_route = ExtAuthzPerRoute {
            r#override: Some(ext_authz_per_route::Override::CheckSettings(
                CheckSettings::default(),
            )),
        };
        r.typed_per_filter_config.insert(
            filter_name.clone(),
            pack_any(FilterConfig {
                config: Some(pack_any(per_route)),
                ..Default::default()
            }),
        );
    }
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
