//! Which Gateways get objects, and which objects stay: decided from the
//! translator's published status (which Gateways are ours, which are
//! accepted, which ListenerSets are accepted) and the snapshot it
//! translated. Pure: [`super::apply`] does the I/O.

use std::collections::{BTreeMap, BTreeSet};

use api::Inputs;

use super::Config;
use super::objects::{self, BuildError, Desired, GatewayRef};
use crate::names;

/// What one translation said about Gateways and ListenerSets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdicts {
    /// Every Gateway of our classes (`namespace`, `name`) → whether it is
    /// `Accepted`.
    pub gateways: BTreeMap<(String, String), bool>,
    /// ListenerSets that are `Accepted` (their listeners are served).
    pub listener_sets: BTreeSet<(String, String)>,
}

impl Verdicts {
    /// Reads the verdicts from a translation's status.
    pub fn of(statuses: &[std::sync::Arc<translate::ObjectStatus>]) -> Verdicts {
        let mut out = Verdicts::default();
        for s in statuses {
            if s.kind != "Gateway" && s.kind != "ListenerSet" {
                continue;
            }
            let key = (
                s.metadata.namespace.clone().unwrap_or_default(),
                s.metadata.name.clone(),
            );
            let accepted = s
                .status
                .conditions()
                .iter()
                .any(|c| c.type_ == "Accepted" && c.status == "True");
            if s.kind == "Gateway" {
                out.gateways.insert(key, accepted);
            } else if accepted {
                out.listener_sets.insert(key);
            }
        }
        out
    }
}

/// The objects to apply, and the (namespace, object name) of every
/// provisioned object that may stay.
#[derive(Debug, Default)]
pub struct Plan {
    pub desired: Vec<(GatewayRef, Desired)>,
    /// Objects of Gateways still ours (accepted or not): never deleted.
    pub keep: BTreeSet<(String, String)>,
    /// Gateways that should have objects but cannot (logged).
    pub errors: Vec<BuildError>,
}

pub fn plan(inputs: &Inputs, verdicts: &Verdicts, config: &Config) -> Plan {
    let mut out = Plan::default();
    for (namespace, name) in verdicts.gateways.keys() {
        out.keep.insert((namespace.clone(), names::provisioned(name)));
    }
    for gw in &inputs.gateways {
        let meta = &gw.object.metadata;
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let name = meta.name.clone().unwrap_or_default();
        if verdicts.gateways.get(&(namespace.clone(), name.clone())) != Some(&true) {
            continue;
        }
        // Only objects read from the API have a uid (an owner reference
        // needs it).
        let Some(uid) = meta.uid.clone() else { continue };
        let class = inputs
            .gateway_classes
            .iter()
            .find(|c| c.object.metadata.name.as_deref() == Some(gw.object.spec.gateway_class_name.as_str()));
        let Some(class) = class else { continue };
        // An accepted Gateway has an accepted class; should they disagree
        // (a newer snapshot), the next translation decides.
        let Ok(params) = api::gateway_parameters::resolve(&class.object, &inputs.gateway_parameters) else {
            continue;
        };
        let params = params.map(|p| p.spec.clone()).unwrap_or_default();
        let mut ports: BTreeSet<u16> = gw
            .object
            .spec
            .listeners
            .iter()
            .filter_map(|l| u16::try_from(l.port).ok())
            .collect();
        for set in &inputs.listener_sets {
            let set_ns = set
                .object
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let set_name = set.object.metadata.name.clone().unwrap_or_default();
            let parent = &set.object.spec.parent_ref;
            let parent_ns = parent.namespace.clone().unwrap_or_else(|| set_ns.clone());
            if parent.name != name
                || parent_ns != namespace
                || !verdicts.listener_sets.contains(&(set_ns, set_name))
            {
                continue;
            }
            ports.extend(
                set.object
                    .spec
                    .listeners
                    .iter()
                    .filter_map(|l| u16::try_from(l.port).ok()),
            );
        }
        ports.remove(&0);
        let gateway = GatewayRef { namespace, name, uid };
        match objects::build(&gateway, &ports, &params, config) {
            Ok(d) => out.desired.push((gateway, d)),
            Err(e) => out.errors.push(e),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ours}
spec: {controllerName: portcullis.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: a, namespace: infra, uid: uid-a}
spec:
  gatewayClassName: ours
  listeners: [{name: http, protocol: HTTP, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: b, namespace: infra, uid: uid-b}
spec:
  gatewayClassName: ours
  listeners: [{name: http, protocol: HTTP, port: 81}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: extra, namespace: infra}
spec:
  parentRef: {name: a}
  listeners: [{name: more, protocol: HTTP, port: 9090}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: refused, namespace: infra}
spec:
  parentRef: {name: a}
  listeners: [{name: no, protocol: HTTP, port: 9191}]
"#;

    fn key(ns: &str, name: &str) -> (String, String) {
        (ns.to_string(), name.to_string())
    }

    #[test]
    fn accepted_gateways_get_objects_ours_are_kept_others_are_not() {
        let inputs = api::loader::load_str("t.yaml", YAML).inputs;
        let verdicts = Verdicts {
            // `a` accepted, `b` ours but not accepted; a third Gateway
            // (not ours) has no verdict at all.
            gateways: [(key("infra", "a"), true), (key("infra", "b"), false)].into(),
            listener_sets: [key("infra", "extra")].into(),
        };
        let plan = plan(
            &inputs,
            &verdicts,
            &Config::new("portcullis.dev/gateway-controller"),
        );
        assert!(plan.errors.is_empty(), "{:?}", plan.errors);
        assert_eq!(plan.desired.len(), 1);
        let (gw, desired) = &plan.desired[0];
        assert_eq!((gw.name.as_str(), gw.uid.as_str()), ("a", "uid-a"));
        let ports: Vec<i32> = desired
            .service
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .map(|p| p.iter().map(|p| p.port).collect())
            .unwrap_or_default();
        // The accepted ListenerSet's port, not the refused one's.
        assert_eq!(ports, [80, 9090]);
        assert_eq!(
            plan.keep,
            [key("infra", "portcullis-a"), key("infra", "portcullis-b")].into()
        );
    }

    #[test]
    fn verdicts_read_the_accepted_condition() {
        let inputs = api::loader::load_str("t.yaml", YAML).inputs;
        let out = translate::translate(&inputs, &translate::Settings::default());
        let v = Verdicts::of(&out.status);
        assert_eq!(v.gateways.get(&key("infra", "a")), Some(&true));
        assert_eq!(v.gateways.get(&key("infra", "b")), Some(&true));
    }
}
