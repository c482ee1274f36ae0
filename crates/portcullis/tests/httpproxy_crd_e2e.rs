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

use std::path::Path;
use std::time::{Duration, Instant};

use common::{echo_pod, free_port, http, wait_for, work_dir};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn proxies(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("projectcontour.io", "v1", kind),
        plural,
    );
    Api::namespaced_with(client.clone(), "team", &ar)
}

/// Applies every document of `yaml` with server-side apply (manager `test`).
async fn apply(client: &kube::Client, yaml: &str) {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("test YAML");
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        let api_version = doc["apiVersion"].as_str().expect("apiVersion");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let kind = doc["kind"].as_str().expect("kind");
        let (ar, caps) = kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
            .await
            .unwrap_or_else(|e| panic!("discover {kind}: {e}"));
        let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
            Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), ns, &ar)
            }
            _ => Api::all_with(client.clone(), &ar),
        };
        let name = doc["metadata"]["name"].as_str().expect("name").to_string();
        api.patch(&name, &PatchParams::apply("test").force(), &Patch::Apply(&doc))
            .await
            .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
    }
}

/// A Service and its EndpointSlice (the apiserver refuses loopback
/// endpoint addresses: the backend is reached through the host's address).
fn service(ns: &str, name: &str, backend: &echo::Handle) -> String {
    let forwarded =
        testkit::kube::forward_from_host(backend.addr()).expect("forward from the host's address");
    let (ip, port) = (forwarded.ip(), forwarded.port());
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec:\n  ports: [{{name: http, port: 80, targetPort: {port}}}]\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: {name}-1, namespace: {ns}, labels: {{kubernetes.io/service-name: {name}}}}}\n\
         addressType: IPv4\nports: [{{name: http, port: {port}}}]\nendpoints: [{{addresses: [\"{ip}\"]}}]\n---\n"
    )
}

fn start_controller(kubeconfig: &Path, run_dir: &Path, xds: u16, admin: u16) -> common::Serve {
    let envoy = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("controller")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--xds-address", &format!("127.0.0.1:{xds}")])
        .args(["--admin-address", &format!("127.0.0.1:{admin}")])
        .args(["--listener-address", "127.0.0.1"])
        .arg("--run-dir")
        .arg(run_dir)
        .args(["--no-leader-election", "--provision=false"])
        .args(["--httpproxy-gateway", "infra/gw"])
        .env("ENVOY_BIN", envoy)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start portcullis controller");
    common::Serve {
        child,
        run_dir: run_dir.to_path_buf(),
    }
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
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: infra}}\n---\n\
             apiVersion: v1\nkind: Namespace\nmetadata: {{name: team}}\n---\n{}{}",
            common::gateway(gw_port),
            service("team", "s", &backend)
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
    let controller = start_controller(&cluster.kubeconfig, &dir.join("run"), xds, admin);
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
        let started = Instant::now();
        let status = loop {
            let p = api.get(name).await.expect("read back");
            let status = p.data["status"].clone();
            if status["currentStatus"].is_string() {
                break status;
            }
            assert!(started.elapsed() < WAIT, "{name}: no status written: {}", p.data);
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
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
