//! The Kubernetes test cluster itself: it starts, serves the admin token,
//! takes the repository's CRDs, and stops on drop.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};

#[tokio::test]
async fn cluster_starts_takes_crds_and_stops() {
    let Some(cluster) = testkit::kube::Cluster::start("cluster_starts_takes_crds_and_stops").await else {
        return;
    };
    let client = cluster.client().await.expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // The apiserver creates `default` itself, shortly after it is ready.
    let listed = std::time::Instant::now();
    loop {
        let names: Vec<String> = namespaces
            .list(&ListParams::default())
            .await
            .expect("list namespaces")
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        if names.iter().any(|n| n == "default") {
            break;
        }
        assert!(
            listed.elapsed() < std::time::Duration::from_secs(10),
            "namespaces: {names:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    cluster
        .apply_crds(&testkit::kube::Cluster::repo_crds())
        .await
        .expect("apply CRDs");
    let gvk = kube::api::GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute");
    let (resource, _) = kube::discovery::pinned_kind(&client, &gvk)
        .await
        .expect("HTTPRoute served");
    assert_eq!(resource.plural, "httproutes");
    let server = cluster.server.clone();
    drop(cluster);
    // Stopped: nothing answers on the port any more.
    let port: u16 = server
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}
