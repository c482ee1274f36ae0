//! The HTTPProxy and TLSCertificateDelegation CRDs generated from the Rust
//! types (`crds/portcullis/`, `api::crd`), against a real kube-apiserver:
//! Contour's names are served (short names included); a valid HTTPProxy
//! is accepted and stored as written; a field portcullis does not
//! implement (`virtualhost.authorization`) and a misspelled one survive the
//! apiserver (Contour's CRD pruned the misspelled one: the proxy was then
//! served without it); a value of the wrong type is refused by the schema;
//! and `portcullis controller` fails the proxy with the unknown field
//! closed (its FQDN answers the replacement 500, its status is `invalid`
//! naming the field) while the valid one serves.

mod common;

use std::time::Duration;

use common::kube::{apply, controller, eventually, forward, namespaces};
use common::{echo_pod, free_port, http, service_at, wait_for, work_dir};
use kube::api::{Api, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn proxies(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("projectcontour.io", "v1", kind),
        plural,
    );
    Api::namespaced_with(client.clone(), "team", &ar)
}

/// A valid HTTPProxy using most of what portcullis implements: stored
/// exactly as written (nothing pruned, nothing defaulted).
fn valid_spec() -> Value {
    json!({
        "virtualhost": {"fqdn": "ok.example.com"},
        "includes": [{"name": "child", "conditions": [{"prefix": "/child"}]}],
        "routes": [{
            "conditions": [{"prefix": "/"}, {"header": {"name": "x-a", "notpresent": true}}],
            "services": [{"name": "s", "port": 80, "weight": 100,
                "requestHeadersPolicy": {"set": [{"name": "x-b", "value": "1"}], "remove": ["x-c"]}}],
            "enableWebsockets": true,
            "timeoutPolicy": {"response": "10s", "idle": "1m"},
            "retryPolicy": {"count": 2, "perTryTimeout": "1s", "retryOn": ["5xx"], "retriableStatusCodes": [503]},
            "pathRewritePolicy": {"replacePrefix": [{"prefix": "/", "replacement": "/"}]},
            "responseHeadersPolicy": {"set": [{"name": "x-d", "value": "2"}]},
        }, {
            "conditions": [{"exact": "/moved"}],
            "requestRedirectPolicy": {"scheme": "https", "hostname": "elsewhere.example.com", "statusCode": 301},
        }, {
            "conditions": [{"prefix": "/gone"}, {"queryParameter": {"name": "q", "exact": "1"}}],
            "directResponsePolicy": {"statusCode": 410, "body": "gone"},
        }],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_httpproxy_crd_keeps_unknown_fields_and_the_proxy_fails_closed() {
    let test = "generated_httpproxy_crd_keeps_unknown_fields_and_the_proxy_fails_closed";
    let Some(cluster) = testkit::kube::Cluster::start(test).await else {
        return;
    };
    let crds = testkit::kube::Cluster::repo_crds();
    assert!(
        crds.iter().any(|p| p.ends_with("portcullis/httpproxies.yaml")),
        "the generated CRD is among the repository's: {crds:?}"
    );
    cluster.apply_crds(&crds).await.expect("apply CRDs");
    let client = cluster.client().await.expect("client");

    // Contour's names: `kubectl get proxy|proxies|tlscerts` as with Contour.
    let resources = client
        .list_api_group_resources("projectcontour.io/v1")
        .await
        .expect("projectcontour.io/v1 served");
    let short = |plural: &str| {
        resources
            .resources
            .iter()
            .find(|r| r.name == plural)
            .and_then(|r| r.short_names.clone())
            .unwrap_or_default()
    };
    assert_eq!(short("httpproxies"), ["proxy", "proxies"]);
    assert_eq!(short("tlscertificatedelegations"), ["tlscerts"]);

    let backend = echo_pod("team", "team-pod");
    let gw_port = free_port();
    apply(
        &client,
        &format!(
            "{}{}{}",
            namespaces(&["infra", "team"]),
            common::gateway(gw_port),
            service_at("team", "s", forward(&backend))
        ),
    )
    .await;

    let api = proxies(&client, "HTTPProxy", "httpproxies");
    let create = |name: &str, spec: Value| {
        serde_json::from_value::<DynamicObject>(json!({
            "apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy",
            "metadata": {"name": name, "namespace": "team"},
            "spec": spec,
        }))
        .expect("object")
    };

    // A valid proxy is accepted and stored as written.
    api.create(&PostParams::default(), &create("ok", valid_spec()))
        .await
        .expect("a valid HTTPProxy is accepted");
    api.create(
        &PostParams::default(),
        &create(
            "child",
            json!({"routes": [{"services": [{"name": "s", "port": 80}]}]}),
        ),
    )
    .await
    .expect("a child");
    let stored = api.get("ok").await.expect("read back");
    assert_eq!(stored.data["spec"], valid_spec(), "stored as written");

    // A Contour field portcullis does not implement, and a misspelled one
    // (`permitInsecur`, which Contour's CRD pruned): both kept for the
    // loader to refuse.
    let authorization = json!({"extensionRef": {"name": "ext-auth", "namespace": "auth"}});
    let unknown = [
        (
            "unimplemented",
            "virtualhost.authorization",
            json!({"virtualhost": {"fqdn": "auth.example.com", "authorization": authorization},
                "routes": [{"services": [{"name": "s", "port": 80}]}]}),
        ),
        (
            "misspelled",
            "routes[0].permitInsecur",
            json!({"virtualhost": {"fqdn": "typo.example.com"},
                "routes": [{"services": [{"name": "s", "port": 80}], "permitInsecur": true}]}),
        ),
    ];
    for (name, field, spec) in &unknown {
        api.create(&PostParams::default(), &create(name, spec.clone()))
            .await
            .unwrap_or_else(|e| panic!("an HTTPProxy with {field} refused: {e}"));
        let stored = api.get(name).await.expect("read back");
        assert_eq!(&stored.data["spec"], spec, "{field} pruned: {}", stored.data);
    }

    // The same for TLSCertificateDelegation.
    let delegations = proxies(&client, "TLSCertificateDelegation", "tlscertificatedelegations");
    let delegation: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "projectcontour.io/v1", "kind": "TLSCertificateDelegation",
        "metadata": {"name": "d", "namespace": "team"},
        "spec": {"delegations": [{"secretName": "cert", "targetNamespaces": ["*"], "targetNamespaceSelector": {}}]},
    }))
    .expect("object");
    delegations
        .create(&PostParams::default(), &delegation)
        .await
        .expect("a TLSCertificateDelegation with an unknown field is accepted");
    let stored = delegations.get("d").await.expect("read back");
    assert!(
        stored.data["spec"]["delegations"][0]
            .get("targetNamespaceSelector")
            .is_some(),
        "not pruned: {}",
        stored.data
    );

    // What the types say is checked: a port that is not an integer, a
    // service without its port.
    for (what, spec) in [
        (
            "a port of the wrong type",
            json!({"routes": [{"services": [{"name": "s", "port": "eighty"}]}]}),
        ),
        (
            "a service without its port",
            json!({"routes": [{"services": [{"name": "s"}]}]}),
        ),
    ] {
        match api.create(&PostParams::default(), &create("refused", spec)).await {
            Err(kube::Error::Api(e)) => assert_eq!(e.code, 422, "{what}: {e}"),
            other => panic!("{what}: accepted or unexpected answer: {other:?}"),
        }
    }

    // The controller: the valid proxy serves; each one with an unknown
    // field is invalid, says which field, and its FQDN is fenced.
    let dir = work_dir(test);
    let (xds, admin) = (free_port(), free_port());
    let controller = controller(
        &cluster.kubeconfig,
        &dir.join("run"),
        xds,
        admin,
        &[
            "--listener-address",
            "127.0.0.1",
            "--no-leader-election",
            "--provision=false",
            "--httpproxy-gateway",
            "infra/gw",
        ],
        &[],
    );
    tokio::task::block_in_place(|| {
        wait_for("the valid HTTPProxy through Envoy", WAIT, || {
            http(gw_port, "ok.example.com", "/child/x")
                .is_some_and(|r| r.0 == 200 && r.2.contains("team-pod"))
        });
        for host in ["auth.example.com", "typo.example.com"] {
            let fenced = http(gw_port, host, "/").expect("an answer");
            assert_eq!(
                fenced.0, 500,
                "{host}: fenced, never served without the field: {fenced:?}"
            );
            assert!(
                fenced.2.contains("invalid route configuration detected"),
                "{host}: {fenced:?}"
            );
        }
    });
    for (name, field, _) in &unknown {
        let status = eventually(&format!("{name}: status written"), WAIT, || async {
            let p = api.get(name).await.ok()?;
            let status = p.data["status"].clone();
            status["currentStatus"].is_string().then_some(status)
        })
        .await;
        assert_eq!(status["currentStatus"], "invalid", "{name}: {status}");
        let last = field.rsplit('.').next().unwrap_or(field);
        assert!(
            status["conditions"][0]["errors"]
                .to_string()
                .contains(&format!("spec.{field}: unknown field")),
            "{name}: the status names {last}: {status}"
        );
    }
    drop(controller);
}
