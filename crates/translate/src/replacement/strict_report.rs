//! What the STRICT pass found, put where the rest of the report goes
//! (README, "Modes"): a rejected Envoy route replaces its rule (status,
//! diagnostics, metrics); a fenced virtual host or route configuration, a
//! dropped domain, a widened match or a rejected scope is a Gateway
//! diagnostic. What an extension hook made and Envoy rejects is attributed
//! to the hook (class `extension`). The decisions themselves are
//! [`super::strict`]'s.

use std::collections::BTreeMap;

use api::Diagnostic;

use crate::extension::{Hook, gateway as hooks_gateway};
use crate::route::model::Route;
use crate::route_status::RouteReport;
use crate::strict;

/// One Gateway's findings into its routes' reports and `diagnostics`
/// (see the module doc).
pub(crate) fn absorb(
    gateway: &str,
    findings: strict::GatewayFindings,
    routes: &[Route<'_>],
    reports: &mut [RouteReport],
    diagnostics: &mut Vec<Diagnostic>,
    hooked: &hooks_gateway::HookFindings,
) {
    let by_hook = |name: &str, modified: &BTreeMap<String, String>, hook: Hook| {
        if modified.contains_key(name) {
            format!(" (as the extension's {hook} reply made it) [extension]")
        } else {
            String::new()
        }
    };
    let object = Some(format!("Gateway {gateway}"));
    for r in findings.rejected_routes {
        // A route the extension renamed is found by its original name.
        let original = hooked
            .scopes
            .modified_routes
            .get(&r.route_name)
            .map_or(r.route_name.as_str(), String::as_str);
        let from_hook = hooked.scopes.modified_routes.contains_key(&r.route_name);
        let found = strict::parse_route_name(original).and_then(|(kind, ns, name, rule_id)| {
            routes.iter().enumerate().find_map(|(ri, route)| {
                if route.kind.kind() != kind || route.namespace != ns || route.name != name {
                    return None;
                }
                let rule = (0..route.rule_count())
                    .position(|i| route.rule_name(i) == Some(rule_id))
                    .or_else(|| rule_id.parse::<usize>().ok())?;
                Some((ri, rule))
            })
        });
        match found {
            Some((ri, rule)) => {
                reports[ri].replaced.entry(rule).or_insert_with(|| {
                    if from_hook {
                        crate::error::RuleError::extension(
                            format!("spec.rules[{rule}]"),
                            format!(
                                "the extension's {} reply was rejected by Envoy: {}",
                                Hook::Route,
                                r.message
                            ),
                        )
                    } else {
                        crate::error::RuleError::structural(
                            format!("spec.rules[{rule}]"),
                            format!("rejected by Envoy: {}", r.message),
                        )
                    }
                });
            }
            None => diagnostics.push(Diagnostic::error(
                object.clone(),
                None,
                format!(
                    "STRICT: Envoy route {} was rejected and replaced: {}{}",
                    r.route_name,
                    r.message,
                    by_hook(&r.route_name, &hooked.scopes.modified_routes, Hook::Route)
                ),
            )),
        }
    }
    for (vh, message) in findings.replaced_virtual_hosts {
        diagnostics.push(Diagnostic::error(
            object.clone(),
            None,
            format!(
                "STRICT: virtual host {vh} replaced by a catch-all 500: rejected by Envoy: {message}{}",
                by_hook(&vh, &hooked.scopes.modified_hosts, Hook::VirtualHost)
            ),
        ));
    }
    for d in findings.dropped_domains {
        diagnostics.push(Diagnostic::error(
            object.clone(),
            None,
            format!(
                "STRICT: domain {:?} dropped from virtual host {}: rejected by Envoy even on a catch-all: {}",
                d.domain, d.virtual_host, d.message
            ),
        ));
    }
    for (rc, message) in findings.replaced_configs {
        diagnostics.push(Diagnostic::error(
            object.clone(),
            None,
            format!(
                "STRICT: route configuration {rc} replaced by a catch-all 500: rejected by Envoy: {message}{}",
                by_hook(&rc, &hooked.scopes.modified_configs, Hook::Translation)
            ),
        ));
    }
    for r in findings.scope_rejections {
        diagnostics.push(Diagnostic::error(
            object.clone(),
            None,
            format!(
                "STRICT: {} replaced by a catch-all 500: its configuration is rejected by Envoy: {}",
                r.virtual_host.map_or_else(
                    || format!("route configuration {}", r.route_config),
                    |vh| format!("virtual host {vh}")
                ),
                r.message
            ),
        ));
    }
    for w in findings.widened_matches {
        diagnostics.push(Diagnostic::error(
            object.clone(),
            None,
            format!(
                "STRICT: Envoy route {} was rejected for its match; its 500 now answers every {}{}, \
                 so the routes after it on its virtual host lose those requests",
                w.route_name,
                w.prefix.as_ref().map_or_else(
                    || "CONNECT request".to_string(),
                    |p| format!("request under path prefix {p:?}")
                ),
                if w.everything {
                    " whatever its other conditions"
                } else {
                    " (its regular expressions dropped)"
                }
            ),
        ));
    }
    for (message, environment) in findings.problems {
        diagnostics.push(if environment {
            Diagnostic::warning(object.clone(), None, format!("{message} [environment]"))
        } else {
            Diagnostic::error(object.clone(), None, message)
        });
    }
}
