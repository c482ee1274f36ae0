//! Where `serve`'s memory goes, by part: jemalloc's count of live bytes
//! (`stats.allocated`, the binary's allocator) while the pieces `serve`
//! holds are built as it builds them — the file provider (its per-file
//! loads and the published snapshot), the incremental translator (its
//! memo), the translation output (the admin state's copy), the xDS cache —
//! and then dropped one by one, each drop's delta being that part's share.
//! Edits (one route's path, the file rewritten, as the soak does) run in
//! between, so growth of live bytes under edits shows apart from the
//! allocator's retention (which RSS includes).
//!
//! ```sh
//! cargo run --release -p portcullis --example serve_memory -- [ROUTES] [EDITS] [REST_SECS]
//! ```
//!
//! RSS "at rest" is read after REST_SECS (default 12) without edits, after
//! the start and after the last edit: what jemalloc's decay
//! (`.cargo/config.toml`'s `malloc_conf`, printed first) returns by then.
//! `_RJEM_MALLOC_CONF=...` overrides it at run time, for comparing values.
//!
//! The workload is the soak's (`tests/soak_e2e.rs`): one Gateway, one
//! listener, ROUTES (default 10,000) one-rule HTTPRoutes in files of 500.

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const PER_FILE: usize = 500;

#[path = "support/memory.rs"]
mod memory;
use memory::{allocated, mib, resident, rss_mib};

fn route_yaml(name: &str, path: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\nspec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  hostnames: [\"{name}.example.com\"]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: \"{path}\"}}}}]\n    backendRefs: [{{name: echo, port: 80}}]\n---\n"
    )
}

fn route_file(generation: &[u32], f: usize) -> String {
    (f * PER_FILE..((f + 1) * PER_FILE).min(generation.len()))
        .map(|i| route_yaml(&format!("r{i}"), &format!("/v{}", generation[i])))
        .collect()
}

fn write(dir: &Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, dir.join(file)).expect("rename");
}

struct Held(Arc<provider::Snapshot>);

impl translate::incremental::Held for Held {
    fn inputs(&self) -> &api::Inputs {
        &self.0.loaded.inputs
    }
}

fn report(what: &str, before: usize) -> usize {
    let now = allocated();
    println!(
        "{what:<52} allocated {:>7.1} MiB ({:+7.1}), resident {:>7.1} MiB, RSS {:>7.1} MiB",
        mib(now),
        (now as f64 - before as f64) / (1024.0 * 1024.0),
        mib(resident()),
        rss_mib()
    );
    now
}

fn main() {
    let mut args = std::env::args().skip(1);
    let routes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let edits: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rest = Duration::from_secs(args.next().and_then(|a| a.parse().ok()).unwrap_or(12));
    {
        use tikv_jemalloc_ctl::{Access, AsName};
        let dirty: Result<isize, _> = b"opt.dirty_decay_ms\0".name().read();
        let muzzy: Result<isize, _> = b"opt.muzzy_decay_ms\0".name().read();
        println!(
            "jemalloc: dirty_decay_ms {dirty:?} muzzy_decay_ms {muzzy:?} background_thread {:?}",
            tikv_jemalloc_ctl::background_thread::read()
        );
    }
    let dir = std::env::temp_dir().join(format!("serve-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    write(
        &dir,
        "base.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: portcullis}\nspec: {controllerName: portcullis.dev/gateway-controller}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: infra}\nspec:\n  gatewayClassName: portcullis\n  listeners:\n  - {name: http, protocol: HTTP, port: 8080, allowedRoutes: {namespaces: {from: All}}}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {name: echo, namespace: app}\nspec:\n  ports: [{name: http, port: 80, targetPort: 9}]\n",
    );
    let mut generation = vec![0u32; routes];
    for f in 0..routes.div_ceil(PER_FILE) {
        write(&dir, &format!("routes-{f:03}.yaml"), &route_file(&generation, f));
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _enter = rt.enter();
    let base = report("start", 0);
    let (provider, mut snapshots) =
        provider::FileProvider::start(dir.clone(), provider::Options::default()).expect("provider");
    let mut a = report("provider started (per-file loads + snapshot)", base);
    let settings = translate::Settings::default();
    let mut translator = translate::incremental::Translator::new();
    let cache = xds::SnapshotCache::new();
    let translate_once = |translator: &mut translate::incremental::Translator,
                          snap: &Arc<provider::Snapshot>| {
        let out = translator.translate(
            Arc::new(Held(snap.clone())),
            &settings,
            translate::Seams::default(),
        );
        for (key, gw) in &out.gateways {
            cache.set(key, xds::Snapshot::from_gateway(gw));
        }
        out
    };
    let snap = snapshots.borrow_and_update().clone();
    let mut out = translate_once(&mut translator, &snap);
    let mut held = snap;
    a = report("translated, xDS cache set (as at ready)", a);
    std::thread::sleep(rest);
    a = report(&format!("at rest ({} s after ready)", rest.as_secs()), a);

    let mut rng = 0x5eed_u64;
    for e in 0..edits {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let i = (rng % routes as u64) as usize;
        generation[i] += 1;
        write(
            &dir,
            &format!("routes-{:03}.yaml", i / PER_FILE),
            &route_file(&generation, i / PER_FILE),
        );
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), snapshots.changed())
                .await
                .expect("edit published")
                .expect("provider alive");
        });
        let snap = snapshots.borrow_and_update().clone();
        let next = translate_once(&mut translator, &snap);
        // As serve's admin state: the new output and snapshot replace the old.
        out = next;
        held = snap;
        if (e + 1) % (edits / 4).max(1) == 0 {
            a = report(&format!("after {} edits", e + 1), a);
        }
    }
    let stats = translator.stats();
    println!("last translation: {stats:?}");

    a = report(&format!("right after {edits} edits"), a);
    std::thread::sleep(rest);
    a = report(&format!("at rest ({} s after {edits} edits)", rest.as_secs()), a);
    drop(cache);
    a = report("dropped the xDS cache", a);
    drop(out);
    a = report("dropped the output (admin state's copy)", a);
    drop(translator);
    a = report("dropped the translator (memo; snapshot still held)", a);
    drop(provider);
    // The provider's task is aborted, not dropped in place: wait until it
    // is gone (it owns the channel's sender) before counting what it held.
    rt.block_on(async {
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while snapshots.changed().await.is_ok() {}
        })
        .await;
    });
    a = report("dropped the provider (per-file loads, watch channel)", a);
    drop(snapshots);
    drop(held);
    report("dropped the last snapshot", a);
    let _ = std::fs::remove_dir_all(&dir);
}
