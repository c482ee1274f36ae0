//! What the HTTPProxy stage reports: the status of every HTTPProxy into
//! `Output.status` (served or not), every finding into
//! `Output.diagnostics`, and per proxy a [`ProxyReport`] (role, include
//! paths, merged conditions, duplicates and the route that won) that
//! `describe httpproxy` and the metrics read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::stage::{Stage, Tree};
use super::status::Statuses;
use super::{ProxyId, tree, type_};

/// Puts the status of every HTTPProxy (served or not) into `out.status`,
/// and every finding into `out.diagnostics`. `load_balancer` is the
/// address of the Gateway serving roots, when one does.
pub fn report(
    inputs: &api::Inputs,
    stage: &Stage,
    settings: &crate::Settings,
    load_balancer: Option<&str>,
    out: &mut crate::Output,
) {
    let statuses = &stage.statuses;
    out.http_proxies = reports(inputs, statuses, &stage.trees);
    // Why nothing is programmed, when nothing is.
    let unserved = match (&settings.http_proxy.gateway, load_balancer) {
        (None, _) => Some(
            "no Gateway serves HTTPProxies: set httpProxy.gatewayRef in the config file or \
             --httpproxy-gateway NS/NAME; status is computed but nothing is programmed"
                .to_string(),
        ),
        (Some((ns, name)), None) => Some(format!(
            "the Gateway configured to serve HTTPProxies ({ns}/{name}) is not one of portcullis's \
             Gateways (missing, or its GatewayClass is not ours); status is computed but nothing is programmed"
        )),
        (Some(_), Some(_)) => None,
    };
    for p in &inputs.http_proxies {
        let id = ProxyId::of(&p.object);
        let label = Some(format!("HTTPProxy {id}"));
        let found = statuses.proxies.get(&id);
        // The loader has reported a spec it could not read, at its field.
        let loaded: Vec<super::ProxyError> =
            p.object.load_errors.iter().map(|e| tree::unreadable(e)).collect();
        for e in found.into_iter().flat_map(|f| &f.errors) {
            if loaded.contains(e) {
                continue;
            }
            out.diagnostics.push(api::Diagnostic::error(
                label.clone(),
                Some(&p.source),
                format!("{}/{}: {e} [{}]", e.type_, e.reason, e.class),
            ));
        }
        for w in found.into_iter().flat_map(|f| &f.warnings) {
            out.diagnostics.push(api::Diagnostic::warning(
                label.clone(),
                Some(&p.source),
                format!("{}/{}: {w}", w.type_, w.reason),
            ));
        }
        let is_root = p.object.spec.virtualhost.is_some();
        if let (true, Some(why)) = (is_root, &unserved) {
            out.diagnostics.push(api::Diagnostic::warning(
                label.clone(),
                Some(&p.source),
                why.clone(),
            ));
        }
        // As Contour: every root gets the serving address (an invalid
        // root's FQDN is served too, fenced).
        let lb = if is_root { load_balancer } else { None };
        let status = statuses.render(
            &id,
            p.object.metadata.generation.unwrap_or(1),
            &settings.transition_time,
            lb,
        );
        let body = serde_json::to_value(&status).unwrap_or(serde_json::Value::Null);
        out.push_status(crate::ObjectStatus::new(
            api::httpproxy::API_VERSION,
            "HTTPProxy",
            Some(&id.namespace),
            &id.name,
            body,
        ));
    }
}

/// What `describe httpproxy` and the metrics read of one HTTPProxy.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProxyReport {
    pub namespace: String,
    pub name: String,
    /// `root`, `child` (reached from a served root) or `orphan`.
    pub role: String,
    pub fqdn: Option<String>,
    pub current_status: String,
    pub description: String,
    /// Each include path from a served root down to this proxy
    /// (`ns/root -> ns/a -> ns/this`).
    pub include_paths: Vec<String>,
    /// This proxy's routes (and the 502s/fences it holds) in each tree.
    pub routes: Vec<RouteLine>,
    /// For a served root: how many routes of its tree are duplicates.
    pub duplicate_routes: usize,
    /// `Type/Reason: message`.
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RouteLine {
    /// The root of the tree (`ns/name`).
    pub root: String,
    /// Merged conditions.
    pub conditions: String,
    /// What it does: `route spec.routes[0]`, `502 (include ns/x)`, `500 (fenced)`.
    pub action: String,
    pub programmed: bool,
    /// For a duplicate: the route that won (`ns/name spec.routes[i]`).
    pub duplicate_of: Option<String>,
}

/// What one tree adds to the reports of the proxies in it (owned: the
/// incremental memo keeps it with the tree).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeReport {
    /// (proxy, include path from the root down to it).
    pub paths: BTreeSet<(ProxyId, String)>,
    /// (holder, line), in processing order.
    pub lines: Vec<(ProxyId, RouteLine)>,
    /// How many routes of the tree are duplicates.
    pub duplicates: usize,
}

/// One tree's contribution to the reports.
pub fn tree_report(vh: &tree::VirtualHostPlan<'_>) -> TreeReport {
    let mut out = TreeReport {
        duplicates: vh.entries.iter().filter(|e| e.duplicate_of.is_some()).count(),
        ..Default::default()
    };
    let describe = |e: &tree::Entry<'_>| match &e.action {
        tree::Action::Route { index, .. } => format!("route spec.routes[{index}]"),
        tree::Action::BadGateway { include } => format!("502 (include {include})"),
        tree::Action::Fence { error } => format!("500 (fenced: {})", error.message),
    };
    for e in &vh.entries {
        for k in 0..e.chain.len() {
            let path: Vec<String> = e.chain[..=k].iter().map(ToString::to_string).collect();
            out.paths.insert((e.chain[k].clone(), path.join(" -> ")));
        }
        let Some(holder) = e.holder() else { continue };
        let duplicate_of = e.duplicate_of.and_then(|w| vh.entries.get(w)).map(|w| {
            format!(
                "{} {}",
                w.holder().map(ToString::to_string).unwrap_or_default(),
                describe(w)
            )
        });
        out.lines.push((
            holder.clone(),
            RouteLine {
                root: vh.root.to_string(),
                conditions: e.conditions.to_string(),
                action: describe(e),
                programmed: e.programmed,
                duplicate_of,
            },
        ));
    }
    out
}

fn reports(inputs: &api::Inputs, statuses: &Statuses, trees: &[Arc<Tree>]) -> Vec<ProxyReport> {
    let mut paths: BTreeMap<ProxyId, BTreeSet<String>> = BTreeMap::new();
    let mut lines: BTreeMap<ProxyId, Vec<RouteLine>> = BTreeMap::new();
    let mut duplicates: BTreeMap<ProxyId, usize> = BTreeMap::new();
    for t in trees {
        duplicates.insert(t.root.clone(), t.report.duplicates);
        for (id, path) in &t.report.paths {
            paths.entry(id.clone()).or_default().insert(path.clone());
        }
        for (holder, line) in &t.report.lines {
            lines.entry(holder.clone()).or_default().push(line.clone());
        }
    }
    inputs
        .http_proxies
        .iter()
        .map(|p| {
            let id = ProxyId::of(&p.object);
            let found = statuses.proxies.get(&id);
            let include_paths: Vec<String> = paths
                .remove(&id)
                .map(|s| s.into_iter().collect())
                .unwrap_or_default();
            let orphaned = found.is_some_and(|f| f.errors.iter().any(|e| e.type_ == type_::ORPHANED));
            let role = if p.object.spec.virtualhost.is_some() {
                "root"
            } else if orphaned {
                "orphan"
            } else {
                "child"
            };
            let current = statuses.current_status(&id);

            ProxyReport {
                namespace: id.namespace.clone(),
                name: id.name.clone(),
                role: role.to_string(),
                fqdn: found.and_then(|f| f.fqdn.clone()),
                current_status: current.to_string(),
                description: statuses.description(&id),
                include_paths,
                routes: lines.remove(&id).unwrap_or_default(),
                duplicate_routes: duplicates.get(&id).copied().unwrap_or(0),
                errors: found
                    .into_iter()
                    .flat_map(|f| &f.errors)
                    .map(|e| format!("{}/{}: {}", e.type_, e.reason, e.message))
                    .collect(),
                warnings: found
                    .into_iter()
                    .flat_map(|f| &f.warnings)
                    .map(|e| format!("{}/{}: {}", e.type_, e.reason, e.message))
                    .collect(),
            }
        })
        .collect()
}
