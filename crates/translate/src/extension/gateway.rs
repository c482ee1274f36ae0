//! One Gateway's extension hooks in the pipeline (ARCHITECTURE.md §3):
//! `PostRouteModify` on the rules' routes before they are merged into the
//! Gateway's IR, the virtual host / listener / translation hooks on the
//! assembled resources, and what they found put into the report. When each
//! hook runs and what a failure fences is `run.rs`'s; this is the glue the
//! pipeline calls.

use std::collections::BTreeMap;

use api::Diagnostic;

use super::{Hook, Hooks, run as hooks_run};
use crate::gateway::GatewayState;
use crate::pipeline::Work;
use crate::route_status::RouteReport;
use crate::{Output, ir, xds};

/// Puts what one Gateway's extension hooks found where the rest of the
/// report goes: failed route hooks replace their rule (status, metrics),
/// fail-open ones warn on the route, scope failures are diagnostics and
/// scope replacements (the fences themselves are reported with the
/// policy fences, `replacement::scope::report`).
pub(crate) fn absorb_hooks(
    key: &str,
    gw: &GatewayState<'_>,
    hooked: &mut HookFindings,
    reports: &mut [RouteReport],
    out: &mut Output,
) {
    for (ri, rule, e) in std::mem::take(&mut hooked.failed) {
        reports[ri].replaced.entry(rule).or_insert(e);
    }
    for (ri, w) in std::mem::take(&mut hooked.warnings) {
        reports[ri].warnings.push(w);
    }
    for (message, error) in &hooked.scopes.problems {
        let object = Some(format!("Gateway {key}"));
        out.diagnostics.push(if *error {
            Diagnostic::error(object, Some(&gw.gateway.source), format!("{message} [extension]"))
        } else {
            Diagnostic::warning(object, Some(&gw.gateway.source), format!("{message} [extension]"))
        });
    }
    for (name, e) in &hooked.scopes.dropped_clusters {
        out.scope_replacements.push(crate::ScopeReplacement {
            gateway: key.to_string(),
            scope: "cluster".into(),
            listener: String::new(),
            names: vec![name.clone()],
            class: e.class,
            message: e.to_string(),
        });
    }
    if let Some(e) = &hooked.scopes.translation_failed {
        out.scope_replacements.push(crate::ScopeReplacement {
            gateway: key.to_string(),
            scope: "translation".into(),
            listener: String::new(),
            names: Vec::new(),
            class: e.class,
            message: e.to_string(),
        });
    }
}

/// What the extension hooks of one Gateway found (`extension::run`).
#[derive(Default)]
pub(crate) struct HookFindings {
    /// (route, rule, error): a `PostRouteModify` that failed closed.
    pub(crate) failed: Vec<(usize, usize, crate::error::RuleError)>,
    /// (route, warning): one that failed open.
    pub(crate) warnings: Vec<(usize, String)>,
    pub(crate) scopes: hooks_run::Findings,
}

/// `PostRouteModify` for every pending route of one Gateway's works, in one
/// batch; the replies (or the 500s) go into the routes' slots before the
/// works are merged.
pub(crate) fn route_hooks(hooks: &dyn Hooks, works: &mut [Work], found: &mut HookFindings) {
    let mut at = Vec::new();
    let mut pending = Vec::new();
    for (wi, w) in works.iter_mut().enumerate() {
        for p in std::mem::take(&mut w.hooked) {
            at.push(wi);
            pending.push(p);
        }
    }
    let outcomes = hooks_run::post_route(hooks, &pending);
    for ((wi, p), outcome) in at.into_iter().zip(&pending).zip(outcomes) {
        let Some(w) = works.get_mut(wi) else { continue };
        let slot = w.routes.get_mut(p.slot);
        match outcome {
            hooks_run::RouteOutcome::Unchanged => {}
            hooks_run::RouteOutcome::Modified(r) => {
                found
                    .scopes
                    .modified_routes
                    .insert(r.name.clone(), p.route.name.clone());
                if let Some(slot) = slot {
                    *slot = Some(xds::canonical::route(&r).into());
                }
            }
            hooks_run::RouteOutcome::Failed { mut replaced, error } => {
                crate::replacement::disable_filters(
                    &mut replaced.typed_per_filter_config,
                    p.inherited.iter().cloned(),
                );
                if let Some(slot) = slot {
                    *slot = Some(xds::canonical::route(&replaced).into());
                }
                found.failed.push((w.route, p.rule, error));
            }
            hooks_run::RouteOutcome::Warned(m) => found.warnings.push((w.route, m)),
        }
    }
}

/// Virtual host name → the Gateway listener (index) that owns it.
pub(crate) fn host_owners(ir: &ir::Gateway, gw: &GatewayState<'_>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for chain in ir.ports.values().flat_map(|p| &p.chains) {
        for vh in chain.virtual_hosts.values() {
            if let Some(li) = gw.listeners.iter().position(|l| l.key == vh.owner) {
                out.insert(format!("{}/{}", chain.route_config, vh.hostname), li);
            }
        }
    }
    out
}

/// The virtual host, listener and translation hooks of one Gateway, in
/// Envoy Gateway's order, on the assembled resources.
pub(crate) fn scope_hooks(
    hooks: &dyn Hooks,
    x: &crate::extension::resources::Extensions,
    gw: &GatewayState<'_>,
    ports: &[i32],
    owners: &BTreeMap<String, usize>,
    built: &mut crate::GatewayXds,
    found: &mut hooks_run::Findings,
) {
    if x.runs(Hook::VirtualHost) {
        hooks_run::post_virtual_host(hooks, built, owners, found);
    }
    // (index, listener) of the merged listeners that are programmed.
    let programmed: Vec<(usize, &crate::listener::Listener)> = gw
        .listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| l.programmed())
        .collect();
    for &port in ports {
        found.listener_names.insert(
            crate::naming::listener(&gw.namespace, &gw.name, port),
            programmed
                .iter()
                .filter(|(_, l)| l.port == port)
                .map(|(li, _)| *li)
                .collect(),
        );
    }
    if x.runs(Hook::HttpListener) {
        let scopes: Vec<hooks_run::ListenerScope> = ports
            .iter()
            .map(|&port| {
                let on_port: Vec<&(usize, &crate::listener::Listener)> =
                    programmed.iter().filter(|(_, l)| l.port == port).collect();
                let names: Vec<&str> = on_port.iter().map(|(_, l)| l.name.as_str()).collect();
                hooks_run::ListenerScope {
                    envoy_name: crate::naming::listener(&gw.namespace, &gw.name, port),
                    policies: x.gateway_policies(&gw.namespace, &gw.name, &names),
                    gateway_listeners: on_port.iter().map(|(li, _)| *li).collect(),
                }
            })
            .collect();
        hooks_run::post_http_listener(hooks, built, &scopes, found);
    }
    if x.runs(Hook::Translation) {
        let names: Vec<&str> = programmed.iter().map(|(_, l)| l.name.as_str()).collect();
        let policies = x.gateway_policies(&gw.namespace, &gw.name, &names);
        hooks_run::post_translate(hooks, built, policies, found);
    }
}
