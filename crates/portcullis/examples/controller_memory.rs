//! Where `portcullis controller`'s memory goes, by part: jemalloc's count
//! of live bytes (`stats.allocated`) around each piece the controller
//! holds, built as the controller builds them against a real etcd +
//! kube-apiserver (testkit) — the Kubernetes provider (reflector stores,
//! per-object loads, the first snapshot), the incremental translator and
//! its output, the xDS cache, the status writer (its pending statuses
//! after a translation, and after they are written) — and then dropped
//! one by one. The reflector stores are measured apart by a second
//! HTTPRoute reflector kept the same way as the provider's. The companion
//! of `serve_memory.rs` (same workload: one Gateway, ROUTES one-rule
//! HTTPRoutes).
//!
//! ```sh
//! cargo run --release -p portcullis --example controller_memory -- [ROUTES]
//! ```

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

#[path = "support/memory.rs"]
mod memory;
use memory::{allocated, mib, resident, rss_mib};

fn report(what: &str, before: usize) -> usize {
    let now = allocated();
    println!(
        "{what:<58} allocated {:>7.1} MiB ({:+7.1}), resident {:>7.1} MiB, RSS {:>7.1} MiB",
        mib(now),
        (now as f64 - before as f64) / (1024.0 * 1024.0),
        mib(resident()),
        rss_mib()
    );
    now
}

struct Held(Arc<provider::Snapshot>);

impl translate::incremental::Held for Held {
    fn inputs(&self) -> &api::Inputs {
        &self.0.loaded.inputs
    }
}

#[path = "support/kube.rs"]
mod kube_support;
use kube_support::{apply, route};

/// Waits until the writer has nothing pending and wrote nothing for 1 s.
async fn written(metrics: &kube_provider::metrics::KubeMetrics) {
    let count = || {
        let l = kube_provider::metrics::KindLabels::of(kube_provider::Kind::HttpRoute);
        metrics.status_writes.get_or_create(&l).get() + metrics.status_unchanged.get_or_create(&l).get()
    };
    let mut last = u64::MAX;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = count();
        if now == last && metrics.status_queue_depth.get() == 0 {
            return;
        }
        last = now;
    }
}

fn main() {
    let routes: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(routes));
}

async fn run(routes: usize) {
    let Some(cluster) = testkit::kube::Cluster::start("controller_memory").await else {
        eprintln!("no apiserver (see README, Kubernetes mode)");
        return;
    };
    cluster
        .apply_crds(&testkit::kube::Cluster::repo_crds())
        .await
        .unwrap_or_else(|e| panic!("CRDs: {e}"));
    let client = cluster.client().await.unwrap_or_else(|e| panic!("client: {e}"));
    apply(
        &client,
        &[
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "infra"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}}),
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": "portcullis"},
                   "spec": {"controllerName": "portcullis.dev/gateway-controller"}}),
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw", "namespace": "infra"},
                   "spec": {"gatewayClassName": "portcullis", "listeners": [
                       {"name": "http", "protocol": "HTTP", "port": 8080, "allowedRoutes": {"namespaces": {"from": "All"}}}]}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a", "namespace": "app"},
                   "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 9}]}}),
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                   "metadata": {"name": "a-1", "namespace": "app", "labels": {"kubernetes.io/service-name": "a"}},
                   "addressType": "IPv4", "ports": [{"name": "http", "port": 9}],
                   "endpoints": [{"addresses": ["10.0.0.1"]}]}),
        ],
    )
    .await;
    let ar = kube_provider::Kind::HttpRoute.api_resource();
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), "app", &ar);
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..routes {
        if set.len() >= 16 {
            let _ = set.join_next().await;
        }
        let api = api.clone();
        set.spawn(async move {
            api.create(&PostParams::default(), &route(i))
                .await
                .unwrap_or_else(|e| panic!("create: {e}"));
        });
    }
    while set.join_next().await.is_some() {}
    println!("{routes} routes created in {:.0?}", started.elapsed());

    // One pass writes every route's status (as a controller's first run),
    // so that the stores hold what a running controller's stores hold.
    let metrics = kube_provider::metrics::KubeMetrics::default();
    {
        let (provider, snapshots) =
            kube_provider::start(client.clone(), kube_provider::Options::default(), metrics.clone())
                .await
                .expect("provider");
        let (_leading, leader) = tokio::sync::watch::channel(true);
        let writer = kube_provider::status::StatusWriter::start(
            client.clone(),
            provider.stores.clone(),
            "portcullis.dev/gateway-controller".into(),
            leader,
            metrics.clone(),
        );
        let mut translator = translate::incremental::Translator::new();
        let snap = snapshots.borrow().clone();
        let out = translator.translate(
            Arc::new(Held(snap)),
            &translate::Settings::default(),
            translate::Seams::default(),
        );
        writer.publish(out.timed_status());
        written(&metrics).await;
        println!("statuses written in {:.0?}", started.elapsed());
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let base = report("start (statuses written, first provider dropped)", 0);
    let (provider, snapshots) =
        kube_provider::start(client.clone(), kube_provider::Options::default(), metrics.clone())
            .await
            .expect("provider");
    let mut a = report("provider started (stores + per-object loads + snapshot)", base);
    let snap = snapshots.borrow().clone();
    let mut translator = translate::incremental::Translator::new();
    let out = translator.translate(
        Arc::new(Held(snap.clone())),
        &translate::Settings::default(),
        translate::Seams::default(),
    );
    a = report("translated (memo + output)", a);
    let cache = xds::SnapshotCache::new();
    for (key, gw) in &out.gateways {
        cache.set(key, xds::Snapshot::from_gateway(gw));
    }
    a = report("xDS cache set", a);
    let (leading, leader) = tokio::sync::watch::channel(false);
    let writer = kube_provider::status::StatusWriter::start(
        client.clone(),
        provider.stores.clone(),
        "portcullis.dev/gateway-controller".into(),
        leader,
        metrics.clone(),
    );
    writer.publish(out.timed_status());
    a = report("status writer: one translation's statuses pending", a);
    let _ = leading.send(true);
    written(&metrics).await;
    a = report("status writer: written (all unchanged)", a);
    // Not leading: what the next translation queues stays queued.
    let _ = leading.send(false);
    tokio::time::sleep(Duration::from_millis(100)).await;
    writer.publish(out.timed_status());
    a = report("status writer: the next translation's statuses pending", a);

    // The route store alone: a second reflector, kept as the provider's.
    let writer_store = reflector::store::Writer::<DynamicObject>::new(ar.clone());
    let store = writer_store.as_reader();
    let task = tokio::spawn(async move {
        use tokio_stream::StreamExt;
        let stream = std::pin::pin!(
            watcher(
                Api::<DynamicObject>::all_with(client.clone(), &ar),
                watcher::Config::default()
            )
            .modify(|o: &mut DynamicObject| {
                o.metadata.managed_fields = None;
                if let Some(a) = o.metadata.annotations.as_mut() {
                    a.remove("kubectl.kubernetes.io/last-applied-configuration");
                }
            })
            .reflect(writer_store)
        );
        let mut stream = stream;
        while stream.next().await.is_some() {}
    });
    store.wait_until_ready().await.expect("route store");
    tokio::time::sleep(Duration::from_secs(1)).await;
    a = report("a second HTTPRoute store (what the provider's holds)", a);
    task.abort();
    drop(store);
    tokio::time::sleep(Duration::from_millis(200)).await;
    a = report("dropped the second HTTPRoute store", a);

    let copy = snap.loaded.clone();
    a = report("a copy of the snapshot's Loaded (one snapshot's size)", a);
    drop(copy);
    a = report("dropped the copy", a);

    drop(writer);
    a = report("dropped the status writer", a);
    drop(cache);
    a = report("dropped the xDS cache", a);
    drop(out);
    a = report("dropped the output", a);
    drop(translator);
    a = report("dropped the translator (memo)", a);
    drop(provider);
    tokio::time::sleep(Duration::from_millis(200)).await;
    a = report("dropped the provider (stores, per-object loads)", a);
    drop(snapshots);
    drop(snap);
    report("dropped the last snapshot", a);
}
