//! Invalid route replacement: every fail-closed decision, what and when
//! (ARCHITECTURE.md §3): a rule ([`rule`], [`unreadable`]), a virtual host
//! or route configuration ([`scope`]). Here: what an unprogrammable rule
//! becomes in Envoy. It never disappears (its traffic would fall through to
//! a broader route, failing open) and never reaches Envoy as written (a
//! NACK would freeze the whole listener): it keeps its match and answers
//! 500.

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::config::route::v3::{DirectResponseAction, Route, route};

pub const BODY: &str = "invalid route configuration detected and replaced with a direct response.";

pub fn direct_500() -> route::Action {
    route::Action::DirectResponse(DirectResponseAction {
        status: 500,
        body: Some(DataSource {
            specifier: Some(data_source::Specifier::InlineString(BODY.into())),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// Keeps the route's name and match; drops everything that could be the
/// cause (per-filter config, header mutations) and answers 500.
pub fn replace(route: &mut Route) {
    route.action = Some(direct_500());
    route.typed_per_filter_config.clear();
    route.request_headers_to_add.clear();
    route.request_headers_to_remove.clear();
    route.response_headers_to_add.clear();
    route.response_headers_to_remove.clear();
}

/// Switches off, on a fenced route or virtual host, the HTTP filters a
/// broader scope configures (`names`: a Gateway's or listener's policy):
/// the fence serves nothing, so its traffic must meet the 500, not a 403,
/// a 429 or a CORS answer from a policy above it (README, "TrafficPolicy").
pub fn disable_filters(
    config: &mut std::collections::HashMap<String, envoy_types::pb::google::protobuf::Any>,
    names: impl IntoIterator<Item = String>,
) {
    for name in names {
        let off = envoy_types::pb::envoy::config::route::v3::FilterConfig {
            disabled: true,
            ..Default::default()
        };
        config.insert(name, envoy_types::util::pack_any(off));
    }
}

pub(crate) mod guard_match;
pub mod rule;
pub mod scope;
pub mod strict;
pub(crate) mod strict_report;
pub mod unreadable;
