//! A rule with values the loader could not read (`api::Unreadable`, e.g. an
//! unknown filter type or path match type): replaced by the 500 as a whole,
//! whatever else it says. Each of its matches answers 500 for every reading
//! of it that `model::Rule::fenced` lists, each ranked as that reading
//! would rank, so no request the rule may have been meant to catch reaches
//! another route's backend (README, "Replacement and guards").

use envoy_types::pb::envoy::config::route::v3::Route as EnvoyRoute;

use crate::route::matches::{self, Programmable};
use crate::route::model::Rule;
use crate::route::rule::{BuiltRoute, BuiltRule};

/// The routes of rule `rule_index`, which carries load errors; `name(j)` is
/// the Envoy route name of its match `j`.
pub fn fence(rule_index: usize, rule: &Rule<'_>, name: impl Fn(usize) -> String) -> BuiltRule {
    let mut out = BuiltRule {
        replaced: rule.load_errors.first().cloned(),
        ..Default::default()
    };
    for (j, readings) in rule.fenced.iter().enumerate() {
        let field = format!("spec.rules[{rule_index}].matches[{j}]");
        for (k, reading) in readings.iter().enumerate() {
            let ranked_as = match matches::build(&reading.ranked_as, &field, None) {
                Programmable::Ok(_, rank) | Programmable::Guard { rank, .. } => rank,
            };
            // A reading that is itself not programmable (an invalid
            // pattern) is caught by its guard, as any other match.
            let (route_match, rank) = match matches::build(&reading.catches, &field, None) {
                Programmable::Ok(rm, rank) => (rm, rank),
                Programmable::Guard { guard, rank, .. } => (guard, rank),
            };
            let mut route = EnvoyRoute {
                name: match readings.len() {
                    1 => format!("{}/unreadable", name(j)),
                    _ => format!("{}/unreadable/{k}", name(j)),
                },
                r#match: Some(route_match),
                ..Default::default()
            };
            super::replace(&mut route);
            out.routes.push(BuiltRoute {
                route,
                // The earlier of the two: never later than the match as
                // written would rank.
                rank: rank.min(ranked_as),
                replaced: true,
            });
        }
    }
    out
}
