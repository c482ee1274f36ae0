//! Gateway `status.addresses` and `Programmed` from the provisioned
//! Services' addresses (`Inputs::provisioned_addresses`, filled in
//! Kubernetes mode) and the GatewayClass `parametersRef` decision.

use api::inputs::{AddressType, ProvisionedAddress, ProvisionedAddresses};
use serde_json::{Value, json};

const YAML: &str = r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis}
spec: {controllerName: portcullis.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: portcullis
  listeners: [{name: http, protocol: HTTP, port: 80}]
"#;

fn gateway_status(inputs: &api::Inputs) -> Value {
    let out = translate::translate(inputs, &translate::Settings::default());
    let s = out
        .status
        .iter()
        .find(|s| s.kind == "Gateway")
        .expect("Gateway status");
    translate::status::Timed::new(&s.status, &out.transition_time).to_json()
}

fn class_accepted(inputs: &api::Inputs) -> Value {
    let out = translate::translate(inputs, &translate::Settings::default());
    let s = out
        .status
        .iter()
        .find(|s| s.kind == "GatewayClass")
        .expect("class status");
    let v = translate::status::Timed::new(&s.status, &out.transition_time).to_json();
    v["conditions"][0].clone()
}

fn programmed(status: &Value) -> &Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Programmed"))
        .expect("Programmed")
}

fn load(yaml: &str) -> api::Inputs {
    let loaded = api::loader::load_str("test.yaml", yaml);
    assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
    loaded.inputs
}

#[test]
fn without_a_provisioner_the_configured_address_is_reported() {
    let status = gateway_status(&load(YAML));
    assert_eq!(
        status["addresses"],
        json!([{"type": "IPAddress", "value": "127.0.0.1"}])
    );
    assert_eq!(programmed(&status)["status"], "True");
}

#[test]
fn no_provisioned_address_is_address_not_assigned() {
    let mut inputs = load(YAML);
    inputs.provisioned_addresses = Some(ProvisionedAddresses::new());
    let status = gateway_status(&inputs);
    assert_eq!(status["addresses"], json!([]));
    assert_eq!(programmed(&status)["status"], "False");
    assert_eq!(programmed(&status)["reason"], "AddressNotAssigned");
    // Not accepted is still decided by the listeners alone.
    let accepted = &status["conditions"][0];
    assert_eq!(
        (&accepted["type"], &accepted["status"]),
        (&json!("Accepted"), &json!("True"))
    );
}

#[test]
fn provisioned_addresses_are_reported_and_program_the_gateway() {
    let mut inputs = load(YAML);
    inputs.provisioned_addresses = Some(
        [(
            ("infra".to_string(), "gw".to_string()),
            vec![
                ProvisionedAddress {
                    type_: AddressType::IpAddress,
                    value: "203.0.113.7".into(),
                },
                ProvisionedAddress {
                    type_: AddressType::Hostname,
                    value: "lb.example.com".into(),
                },
            ],
        )]
        .into(),
    );
    let status = gateway_status(&inputs);
    assert_eq!(
        status["addresses"],
        json!([{"type": "IPAddress", "value": "203.0.113.7"}, {"type": "Hostname", "value": "lb.example.com"}])
    );
    assert_eq!(programmed(&status)["status"], "True");
}

#[test]
fn parameters_ref_is_accepted_only_when_it_resolves_to_valid_parameters() {
    let class = |r: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: portcullis}}\nspec:\n  controllerName: portcullis.dev/gateway-controller\n  parametersRef: {r}\n"
        )
    };
    let params = |spec: &str| {
        format!(
            "---\napiVersion: gateway.portcullis.dev/v1alpha1\nkind: GatewayParameters\nmetadata: {{name: p, namespace: infra}}\nspec: {spec}\n"
        )
    };
    let ours = "{group: gateway.portcullis.dev, kind: GatewayParameters, name: p, namespace: infra}";
    let ok = class_accepted(&load(
        &(class(ours) + &params("{replicas: 2, serviceType: ClusterIP}")),
    ));
    assert_eq!(ok["status"], "True", "{ok}");
    for (yaml, needle) in [
        (class(ours), "infra/p does not exist"),
        (
            class("{group: gateway.portcullis.dev, kind: GatewayParameters, name: p}"),
            "namespace: required",
        ),
        (class(ours) + &params("{replicas: -1}"), "spec.replicas"),
    ] {
        let c = class_accepted(&load(&yaml));
        assert_eq!(
            (&c["status"], &c["reason"]),
            (&json!("False"), &json!("InvalidParameters")),
            "{c}"
        );
        assert!(
            c["message"].as_str().is_some_and(|m| m.contains(needle)),
            "{needle}: {c}"
        );
    }
    // A misspelled field is kept by the CRD and refused by the loader:
    // the class is not accepted (and says why), never provisioned without it.
    let loaded = api::loader::load_str("t.yaml", &(class(ours) + &params("{replica: 2}")));
    let c = class_accepted(&loaded.inputs);
    assert_eq!(c["status"], "False", "{c}");
    assert!(
        c["message"].as_str().is_some_and(|m| m.contains("replica")),
        "{c}"
    );
}
