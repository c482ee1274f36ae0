//! Route status: one `status.parents` entry per parentRef that names one of
//! our Gateways, with Accepted, ResolvedRefs and PartiallyInvalid.

use std::collections::{BTreeMap, BTreeSet};

use crate::backend::{self, Backend};
use crate::binding::ParentBinding;
use crate::error::RuleError;
use crate::gateway::GatewayState;
use crate::index::Index;
use crate::route::model::Route;
use crate::route::rule::BuiltRule;
use crate::status::{ParentReference, RouteParentStatus, Stamp, StatusBody, reason};
use crate::{ObjectStatus, Settings};

/// What building a route's rules found, across every listener it is on.
#[derive(Debug, Default)]
pub struct RouteReport {
    pub rules_seen: RulesSeen,
    /// Replaced rules by index (first error of each).
    pub replaced: BTreeMap<usize, RuleError>,
    pub unresolved: Vec<(&'static str, String)>,
    pub warnings: Vec<String>,
    /// Per binding (index into the route's bindings): a hostname this
    /// route keeps on a listener that an HTTPProxy root claims too
    /// (`httpproxy::serve::report_conflicts`), as the condition
    /// `Conflicted=True`, reason `HostnameConflict`.
    pub hostname_conflicts: Vec<(usize, String)>,
}

/// The rule indices a report absorbed (each once, however many listeners
/// built it). Every route gets a report on every call, so the first 64
/// rules are bits (no allocation); the rest, rare, a list.
#[derive(Debug, Default)]
pub struct RulesSeen {
    low: u64,
    high: BTreeSet<usize>,
}

impl RulesSeen {
    /// Whether `rule` was new.
    pub fn insert(&mut self, rule: usize) -> bool {
        match u32::try_from(rule).ok().and_then(|r| 1u64.checked_shl(r)) {
            Some(bit) => {
                let new = self.low & bit == 0;
                self.low |= bit;
                new
            }
            None => self.high.insert(rule),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.low == 0 && self.high.is_empty()
    }
}

impl RouteReport {
    pub fn absorb(&mut self, rule_index: usize, built: &BuiltRule) {
        if !self.rules_seen.insert(rule_index) {
            return;
        }
        if let Some(e) = &built.replaced {
            self.replaced.insert(rule_index, e.clone());
        }
        self.unresolved.extend(built.unresolved.iter().cloned());
        self.warnings.extend(built.warnings.iter().cloned());
    }

    /// Reference checks for a route that was not built on any listener.
    pub fn check_refs(&mut self, index: &Index<'_>, route: &Route) {
        let mut scratch = BTreeMap::new();
        for (i, rule) in route.rules().iter().enumerate() {
            for (j, b) in rule.backends.iter().enumerate() {
                let field = format!("spec.rules[{i}].backendRefs[{j}]");
                if let Backend::Invalid { reason, message, .. } =
                    backend::resolve(index, route, b, || field.clone(), &mut scratch)
                {
                    self.unresolved.push((reason, message));
                }
            }
        }
    }
}

pub fn render(
    route: &Route<'_>,
    bindings: &[ParentBinding],
    gateways: &[GatewayState<'_>],
    report: &RouteReport,
    settings: &Settings,
) -> ObjectStatus {
    let stamp = Stamp {
        generation: route.generation,
    };
    let resolved = match report.unresolved.first() {
        None => stamp.condition(
            "ResolvedRefs",
            true,
            reason::RESOLVED_REFS,
            "All references are resolved",
        ),
        Some((r, _)) => {
            let mut msgs: Vec<&str> = report.unresolved.iter().map(|(_, m)| m.as_str()).collect();
            msgs.dedup();
            stamp.condition("ResolvedRefs", false, r, msgs.join("; "))
        }
    };
    // Replaced rules and invalid hostnames (never programmed; the route
    // serves its valid ones) make the route partially invalid.
    let mut invalid: Vec<String> = report
        .replaced
        .iter()
        .map(|(i, e)| format!("Replaced Rule ({i}): {e}"))
        .collect();
    // (With no valid hostname the route is not accepted at all, and its
    // Accepted condition names them.)
    if !crate::hostname::valid_route_hostnames(route.hostnames()).is_empty() {
        invalid.extend(crate::hostname::route_hostname_problems(route.hostnames()));
    }
    // Every rule replaced: nothing of the route is served as written, so it
    // is not accepted (UnsupportedValue, naming the replaced rules) though
    // still bound and fenced by its 500s; PartiallyInvalid is for routes
    // with both valid and replaced rules.
    let all_replaced =
        route.rule_count() > 0 && (0..route.rule_count()).all(|i| report.replaced.contains_key(&i));
    let partially_invalid = (!invalid.is_empty() && !all_replaced).then(|| {
        stamp.condition(
            reason::PARTIALLY_INVALID,
            true,
            reason::UNSUPPORTED_VALUE,
            invalid.join("; "),
        )
    });
    // Gateway API: an unsupported (unknown) value makes the route
    // Accepted=False, UnsupportedValue; it stays bound, and each rule with
    // one answers 500 (`replacement::unreadable`).
    let unsupported: Vec<String> = route
        .rules()
        .iter()
        .flat_map(|r| r.load_errors.iter().map(ToString::to_string))
        .collect();
    let mut unsupported = (!unsupported.is_empty()).then(|| {
        format!(
            "{}; each rule with an unsupported value is replaced with a direct 500",
            unsupported.join("; ")
        )
    });
    if all_replaced {
        let all = format!(
            "every rule is replaced with a direct 500, nothing of the route is served as written: {}",
            invalid.join("; ")
        );
        // The replaced rules' errors include any unreadable value.
        unsupported = Some(all);
    }
    let parents = bindings
        .iter()
        .enumerate()
        .map(|(bi, b)| {
            let p = &route.parent_refs()[b.parent_index];
            let accepted = match (&b.refused, &unsupported) {
                (None, Some(message)) => {
                    stamp.condition("Accepted", false, reason::UNSUPPORTED_VALUE, message.clone())
                }
                (refused, _) => match refused {
                    None if p.by_default => stamp.condition(
                        "Accepted",
                        true,
                        reason::ACCEPTED,
                        crate::default_gateway::BOUND_MESSAGE,
                    ),
                    None => stamp.condition("Accepted", true, reason::ACCEPTED, "Route is accepted"),
                    Some((r, m)) => stamp.condition("Accepted", false, r, m.clone()),
                },
            };
            let mut conditions = vec![accepted, resolved.clone()];
            conditions.extend(partially_invalid.clone());
            let conflicts: Vec<&str> = report
                .hostname_conflicts
                .iter()
                .filter(|(i, _)| *i == bi)
                .map(|(_, m)| m.as_str())
                .collect();
            if !conflicts.is_empty() {
                conditions.push(stamp.condition(
                    "Conflicted",
                    true,
                    "HostnameConflict",
                    conflicts.join("; "),
                ));
            }
            RouteParentStatus {
                parent_ref: ParentReference {
                    group: p.group.to_string(),
                    kind: p.kind.to_string(),
                    // The parent's namespace: the Gateway's, or the
                    // ListenerSet's for a parentRef of that kind.
                    namespace: if p.kind == "ListenerSet" {
                        p.namespace.as_deref().unwrap_or(route.namespace).to_string()
                    } else {
                        gateways[b.gateway].namespace.clone()
                    },
                    name: p.name.to_string(),
                    section_name: p.section_name.as_deref().map(str::to_string),
                    port: p.port,
                },
                controller_name: settings.controller_name.clone(),
                conditions,
            }
        })
        .collect();
    ObjectStatus::new(
        "gateway.networking.k8s.io/v1",
        route.kind.kind(),
        Some(route.namespace),
        route.name,
        StatusBody::Route { parents },
    )
}

#[cfg(test)]
mod tests {
    use super::RulesSeen;

    #[test]
    fn each_rule_is_new_once_below_and_above_the_bits() {
        let mut seen = RulesSeen::default();
        assert!(seen.is_empty());
        for rule in [0, 1, 63, 64, 65, 1000] {
            assert!(seen.insert(rule), "rule {rule} is new");
            assert!(!seen.is_empty());
        }
        for rule in [0, 1, 63, 64, 65, 1000] {
            assert!(!seen.insert(rule), "rule {rule} was seen");
        }
        assert!(RulesSeen::default().insert(2), "another rule set is separate");
    }
}
