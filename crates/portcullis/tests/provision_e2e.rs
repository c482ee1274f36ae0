//! End to end, Kubernetes mode provisioning: a real etcd, kube-apiserver
//! and kube-controller-manager (its garbage collector only; testkit) and
//! `portcullis controller` against them. No kubelet runs: the provisioned
//! Deployments never get pods, which is expected; what is checked is what
//! the API holds (objects, owner references, parameters, status) and that
//! the provisioned bootstrap is accepted by the real Envoy.

mod common;

use std::time::Duration;

use common::kube::{GATEWAY_API, apply, condition, delete, eventually, get};
use common::{free_port, work_dir};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

/// The three provisioned objects of Gateway `infra/<gw>`, when all exist.
async fn provisioned(client: &kube::Client, gw: &str) -> Option<(Value, Value, Value)> {
    let name = format!("portcullis-{gw}");
    Some((
        get(client, "v1", "ConfigMap", Some("infra"), &name).await?,
        get(client, "v1", "Service", Some("infra"), &name).await?,
        get(client, "apps/v1", "Deployment", Some("infra"), &name).await?,
    ))
}

/// Whether none of the three objects of `infra/<gw>` exists.
async fn none_provisioned(client: &kube::Client, gw: &str) -> bool {
    let name = format!("portcullis-{gw}");
    get(client, "v1", "ConfigMap", Some("infra"), &name)
        .await
        .is_none()
        && get(client, "v1", "Service", Some("infra"), &name).await.is_none()
        && get(client, "apps/v1", "Deployment", Some("infra"), &name)
            .await
            .is_none()
}

const WAIT: Duration = Duration::from_secs(30);
const XDS_HOST: &str = "portcullis-xds.portcullis-system.svc";

/// `infra/params` (ClusterIP Services, 2 replicas, …), class `portcullis`
/// naming it, class `portcullis-lb` without parameters (LoadBalancer),
/// Gateways `gw` (class `portcullis`) and `lb` (class `portcullis-lb`), and
/// Gateway `taken`, whose ConfigMap name a user's ConfigMap already has.
const OBJECTS: &str = r#"apiVersion: v1
kind: Namespace
metadata: {name: infra}
---
apiVersion: gateway.portcullis.dev/v1alpha1
kind: GatewayParameters
metadata: {name: params, namespace: infra}
spec:
  replicas: 2
  image: registry.example/envoy:test
  serviceType: ClusterIP
  resources: {requests: {cpu: 100m}, limits: {memory: 256Mi}}
  serviceAnnotations: {lb.example/internal: "true"}
  podAnnotations: {prometheus.io/scrape: "true"}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis}
spec:
  controllerName: portcullis.dev/gateway-controller
  parametersRef: {group: gateway.portcullis.dev, kind: GatewayParameters, name: params, namespace: infra}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis-lb}
spec:
  controllerName: portcullis.dev/gateway-controller
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: portcullis
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - {name: other, protocol: HTTP, port: 8080}
  - {name: same-port, protocol: HTTP, port: 8080, hostname: b.example}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: portcullis-taken, namespace: infra}
data: {mine: "yes"}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: taken, namespace: infra}
spec:
  gatewayClassName: portcullis-lb
  listeners:
  - {name: http, protocol: HTTP, port: 80}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: lb, namespace: infra}
spec:
  gatewayClassName: portcullis-lb
  listeners:
  - {name: http, protocol: HTTP, port: 80}
"#;

fn start_controller(kubeconfig: &std::path::Path, dir: &std::path::Path, admin: u16) -> common::Serve {
    let args = [
        "--xds-service-host",
        XDS_HOST,
        "--xds-service-port",
        "18000",
        // Provisioning is what is tested: no local Envoy.
        "--no-envoy",
        "--lease-duration-seconds",
        "3",
    ];
    common::kube::controller(kubeconfig, &dir.join("run"), free_port(), admin, &args, &[])
}

/// The sum over kinds of a `portcullis_provision_*_total` family.
fn provision_metric(admin: u16, family: &str) -> f64 {
    let (_, _, text) = common::http(admin, "admin", "/metrics").expect("metrics");
    let prefix = format!("portcullis_provision_{family}_total{{");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The `portcullis.dev/config-hash` of a Deployment's pod template.
fn template_hash(deployment: &Value) -> String {
    deployment["spec"]["template"]["metadata"]["annotations"]["portcullis.dev/config-hash"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioning_through_the_api() {
    let test = "provisioning_through_the_api";
    let Some(cluster) = testkit::kube::Cluster::start(test).await else {
        return;
    };
    if let Some(reason) = testkit::kube_controller_manager::missing() {
        if std::env::var_os("PORTCULLIS_REQUIRE_KUBE").is_some_and(|v| !v.is_empty()) {
            panic!("{test}: PORTCULLIS_REQUIRE_KUBE is set but {reason}");
        }
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
        return;
    }
    let _kcm = testkit::kube_controller_manager::ControllerManager::start(&cluster)
        .await
        .expect("start kube-controller-manager");
    cluster
        .apply_crds(&testkit::kube::Cluster::repo_crds())
        .await
        .expect("apply CRDs");
    let client = cluster.client().await.expect("client");
    apply(&client, OBJECTS).await;
    let dir = work_dir(test);
    let admin = free_port();
    let controller = start_controller(&cluster.kubeconfig, &dir, admin);

    // 1. Objects exist, owned by the Gateway, with the parameters applied.
    let (cm, svc, dep) = eventually("gw's objects", WAIT, || provisioned(&client, "gw")).await;
    let gw = get(&client, GATEWAY_API, "Gateway", Some("infra"), "gw")
        .await
        .expect("gw");
    for o in [&cm, &svc, &dep] {
        let owner = &o["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "Gateway", "{o}");
        assert_eq!(owner["name"], "gw");
        assert_eq!(owner["uid"], gw["metadata"]["uid"]);
        assert_eq!(owner["controller"], true);
        assert_eq!(owner["blockOwnerDeletion"], true);
        assert_eq!(
            o["metadata"]["labels"]["gateway.networking.k8s.io/gateway-name"],
            "gw"
        );
        let managers: Vec<&str> = o["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert!(managers.contains(&"portcullis-provisioner"), "{managers:?}");
    }
    assert_eq!(dep["spec"]["replicas"], 2);
    let pod = &dep["spec"]["template"];
    assert_eq!(pod["metadata"]["annotations"]["prometheus.io/scrape"], "true");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example/envoy:test");
    assert_eq!(container["resources"]["requests"]["cpu"], "100m");
    assert_eq!(container["resources"]["limits"]["memory"], "256Mi");
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["metadata"]["annotations"]["lb.example/internal"], "true");
    let ports: Vec<(i64, i64)> = svc["spec"]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| {
            (
                p["port"].as_i64().unwrap_or(0),
                p["targetPort"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [(80, 80), (8080, 8080)],
        "one port per distinct listener port"
    );

    // A user's object of a provisioned name is never taken over (and
    // nothing else of that Gateway is made without its bootstrap).
    eventually("a provisioning failure for `taken`", WAIT, || async {
        let failures = tokio::task::block_in_place(|| provision_metric(admin, "failures"));
        (failures > 0.0).then_some(())
    })
    .await;
    let mine = get(&client, "v1", "ConfigMap", Some("infra"), "portcullis-taken")
        .await
        .expect("the user's ConfigMap");
    assert_eq!(mine["data"], json!({"mine": "yes"}), "{mine}");
    assert!(mine["metadata"]["ownerReferences"].is_null(), "{mine}");
    assert!(
        get(
            &client,
            "apps/v1",
            "Deployment",
            Some("infra"),
            "portcullis-taken"
        )
        .await
        .is_none()
    );

    // 2. The bootstrap, read back from the API, is accepted by the real
    // Envoy and names the Gateway and the xDS Service.
    let bootstrap: Value =
        serde_json::from_str(cm["data"]["envoy.json"].as_str().expect("envoy.json")).expect("bootstrap JSON");
    assert_eq!(bootstrap["node"]["id"], "infra/gw");
    assert!(bootstrap.to_string().contains(XDS_HOST));
    tokio::task::block_in_place(|| testkit::envoy::validate(&bootstrap))
        .expect("Envoy accepts the bootstrap");

    // 3. Addresses: ClusterIP → the cluster IP, Programmed; LoadBalancer
    // without a load balancer → no address, Programmed=False
    // (AddressNotAssigned) until the Service gets an ingress address.
    let cluster_ip = svc["spec"]["clusterIP"].as_str().expect("clusterIP").to_string();
    eventually("gw Programmed with its cluster IP", WAIT, || async {
        let gw = get(&client, GATEWAY_API, "Gateway", Some("infra"), "gw").await?;
        let programmed = condition(&gw["status"]["conditions"], "Programmed")?;
        (programmed["status"] == "True"
            && gw["status"]["addresses"] == json!([{"type": "IPAddress", "value": cluster_ip}]))
        .then_some(())
    })
    .await;
    eventually("lb AddressNotAssigned", WAIT, || async {
        let gw = get(&client, GATEWAY_API, "Gateway", Some("infra"), "lb").await?;
        let programmed = condition(&gw["status"]["conditions"], "Programmed")?;
        let empty = gw["status"]["addresses"].as_array().is_none_or(Vec::is_empty);
        (programmed["status"] == "False" && programmed["reason"] == "AddressNotAssigned" && empty)
            .then_some(())
    })
    .await;
    let (_, lb_svc, _) = eventually("lb's objects", WAIT, || provisioned(&client, "lb")).await;
    assert_eq!(lb_svc["spec"]["type"], "LoadBalancer");
    // What a load balancer controller does once it has an address.
    let services: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "infra",
        &kube::api::ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Service")),
    );
    services
        .patch_status(
            "portcullis-lb",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}, {"hostname": "lb.example.com"}]}}})),
        )
        .await
        .expect("set the load balancer's address");
    eventually("lb Programmed with the load balancer's addresses", WAIT, || async {
        let gw = get(&client, GATEWAY_API, "Gateway", Some("infra"), "lb").await?;
        let programmed = condition(&gw["status"]["conditions"], "Programmed")?;
        (programmed["status"] == "True"
            && gw["status"]["addresses"]
                == json!([{"type": "IPAddress", "value": "203.0.113.10"}, {"type": "Hostname", "value": "lb.example.com"}]))
        .then_some(())
    })
    .await;

    // 4. Idempotent: a retranslation that changes nothing provisioned
    // writes nothing: no apply is sent (the metrics; the apiserver would
    // not bump resourceVersion for a no-op apply either, so they alone
    // would not tell) and the resourceVersions stay.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (cm, svc, dep) = provisioned(&client, "gw").await.expect("objects");
    let writes = tokio::task::block_in_place(|| provision_metric(admin, "writes"));
    let unchanged = tokio::task::block_in_place(|| provision_metric(admin, "unchanged"));
    let versions = |o: &Value| o["metadata"]["resourceVersion"].clone();
    apply(
        &client,
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: nowhere, port: 80}]}]"#,
    )
    .await;
    eventually("the route's status (a translation ran)", WAIT, || async {
        let r = get(&client, GATEWAY_API, "HTTPRoute", Some("infra"), "r").await?;
        r["status"]["parents"]
            .as_array()
            .filter(|p| !p.is_empty())
            .map(|_| ())
    })
    .await;
    // A provisioning pass ran: the three objects of gw and of lb each found
    // unchanged (`taken` fails before any). Once six more are counted, a
    // whole pass is over, any write of it counted too.
    let unchanged2 = eventually("a provisioning pass", WAIT, || async {
        let now = tokio::task::block_in_place(|| provision_metric(admin, "unchanged"));
        (now >= unchanged + 6.0).then_some(now)
    })
    .await;
    let (cm2, svc2, dep2) = provisioned(&client, "gw").await.expect("objects");
    assert_eq!(versions(&cm), versions(&cm2), "ConfigMap rewritten");
    assert_eq!(versions(&svc), versions(&svc2), "Service rewritten");
    assert_eq!(versions(&dep), versions(&dep2), "Deployment rewritten");
    let writes2 = tokio::task::block_in_place(|| provision_metric(admin, "writes"));
    assert_eq!(
        writes2,
        writes,
        "nothing was applied in a pass that found {} objects unchanged",
        unchanged2 - unchanged
    );

    // 5. A parameters change rolls the Deployment.
    let before = template_hash(&dep);
    assert!(!before.is_empty());
    apply(
        &client,
        r#"apiVersion: gateway.portcullis.dev/v1alpha1
kind: GatewayParameters
metadata: {name: params, namespace: infra}
spec:
  replicas: 3
  image: registry.example/envoy:test2
  serviceType: ClusterIP
  resources: {requests: {cpu: 100m}, limits: {memory: 256Mi}}
  serviceAnnotations: {lb.example/internal: "true"}
  podAnnotations: {prometheus.io/scrape: "true"}"#,
    )
    .await;
    let dep = eventually("the Deployment follows the parameters", WAIT, || async {
        let (_, _, dep) = provisioned(&client, "gw").await?;
        (dep["spec"]["replicas"] == 3).then_some(dep)
    })
    .await;
    assert_eq!(
        dep["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example/envoy:test2"
    );
    assert_ne!(template_hash(&dep), before, "the pod template changed: pods roll");

    // 6. Parameters the apiserver would refuse: the class says why
    // (InvalidParameters), its Gateway is not accepted, and the objects
    // stay as last applied (one mistake does not take a proxy away).
    apply(
        &client,
        r#"apiVersion: gateway.portcullis.dev/v1alpha1
kind: GatewayParameters
metadata: {name: params, namespace: infra}
spec:
  replicas: 3
  image: registry.example/envoy:test2
  serviceType: ClusterIP
  resources: {requests: {cpu: lots}}"#,
    )
    .await;
    let message = eventually("GatewayClass InvalidParameters", WAIT, || async {
        let gc = get(&client, GATEWAY_API, "GatewayClass", None, "portcullis").await?;
        let accepted = condition(&gc["status"]["conditions"], "Accepted")?;
        (accepted["status"] == "False" && accepted["reason"] == "InvalidParameters")
            .then(|| accepted["message"].as_str().unwrap_or_default().to_string())
    })
    .await;
    assert!(message.contains("spec.resources.requests.cpu"), "{message}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, _, kept) = provisioned(&client, "gw").await.expect("objects kept");
    assert_eq!(
        versions(&kept),
        versions(&dep),
        "the Deployment is left as last applied"
    );
    // A parametersRef to nothing is InvalidParameters too.
    apply(
        &client,
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis}
spec:
  controllerName: portcullis.dev/gateway-controller
  parametersRef: {group: gateway.portcullis.dev, kind: GatewayParameters, name: missing, namespace: infra}"#,
    )
    .await;
    eventually("GatewayClass InvalidParameters (missing)", WAIT, || async {
        let gc = get(&client, GATEWAY_API, "GatewayClass", None, "portcullis").await?;
        let accepted = condition(&gc["status"]["conditions"], "Accepted")?;
        accepted["message"]
            .as_str()
            .is_some_and(|m| m.contains("infra/missing does not exist"))
            .then_some(())
    })
    .await;

    // 7. A Gateway that is no longer ours (its class changed to one we do
    // not have) loses its objects.
    let mut moved = get(&client, GATEWAY_API, "Gateway", Some("infra"), "gw")
        .await
        .expect("gw");
    moved["spec"]["gatewayClassName"] = "someone-else".into();
    apply(
        &client,
        &serde_json::to_string(&json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "infra"},
            "spec": moved["spec"].clone(),
        }))
        .expect("json"),
    )
    .await;
    eventually("gw's objects removed", WAIT, || async {
        none_provisioned(&client, "gw").await.then_some(())
    })
    .await;
    assert!(
        provisioned(&client, "lb").await.is_some(),
        "another Gateway's objects stay"
    );

    // 8. Deleting a Gateway deletes its objects through the garbage
    // collector (the controller is stopped first, so only the owner
    // references can do it).
    drop(controller);
    delete(&client, GATEWAY_API, "Gateway", Some("infra"), "lb").await;
    eventually(
        "lb's objects garbage-collected",
        Duration::from_secs(60),
        || async { none_provisioned(&client, "lb").await.then_some(()) },
    )
    .await;
}

/// The TLS bootstrap (client certificate through file-based SDS from the
/// mount path) is accepted
/// by the real Envoy once the files exist, and refused when they do not
/// (so Envoy really reads them): the paths are moved to a temporary
/// directory holding a generated CA, certificate and key, as the
/// Deployment's Secret mount would.
#[test]
fn tls_bootstrap_is_accepted_by_envoy_with_the_mounted_files() {
    use kube_provider::provision::{Config, objects};
    let gw = objects::GatewayRef {
        namespace: "infra".into(),
        name: "gw".into(),
        uid: "u".into(),
    };
    let config = Config {
        xds_host: XDS_HOST.into(),
        xds_tls: Some(XDS_HOST.into()),
        ..Config::new("portcullis.dev/gateway-controller")
    };
    let text = objects::bootstrap(&gw, &config).expect("bootstrap");
    let missing: Value = serde_json::from_str(&text).expect("json");
    let refused = testkit::envoy::validate(&missing);
    assert!(refused.is_err(), "Envoy must read the certificate files");

    let dir = work_dir("tls-bootstrap");
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("ca");
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let cert = params.signed_by(&key, &issuer).expect("cert");
    std::fs::write(dir.join("tls.crt"), cert.pem()).expect("write");
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).expect("write");
    std::fs::write(dir.join("ca.crt"), ca.pem()).expect("write");
    // The SDS documents the issuer puts in the same Secret.
    let path = |f: &str| dir.join(f).display().to_string();
    let tls = translate::output::XdsClientTls {
        cert_chain_file: path("tls.crt"),
        private_key_file: path("tls.key"),
        ca_file: path("ca.crt"),
        server_name: XDS_HOST.into(),
    };
    for (file, doc) in translate::output::bootstrap::xds_client_sds(&tls, &dir.display().to_string()) {
        std::fs::write(dir.join(file), doc.to_string()).expect("write");
    }
    let moved = text.replace(
        kube_provider::names::XDS_CERT_DIR,
        dir.to_str().expect("utf-8 path"),
    );
    assert_ne!(moved, text, "the bootstrap names files under the mount path");
    let bootstrap: Value = serde_json::from_str(&moved).expect("json");
    testkit::envoy::validate(&bootstrap).expect("Envoy accepts the TLS bootstrap");
}
