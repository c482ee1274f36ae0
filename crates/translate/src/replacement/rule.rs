//! When a rule (or one of its routes) is replaced, as the rule builder
//! (`route::rule`) meets each case; what a replaced route becomes is
//! [`super::replace`]. The rule's first error is the one its status shows.
//!
//! The cases, in the order the builder meets them:
//! - values the loader could not read: the whole rule, every reading of
//!   each match ([`super::unreadable`]);
//! - a match that cannot be programmed: a 500 guard ranked as the match
//!   ([`guard`]);
//! - an action, filter or backend that cannot be programmed: each match
//!   keeps its match and answers 500 ([`failed`]);
//! - an invalid TrafficPolicy reaching the rule, or a valid one whose
//!   header additions, merged with the rule's, exceed Envoy's limit: the
//!   whole rule ([`policy`]).
//!
//! Scopes above the rule (virtual host, route configuration) are decided
//! by `policy::scope` and `strict` and built by [`super::scope`].

use envoy_types::pb::envoy::config::route::v3::{Route as EnvoyRoute, RouteMatch};

use crate::error::RuleError;
use crate::route::filters;
use crate::route::matches::Rank;
use crate::route::rule::{BuiltRoute, BuiltRule};

/// The rule's behaviour could not be built: `route` (its name and match
/// set) answers 500.
pub fn failed(mut route: EnvoyRoute, rank: Rank, error: RuleError, out: &mut BuiltRule) {
    super::replace(&mut route);
    out.replaced.get_or_insert(error);
    out.routes.push(BuiltRoute {
        route,
        rank,
        replaced: true,
    });
}

/// A match that cannot be programmed: a route named `<name>/guard` on
/// `guard` (what the match can still be narrowed to) answering 500, ranked
/// as the match would rank, so its requests never reach a broader route.
pub fn guard(name: &str, guard: RouteMatch, rank: Rank, error: RuleError, out: &mut BuiltRule) {
    let mut route = EnvoyRoute {
        name: format!("{name}/guard"),
        r#match: Some(guard),
        ..Default::default()
    };
    super::replace(&mut route);
    out.replaced.get_or_insert(error);
    out.routes.push(BuiltRoute {
        route,
        rank,
        replaced: true,
    });
}

/// The TrafficPolicy merged on the rule (`policy::attach`): an invalid one
/// replaces the whole rule (fail closed: never served without it); a valid
/// one is applied to each route not already replaced, and replaces the
/// whole rule when the header additions then exceed Envoy's limit (every
/// match carries the same additions).
pub fn policy(out: &mut BuiltRule, p: &crate::policy::Effective, field: &str) {
    if let Some(e) = p.errors.first() {
        whole(out, e.clone());
        return;
    }
    let mut over = None;
    for br in out.routes.iter_mut().filter(|br| !br.replaced) {
        crate::policy::apply::apply(&p.features, &mut br.route);
        if over.is_none() {
            over = check_merged_additions(&br.route, &format!("{field}.filters")).err();
        }
    }
    if let Some(e) = over {
        whole(out, e);
    }
}

/// Every route of the rule answers 500.
fn whole(out: &mut BuiltRule, error: RuleError) {
    for br in &mut out.routes {
        super::replace(&mut br.route);
        br.replaced = true;
    }
    out.replaced.get_or_insert(error);
}

/// Envoy's limit on header additions applies to the route as sent: the
/// rule's own and those its TrafficPolicies merge in (`policy::apply`).
fn check_merged_additions(r: &EnvoyRoute, field: &str) -> Result<(), RuleError> {
    for (n, what) in [
        (r.request_headers_to_add.len(), "request"),
        (r.response_headers_to_add.len(), "response"),
    ] {
        if n > filters::MAX_HEADER_ADDITIONS {
            return Err(RuleError::structural(
                field,
                format!(
                    "{n} {what} header additions, the rule's filters and its TrafficPolicies' headerModifiers and transformation together, exceed Envoy's limit of {} per route",
                    filters::MAX_HEADER_ADDITIONS
                ),
            ));
        }
    }
    Ok(())
}
