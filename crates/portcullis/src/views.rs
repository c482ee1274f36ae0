//! Table views of what portcullis did (`portcullis get` / `describe`),
//! computed from the inputs and the translation output. The admin API
//! serves them at `/api/views`; offline, they are computed from `-f PATH`.

use serde::{Deserialize, Serialize};
use translate::status::{Condition, StatusBody};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Views {
    pub gateways: Vec<GatewayRow>,
    pub routes: Vec<RouteRow>,
    /// TrafficPolicies and GatewayExtensions.
    #[serde(default)]
    pub policies: Vec<PolicyRow>,
    /// Contour HTTPProxies.
    #[serde(default)]
    pub httpproxies: Vec<translate::httpproxy::ProxyReport>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PolicyRow {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// What it asks to attach to, as written (`HTTPRoute r/rule`, `HTTPRoute tier=public`).
    pub targets: Vec<String>,
    /// Gateways its targets are attached to.
    pub ancestors: Vec<String>,
    pub accepted: String,
    pub reason: String,
    /// Every error and warning, one per line, with its class.
    pub diagnostics: Vec<String>,
}

/// `file:line: message` of every diagnostic about `label` (`Kind ns/name`).
fn diagnostics_of(out: &translate::Output, label: &str) -> Vec<String> {
    out.diagnostics
        .iter()
        .filter(|d| d.object.as_deref() == Some(label))
        .map(|d| format!("{}: {}", d.file.as_deref().unwrap_or("-"), d.message))
        .collect()
}

/// The row of one TrafficPolicy or GatewayExtension status entry.
fn policy_row(
    inputs: &api::Inputs,
    out: &translate::Output,
    s: &translate::ObjectStatus,
    condition: Option<&translate::status::Condition>,
    ancestors: Vec<String>,
) -> PolicyRow {
    let ns = s.metadata.namespace.clone().unwrap_or_default();
    let targets = inputs
        .traffic_policies
        .iter()
        .filter(|p| {
            s.kind == "TrafficPolicy"
                && p.object.metadata.name.as_deref() == Some(&s.metadata.name)
                && p.object.metadata.namespace.as_deref() == Some(&ns)
        })
        .flat_map(|p| {
            let spec = &p.object.spec;
            spec.target_refs
                .iter()
                .map(|t| match &t.section_name {
                    Some(sec) => format!("{} {}/{sec}", t.kind, t.name),
                    None => format!("{} {}", t.kind, t.name),
                })
                .chain(spec.target_selectors.iter().map(|t| {
                    let labels: Vec<String> =
                        t.match_labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!("{} {}", t.kind, labels.join(","))
                }))
                .collect::<Vec<_>>()
        })
        .collect();
    let label = format!("{} {}/{}", s.kind, ns, s.metadata.name);
    PolicyRow {
        kind: s.kind.clone(),
        namespace: ns,
        name: s.metadata.name.clone(),
        targets,
        ancestors,
        accepted: condition.map_or("-", |c| c.status).to_string(),
        reason: condition.map_or("-", |c| c.reason).to_string(),
        diagnostics: diagnostics_of(out, &label),
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GatewayRow {
    pub namespace: String,
    pub name: String,
    pub class: String,
    pub address: String,
    pub accepted: String,
    pub programmed: String,
    pub attached_routes: i32,
    /// `DefaultGateway=True` (GEP-3793 `defaultScope: All`).
    #[serde(default)]
    pub default: bool,
    pub listeners: Vec<ListenerRow>,
    pub conditions: Vec<ConditionRow>,
    /// Route configurations or virtual hosts fenced by a Gateway or
    /// listener policy, each with why (`translate::ScopeReplacement`).
    #[serde(default)]
    pub replaced_scopes: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListenerRow {
    pub name: String,
    pub attached_routes: i32,
    pub conditions: Vec<ConditionRow>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConditionRow {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RouteRow {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub hostnames: Vec<String>,
    /// `spec.useDefaultGateways: All`.
    #[serde(default)]
    pub use_default_gateways: bool,
    pub parents: Vec<ParentRow>,
    /// Rules answering the replacement 500 (or guarded), with why.
    #[serde(default)]
    pub replaced: Vec<ReplacedRow>,
    /// Per rule: the TrafficPolicy features in force and where they come
    /// from (`rule 0: rbac, cors from TrafficPolicy app/p`).
    #[serde(default)]
    pub policies: Vec<String>,
    pub diagnostics: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReplacedRow {
    pub rule: usize,
    pub error_class: String,
    pub message: String,
    /// Gateways (`namespace/name`) where the replacement is served.
    pub gateways: Vec<String>,
}

/// One row per replaced rule of a route, the Gateways merged.
fn replaced_rows(out: &translate::Output, kind: &str, ns: &str, name: &str) -> Vec<ReplacedRow> {
    let mut rows: Vec<ReplacedRow> = Vec::new();
    for r in out
        .replacements
        .iter()
        .filter(|r| r.route_kind == kind && r.route_namespace == ns && r.route_name == name)
    {
        match rows
            .iter_mut()
            .find(|x| x.rule == r.rule && x.message == r.message)
        {
            Some(row) => row.gateways.push(r.gateway.clone()),
            None => rows.push(ReplacedRow {
                rule: r.rule,
                error_class: r.class.to_string(),
                message: r.message.clone(),
                gateways: vec![r.gateway.clone()],
            }),
        }
    }
    rows.sort_by(|a, b| (a.rule, &a.message).cmp(&(b.rule, &b.message)));
    rows
}

/// `rule <i>: <features> from <policy> (<level>)`, one line per (rule,
/// policy, level).
fn policy_lines(out: &translate::Output, kind: &str, ns: &str, name: &str) -> Vec<String> {
    let rows = out.policy_rows(kind, ns, name);
    let mut by: std::collections::BTreeMap<(usize, &str, &str), Vec<&str>> = Default::default();
    for a in &rows {
        by.entry((a.rule, a.policy.as_str(), a.level.as_str()))
            .or_default()
            .push(&a.feature);
    }
    by.into_iter()
        .map(|((rule, policy, level), features)| {
            format!("rule {rule}: {} from {policy} ({level})", features.join(", "))
        })
        .collect()
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ParentRow {
    pub gateway: String,
    pub section: Option<String>,
    /// A default Gateway's claim, not in `spec.parentRefs`.
    #[serde(default)]
    pub by_default: bool,
    pub conditions: Vec<ConditionRow>,
}

fn rows(conds: &[Condition]) -> Vec<ConditionRow> {
    conds
        .iter()
        .map(|c| ConditionRow {
            type_: c.type_.into(),
            status: c.status.into(),
            reason: c.reason.into(),
            message: c.message.clone(),
        })
        .collect()
}

fn cond<'a>(conds: &'a [Condition], t: &str) -> &'a str {
    conds
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| c.status)
        .unwrap_or("-")
}

pub fn build(inputs: &api::Inputs, out: &translate::Output) -> Views {
    let mut views = Views {
        httpproxies: out.http_proxies.clone(),
        ..Default::default()
    };
    for s in &out.status {
        let ns = s.metadata.namespace.clone().unwrap_or_default();
        match &s.status {
            StatusBody::Gateway(g) if s.kind == "Gateway" => {
                let class = inputs
                    .gateways
                    .iter()
                    .find(|x| {
                        x.object.metadata.name.as_deref() == Some(&s.metadata.name)
                            && x.object.metadata.namespace.as_deref().unwrap_or("default") == ns
                    })
                    .map(|x| x.object.spec.gateway_class_name.clone())
                    .unwrap_or_default();
                let key = format!("{ns}/{}", s.metadata.name);
                views.gateways.push(GatewayRow {
                    namespace: ns,
                    name: s.metadata.name.clone(),
                    class,
                    address: g.addresses.first().map(|a| a.value.clone()).unwrap_or_default(),
                    accepted: cond(&g.conditions, "Accepted").into(),
                    programmed: cond(&g.conditions, "Programmed").into(),
                    attached_routes: g.listeners.iter().map(|l| l.attached_routes).sum(),
                    default: g
                        .conditions
                        .iter()
                        .any(|c| c.type_ == translate::default_gateway::CONDITION && c.status == "True"),
                    listeners: g
                        .listeners
                        .iter()
                        .map(|l| ListenerRow {
                            name: l.name.clone(),
                            attached_routes: l.attached_routes,
                            conditions: rows(&l.conditions),
                        })
                        .collect(),
                    conditions: rows(&g.conditions),
                    replaced_scopes: out
                        .scope_replacements
                        .iter()
                        .filter(|r| r.gateway == key)
                        .map(|r| {
                            let by = if r.listener.is_empty() {
                                "Gateway policy".to_string()
                            } else {
                                format!("listener {} policy", r.listener)
                            };
                            format!(
                                "{} {} ({by}): {} [{}]",
                                r.scope,
                                r.names.join(", "),
                                r.message,
                                r.class
                            )
                        })
                        .collect(),
                });
            }
            StatusBody::Route { parents } => {
                // What the route's own spec says: hostnames, explicit
                // parents, whether it asks for a default Gateway (the
                // HTTPRoute and GRPCRoute types have the same fields).
                macro_rules! spec_of {
                    ($list:expr, $all:path) => {
                        $list
                            .iter()
                            .find(|r| {
                                r.object.metadata.name.as_deref() == Some(&s.metadata.name)
                                    && r.object.metadata.namespace.as_deref() == Some(&ns)
                            })
                            .map(|r| {
                                let spec = &r.object.spec;
                                (
                                    spec.hostnames.clone().unwrap_or_default(),
                                    spec.parent_refs
                                        .iter()
                                        .flatten()
                                        .map(|p| (p.namespace.clone(), p.name.clone()))
                                        .collect::<Vec<_>>(),
                                    matches!(spec.use_default_gateways, Some($all)),
                                )
                            })
                    };
                }
                let (hostnames, explicit, use_default_gateways) = match s.kind.as_str() {
                    "HTTPRoute" => spec_of!(
                        inputs.http_routes,
                        api::gateway_api::experimental::httproutes::HttpRouteUseDefaultGateways::All
                    ),
                    _ => spec_of!(
                        inputs.grpc_routes,
                        api::gateway_api::experimental::grpcroutes::GrpcRouteUseDefaultGateways::All
                    ),
                }
                .unwrap_or_default();
                let is_explicit = |gw_ns: &str, gw_name: &str| {
                    explicit
                        .iter()
                        .any(|(pns, pname)| pname == gw_name && pns.as_deref().unwrap_or(&ns) == gw_ns)
                };
                let label = format!("{} {}/{}", s.kind, ns, s.metadata.name);
                views.routes.push(RouteRow {
                    kind: s.kind.clone(),
                    namespace: ns.clone(),
                    name: s.metadata.name.clone(),
                    hostnames,
                    use_default_gateways,
                    parents: parents
                        .iter()
                        .map(|p| ParentRow {
                            gateway: format!("{}/{}", p.parent_ref.namespace, p.parent_ref.name),
                            section: p.parent_ref.section_name.clone(),
                            by_default: use_default_gateways
                                && !is_explicit(&p.parent_ref.namespace, &p.parent_ref.name),
                            conditions: rows(&p.conditions),
                        })
                        .collect(),
                    replaced: replaced_rows(out, &s.kind, &ns, &s.metadata.name),
                    policies: policy_lines(out, &s.kind, &ns, &s.metadata.name),
                    diagnostics: diagnostics_of(out, &label),
                });
            }
            StatusBody::Policy { ancestors } if s.kind == "TrafficPolicy" => {
                let condition = ancestors.first().and_then(|a| a.conditions.first());
                let names = ancestors
                    .iter()
                    .map(|a| format!("{}/{}", a.ancestor_ref.namespace, a.ancestor_ref.name))
                    .collect();
                views.policies.push(policy_row(inputs, out, s, condition, names));
            }
            StatusBody::Conditions { conditions } if s.kind == "GatewayExtension" => {
                views
                    .policies
                    .push(policy_row(inputs, out, s, conditions.first(), Vec::new()));
            }
            _ => {}
        }
    }
    views
}
