//! Gateway addresses from the provisioned Services: the input the
//! translator reports as `status.addresses` and from which it decides
//! `Programmed` (`api::Inputs::provisioned_addresses`; the translator stays
//! pure). Read from the provider's Service store (its objects keep
//! `status`), so a load balancer assigning an address is a Service event
//! and builds a new snapshot.
//!
//! Which addresses, by Service type:
//! - `LoadBalancer`: `status.loadBalancer.ingress[]` (`ip` as `IPAddress`,
//!   `hostname` as `Hostname`); none until a load balancer controller
//!   assigns one, and the Gateway stays `Programmed=False`
//!   (`AddressNotAssigned`).
//! - `ClusterIP` and `NodePort`: `spec.clusterIPs` (else `spec.clusterIP`),
//!   the address the Service answers at inside the cluster (for
//!   `NodePort`, the nodes' addresses would be reachable from outside too,
//!   but they are not watched; the cluster IP is what the Service itself
//!   names).
//!
//! Only the Service named [`crate::names::provisioned`] in the Gateway's
//! namespace counts, and only when the Gateway (by uid) is its controller
//! owner: a user's Service of that name never lends a Gateway its address.

use api::inputs::{AddressType, ProvisionedAddress, ProvisionedAddresses};
use serde_json::Value;

use crate::{Kind, Stores, names};

/// The addresses of every Gateway in the store that has a provisioned
/// Service (a Gateway without one is absent: no address).
pub fn collect(stores: &Stores) -> ProvisionedAddresses {
    let mut out = ProvisionedAddresses::new();
    for gw in stores.all(Kind::Gateway) {
        let (Some(namespace), Some(name), Some(uid)) = (
            gw.metadata.namespace.as_deref(),
            gw.metadata.name.as_deref(),
            gw.metadata.uid.as_deref(),
        ) else {
            continue;
        };
        let Some(service) = stores.get(Kind::Service, Some(namespace), &names::provisioned(name)) else {
            continue;
        };
        let owned = service
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == uid && o.controller == Some(true));
        if !owned {
            continue;
        }
        let Ok(value) = serde_json::to_value(&*service) else {
            continue;
        };
        out.insert((namespace.to_string(), name.to_string()), of_service(&value));
    }
    out
}

/// The addresses of one Service (see the module doc).
pub fn of_service(service: &Value) -> Vec<ProvisionedAddress> {
    let spec = &service["spec"];
    let mut out = Vec::new();
    if spec["type"].as_str() == Some("LoadBalancer") {
        for ingress in service["status"]["loadBalancer"]["ingress"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for (key, type_) in [
                ("ip", AddressType::IpAddress),
                ("hostname", AddressType::Hostname),
            ] {
                if let Some(v) = ingress[key].as_str().filter(|v| !v.is_empty()) {
                    out.push(ProvisionedAddress {
                        type_,
                        value: v.to_string(),
                    });
                }
            }
        }
    } else {
        let ips: Vec<&str> = match spec["clusterIPs"].as_array() {
            Some(ips) => ips.iter().filter_map(Value::as_str).collect(),
            None => spec["clusterIP"].as_str().into_iter().collect(),
        };
        for ip in ips {
            // Headless: no address.
            if !ip.is_empty() && ip != "None" {
                out.push(ProvisionedAddress {
                    type_: AddressType::IpAddress,
                    value: ip.to_string(),
                });
            }
        }
    }
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn values(a: &[ProvisionedAddress]) -> Vec<(&str, &str)> {
        a.iter().map(|a| (a.type_.as_str(), a.value.as_str())).collect()
    }

    #[test]
    fn load_balancer_uses_ingress_only() {
        let pending = json!({"spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.9"}, "status": {}});
        assert!(of_service(&pending).is_empty(), "no ingress yet: no address");
        let ready = json!({"spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.9"},
            "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}, {"hostname": "lb.example.com"}]}}});
        assert_eq!(
            values(&of_service(&ready)),
            [("IPAddress", "203.0.113.7"), ("Hostname", "lb.example.com")]
        );
    }

    #[test]
    fn cluster_ip_and_node_port_use_cluster_ips() {
        let svc = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9", "fd00::9"]}});
        assert_eq!(
            values(&of_service(&svc)),
            [("IPAddress", "10.96.0.9"), ("IPAddress", "fd00::9")]
        );
        let node_port = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.10"}});
        assert_eq!(values(&of_service(&node_port)), [("IPAddress", "10.96.0.10")]);
        let headless = json!({"spec": {"type": "ClusterIP", "clusterIP": "None"}});
        assert!(of_service(&headless).is_empty());
    }
}
