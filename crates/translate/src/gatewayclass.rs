//! GatewayClass selection: a class is ours when its `controllerName` equals
//! the configured controller name; Gateways of other classes are ignored
//! entirely (no xDS, no status), as another controller owns them. A class
//! with a `parametersRef` is accepted only when it names a valid
//! GatewayParameters (`api::gateway_parameters::resolve`).

use std::collections::BTreeMap;
use std::sync::Arc;

use api::Inputs;

use crate::ObjectStatus;
use crate::status::{Stamp, StatusBody, reason};

/// Our classes by name, with whether each is accepted.
pub struct Classes {
    pub accepted: BTreeMap<String, bool>,
}

impl Classes {
    pub fn is_ours(&self, class: &str) -> bool {
        self.accepted.contains_key(class)
    }
}

pub fn process(inputs: &Inputs, controller: &str, status: &mut Vec<Arc<ObjectStatus>>) -> Classes {
    let mut accepted = BTreeMap::new();
    for class in &inputs.gateway_classes {
        let gc = &class.object;
        if gc.spec.controller_name != controller {
            continue;
        }
        let name = gc.metadata.name.clone().unwrap_or_default();
        let stamp = Stamp {
            generation: gc.metadata.generation.unwrap_or(1),
        };
        // Only our GatewayParameters, existing and valid, can be honoured
        // (they shape what Kubernetes mode provisions).
        let resolved = api::gateway_parameters::resolve(gc, &inputs.gateway_parameters);
        let ok = resolved.is_ok();
        let accepted_cond = match resolved {
            Ok(_) => stamp.condition("Accepted", true, reason::ACCEPTED, "Accepted by portcullis"),
            Err(e) => stamp.condition("Accepted", false, reason::INVALID_PARAMETERS, e.to_string()),
        };
        let version = stamp.condition(
            "SupportedVersion",
            true,
            reason::SUPPORTED_VERSION,
            "Gateway API v1.5 CRDs are supported",
        );
        status.push(Arc::new(ObjectStatus::new(
            "gateway.networking.k8s.io/v1",
            "GatewayClass",
            None,
            &name,
            StatusBody::Conditions {
                conditions: vec![accepted_cond, version],
            },
        )));
        accepted.insert(name, ok);
    }
    Classes { accepted }
}
