//! Status assertions (conformance/utils/kubernetes/helpers.go) against the
//! status document of `/api/status`.

use serde_json::Value;

use crate::cases::{ExpectedCondition, ExpectedListener, ExpectedParent, StatusAssertion};
use crate::manifests::CONTROLLER;

const GROUP: &str = "gateway.networking.k8s.io";

pub struct Document<'a> {
    pub status: &'a [Value],
    /// `metadata.generation` of each input object, where it was given.
    pub generation: &'a dyn Fn(&str, &str, &str) -> Option<i64>,
}

fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

impl Document<'_> {
    fn find(&self, kind: &str, key: &str) -> Result<&Value, String> {
        let (ns, name) = split(key);
        self.status
            .iter()
            .find(|s| s["kind"] == kind && s["metadata"]["namespace"] == ns && s["metadata"]["name"] == name)
            .map(|s| &s["status"])
            .ok_or_else(|| format!("{kind} {key} has no status"))
    }
}

fn conditions(v: &Value) -> &[Value] {
    v.get("conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn has_condition(conds: &[Value], want: &ExpectedCondition) -> bool {
    conds.iter().any(|c| {
        c["type"] == want.type_.as_str()
            && c["status"] == want.status.as_str()
            && (want.reason.is_empty() || c["reason"] == want.reason.as_str())
    })
}

fn describe(conds: &[Value]) -> String {
    conds
        .iter()
        .map(|c| {
            format!(
                "{}={}/{}",
                c["type"].as_str().unwrap_or("?"),
                c["status"].as_str().unwrap_or("?"),
                c["reason"].as_str().unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn parents(route: &Value) -> &[Value] {
    route
        .get("parents")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Does `parent.parentRef` name Gateway `gw`? `namespace_required` when the
/// route lives in another namespace than the Gateway.
fn names_gateway(parent: &Value, gw: &str, namespace_required: bool, strict_group_kind: bool) -> bool {
    let (gw_ns, gw_name) = split(gw);
    let r = &parent["parentRef"];
    if r["name"] != gw_name {
        return false;
    }
    let ns_ok = match r.get("namespace").and_then(Value::as_str) {
        Some(ns) => ns == gw_ns,
        None => !namespace_required,
    };
    let gk_ok = !strict_group_kind || (r["group"] == GROUP && r["kind"] == "Gateway");
    ns_ok && gk_ok
}

pub fn check(doc: &Document<'_>, assertion: &StatusAssertion) -> Result<(), String> {
    match assertion {
        StatusAssertion::GatewayAndHTTPRoutesMustBeAccepted { gateway, routes } => {
            let gw = doc.find("Gateway", gateway)?;
            let has_address = gw.get("addresses").and_then(Value::as_array).is_some_and(|a| {
                a.iter()
                    .any(|x| x["value"].as_str().is_some_and(|v| !v.is_empty()))
            });
            if !has_address {
                return Err(format!("Gateway {gateway} has no status address"));
            }
            for l in gw
                .get("listeners")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for t in ["ResolvedRefs", "Accepted", "Programmed"] {
                    let want = ExpectedCondition {
                        type_: t.into(),
                        status: "True".into(),
                        reason: String::new(),
                    };
                    if !has_condition(conditions(l), &want) {
                        return Err(format!(
                            "Gateway {gateway} listener {}: want {t}=True, have [{}]",
                            l["name"].as_str().unwrap_or("?"),
                            describe(conditions(l))
                        ));
                    }
                }
            }
            for route in routes {
                accepted_by(doc, route, gateway)?;
            }
            Ok(())
        }
        StatusAssertion::HTTPRouteMustHaveCondition {
            route,
            gateway,
            condition,
        } => {
            let r = doc.find("HTTPRoute", route)?;
            let found = parents(r)
                .iter()
                .filter(|p| names_gateway(p, gateway, false, false))
                .any(|p| has_condition(conditions(p), condition));
            if found {
                Ok(())
            } else {
                Err(format!(
                    "HTTPRoute {route}: no parent {gateway} with {}={} reason {:?}; parents: {}",
                    condition.type_,
                    condition.status,
                    condition.reason,
                    describe_parents(r)
                ))
            }
        }
        StatusAssertion::HTTPRouteMustHaveNoAcceptedParents { route } => {
            let r = doc.find("HTTPRoute", route)?;
            let ps = parents(r);
            let not_accepted = ExpectedCondition {
                type_: "Accepted".into(),
                status: "False".into(),
                reason: String::new(),
            };
            if ps.is_empty() || (ps.len() == 1 && has_condition(conditions(&ps[0]), &not_accepted)) {
                Ok(())
            } else {
                Err(format!(
                    "HTTPRoute {route}: expected no accepted parents, have {}",
                    describe_parents(r)
                ))
            }
        }
        StatusAssertion::GatewayMustHaveZeroRoutes { gateway } => {
            let gw = doc.find("Gateway", gateway)?;
            let ls = gw
                .get("listeners")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            if ls.is_empty() || (ls.len() == 1 && ls[0]["attachedRoutes"] == 0) {
                Ok(())
            } else {
                Err(format!(
                    "Gateway {gateway}: expected zero attached routes, listeners: {ls:?}"
                ))
            }
        }
        StatusAssertion::HTTPRouteMustHaveParents {
            route,
            parents: want,
            namespace_required,
        } => must_have_parents(doc, route, want, *namespace_required),
        StatusAssertion::GatewayStatusMustHaveListeners { gateway, listeners } => {
            must_have_listeners(doc, gateway, listeners)
        }
    }
}

fn describe_parents(route: &Value) -> String {
    let ps: Vec<String> = parents(route)
        .iter()
        .map(|p| {
            format!(
                "{}/{}[{}]",
                p["parentRef"]["namespace"].as_str().unwrap_or("-"),
                p["parentRef"]["name"].as_str().unwrap_or("?"),
                describe(conditions(p))
            )
        })
        .collect();
    if ps.is_empty() {
        "none".into()
    } else {
        ps.join("; ")
    }
}

fn accepted_by(doc: &Document<'_>, route: &str, gateway: &str) -> Result<(), String> {
    let r = doc.find("HTTPRoute", route)?;
    let (route_ns, route_name) = split(route);
    let (gw_ns, _) = split(gateway);
    let want = ExpectedCondition {
        type_: "Accepted".into(),
        status: "True".into(),
        reason: "Accepted".into(),
    };
    let generation = (doc.generation)("HTTPRoute", route_ns, route_name);
    let ok = parents(r).iter().any(|p| {
        p["controllerName"] == CONTROLLER
            && names_gateway(p, gateway, route_ns != gw_ns, true)
            && has_condition(conditions(p), &want)
            && generation.is_none_or(|g| conditions(p).iter().all(|c| c["observedGeneration"] == g))
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "HTTPRoute {route}: not Accepted by {gateway} (controllerName {CONTROLLER}, explicit group/kind{}); parents: {}",
            if route_ns != gw_ns { ", namespace set" } else { "" },
            describe_parents(r)
        ))
    }
}

fn must_have_parents(
    doc: &Document<'_>,
    route: &str,
    want: &[ExpectedParent],
    namespace_required: bool,
) -> Result<(), String> {
    let r = doc.find("HTTPRoute", route)?;
    let have = parents(r);
    if have.len() != want.len() {
        return Err(format!(
            "HTTPRoute {route}: expected {} parents, have {}",
            want.len(),
            describe_parents(r)
        ));
    }
    for w in want {
        let key = format!(
            "{}/{}",
            w.parent_ref.namespace.as_deref().unwrap_or(split(route).0),
            w.parent_ref.name
        );
        let ok = have.iter().any(|p| {
            p["controllerName"] == CONTROLLER
                && names_gateway(p, &key, namespace_required, true)
                && w.conditions.iter().all(|c| has_condition(conditions(p), c))
        });
        if !ok {
            return Err(format!(
                "HTTPRoute {route}: no parent matching {key}; parents: {}",
                describe_parents(r)
            ));
        }
    }
    Ok(())
}

fn must_have_listeners(doc: &Document<'_>, gateway: &str, want: &[ExpectedListener]) -> Result<(), String> {
    let gw = doc.find("Gateway", gateway)?;
    let have = gw
        .get("listeners")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if have.len() != want.len() {
        return Err(format!(
            "Gateway {gateway}: expected {} listener statuses, have {}",
            want.len(),
            have.len()
        ));
    }
    for w in want {
        let Some(l) = have.iter().find(|l| l["name"] == w.name.as_str()) else {
            return Err(format!("Gateway {gateway}: no status for listener {}", w.name));
        };
        let kinds: Vec<(String, String)> = l
            .get("supportedKinds")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|k| {
                (
                    k["group"].as_str().unwrap_or(GROUP).to_string(),
                    k["kind"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        if w.supported_kinds.is_empty() && !kinds.is_empty() {
            return Err(format!(
                "Gateway {gateway} listener {}: expected no supportedKinds, have {kinds:?}",
                w.name
            ));
        }
        for k in &w.supported_kinds {
            let want_kind = (k.group.clone().unwrap_or_else(|| GROUP.into()), k.kind.clone());
            if !kinds.contains(&want_kind) {
                return Err(format!(
                    "Gateway {gateway} listener {}: supportedKinds {kinds:?} lacks {want_kind:?}",
                    w.name
                ));
            }
        }
        if l["attachedRoutes"] != w.attached_routes {
            return Err(format!(
                "Gateway {gateway} listener {}: attachedRoutes {} (expected {})",
                w.name, l["attachedRoutes"], w.attached_routes
            ));
        }
        for c in &w.conditions {
            if !has_condition(conditions(l), c) {
                return Err(format!(
                    "Gateway {gateway} listener {}: want {}={} reason {:?}, have [{}]",
                    w.name,
                    c.type_,
                    c.status,
                    c.reason,
                    describe(conditions(l))
                ));
            }
        }
    }
    Ok(())
}
