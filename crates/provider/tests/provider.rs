//! The file provider against a real directory: initial load, new, edited,
//! broken, fixed and deleted files, subdirectories, coalescing, unchanged
//! bytes, merge order, and the write-to-publish latency.
//!
//! Waits are functional: each step polls the snapshot channel until the
//! expected state appears (or fails after a few seconds); nothing asserts
//! on timing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use api::Severity;
use provider::{FileProvider, Options, ProviderError, Snapshot};
use tokio::sync::watch;

const WAIT: Duration = Duration::from_secs(5);

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("portcullis-provider-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn write(&self, rel: &str, text: impl AsRef<[u8]>) {
        let path = self.0.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, text).expect("write");
    }

    fn remove(&self, rel: &str) {
        std::fs::remove_file(self.0.join(rel)).expect("remove");
    }

    /// The name the loader gives a file (the directory as given, joined).
    fn name(&self, rel: &str) -> String {
        self.0.join(rel).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn route(name: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\n\
         kind: HTTPRoute\n\
         metadata:\n  name: {name}\n  namespace: app\n\
         spec:\n  parentRefs: [{{name: gw}}]\n"
    )
}

fn gateway() -> &'static str {
    "apiVersion: gateway.networking.k8s.io/v1\n\
     kind: Gateway\n\
     metadata: {name: gw, namespace: app}\n\
     spec:\n  gatewayClassName: portcullis\n  listeners:\n  - {name: http, port: 8080, protocol: HTTP}\n"
}

fn names(s: &Snapshot) -> Vec<String> {
    let mut v: Vec<String> = s
        .loaded
        .inputs
        .http_routes
        .iter()
        .filter_map(|r| r.object.metadata.name.clone())
        .collect();
    v.sort();
    v
}

fn errors(s: &Snapshot) -> Vec<&api::Diagnostic> {
    s.loaded
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect()
}

fn start(dir: &TempDir) -> (FileProvider, watch::Receiver<Arc<Snapshot>>) {
    FileProvider::start(dir.path().to_path_buf(), Options::default()).expect("start")
}

/// Waits (functionally, up to [`WAIT`]) for a snapshot satisfying `f`.
async fn until(
    rx: &mut watch::Receiver<Arc<Snapshot>>,
    what: &str,
    f: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let current = rx.borrow_and_update().clone();
        if f(&current) {
            return current;
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => panic!("snapshot channel closed while waiting for {what}"),
            Err(_) => panic!(
                "timed out waiting for {what}; last snapshot: generation {} routes {:?} diagnostics {:#?}",
                current.generation,
                names(&current),
                current.loaded.diagnostics
            ),
        }
    }
}

/// Waits until the provider has processed a burst that began after this
/// call (functional wait on its counter).
async fn settled(p: &FileProvider) {
    let before = p.stats().reloads;
    p.reload_now();
    let deadline = Instant::now() + WAIT;
    while p.stats().reloads <= before {
        assert!(Instant::now() < deadline, "the provider never reloaded");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn initial_load_is_generation_one_and_matches_the_offline_loader() {
    let dir = TempDir::new("initial");
    dir.write("gateway.yaml", gateway());
    dir.write("routes/b.yml", route("b"));
    dir.write("a.yaml", format!("{}---\n{}", route("a1"), route("a2")));
    dir.write(
        "c.json",
        r#"{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "c", "namespace": "app"}, "spec": {}}"#,
    );
    dir.write("README.md", "not a manifest");
    dir.write(".hidden.yaml", route("hidden"));
    dir.write(".git/x.yaml", route("in-hidden-dir"));

    let (p, rx) = start(&dir);
    let first = rx.borrow().clone();
    assert_eq!(first.generation, 1);
    assert_eq!(first.debounce_latency, None);
    assert_eq!(names(&first), ["a1", "a2", "b", "c"]);
    assert_eq!(first.loaded.inputs.gateways.len(), 1);
    // One loader: a directory without errors reads exactly as offline.
    let offline = api::loader::load_path(dir.path()).expect("load_path");
    assert_eq!(first.loaded, offline);
    assert_eq!(p.stats().generation, 1);
}

#[tokio::test]
async fn a_broken_file_at_startup_contributes_no_objects() {
    let dir = TempDir::new("initial-broken");
    dir.write("a.yaml", route("a"));
    // First document valid, second broken: the file is not applied at all.
    dir.write("b.yaml", format!("{}---\nkind: [\n", route("b")));
    let (_p, rx) = start(&dir);
    let s = rx.borrow().clone();
    assert_eq!(s.generation, 1);
    assert_eq!(names(&s), ["a"]);
    let errors = errors(&s);
    assert_eq!(errors.len(), 1, "{:#?}", s.loaded.diagnostics);
    let file = errors[0].file.as_deref().unwrap_or_default();
    assert!(file.starts_with(&format!("{}:", dir.name("b.yaml"))), "{file}");
    assert!(
        s.loaded
            .diagnostics
            .iter()
            .any(|d| d.severity == Severity::Warning
                && d.file.as_deref() == Some(dir.name("b.yaml").as_str())
                && d.message.contains("not applied")),
        "{:#?}",
        s.loaded.diagnostics
    );
}

#[tokio::test]
async fn start_fails_when_the_directory_cannot_be_read() {
    let dir = TempDir::new("missing");
    let missing = dir.path().join("nope");
    match FileProvider::start(missing, Options::default()) {
        Err(ProviderError::Read { .. }) => {}
        Err(other) => panic!("unexpected error: {other}"),
        Ok(_) => panic!("started on a missing directory"),
    }
}

#[test]
fn start_fails_outside_a_runtime() {
    let dir = TempDir::new("no-runtime");
    assert!(matches!(
        FileProvider::start(dir.path().to_path_buf(), Options::default()),
        Err(ProviderError::NoRuntime)
    ));
}

#[tokio::test]
async fn new_edited_and_deleted_files() {
    let dir = TempDir::new("lifecycle");
    dir.write("a.yaml", route("a"));
    let (_p, mut rx) = start(&dir);

    dir.write("b.yaml", format!("{}---\n{}", route("b1"), route("b2")));
    let s = until(&mut rx, "new file b", |s| names(s) == ["a", "b1", "b2"]).await;
    assert!(s.generation > 1);
    assert!(s.debounce_latency.is_some());

    dir.write("b.yaml", route("b3"));
    until(&mut rx, "edited b", |s| names(s) == ["a", "b3"]).await;

    dir.remove("a.yaml");
    let s = until(&mut rx, "a deleted", |s| names(s) == ["b3"]).await;
    assert!(s.loaded.diagnostics.is_empty(), "{:#?}", s.loaded.diagnostics);
}

#[tokio::test]
async fn a_broken_file_keeps_its_last_good_version_until_fixed() {
    let dir = TempDir::new("broken");
    dir.write("a.yaml", route("a"));
    dir.write("b.yaml", route("b"));
    let (_p, mut rx) = start(&dir);

    // Half-written: the flow mapping is cut off.
    dir.write(
        "b.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: b2, namespace: app\n",
    );
    let s = until(&mut rx, "error reported", |s| !errors(s).is_empty()).await;
    assert_eq!(names(&s), ["a", "b"], "the broken file's last good objects stay");
    let errors = errors(&s);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let file = errors[0].file.as_deref().unwrap_or_default();
    let line = file
        .strip_prefix(&format!("{}:", dir.name("b.yaml")))
        .and_then(|l| l.parse::<usize>().ok());
    assert!(line.is_some_and(|l| (3..=4).contains(&l)), "{file}");
    let note = s
        .loaded
        .diagnostics
        .iter()
        .find(|d| d.severity == Severity::Warning)
        .expect("a note says which version is in force");
    assert_eq!(note.file.as_deref(), Some(dir.name("b.yaml").as_str()));
    assert!(note.message.contains("stays in force"), "{}", note.message);

    // Fixed (with new content): replaces the objects, errors are gone.
    dir.write("b.yaml", route("b3"));
    let s = until(&mut rx, "fixed", |s| names(s) == ["a", "b3"]).await;
    assert!(s.loaded.diagnostics.is_empty(), "{:#?}", s.loaded.diagnostics);
}

#[tokio::test]
async fn a_partly_valid_version_is_not_applied_at_all() {
    let dir = TempDir::new("partial");
    dir.write("p.yaml", route("p1"));
    let (_p, mut rx) = start(&dir);

    // Document 1 is valid and new, document 2 has a typed-parse error.
    let text = format!(
        "{}---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: p3, namespace: app}}\nspec:\n  parentRefs: 7\n",
        route("p2")
    );
    dir.write("p.yaml", text);
    let s = until(&mut rx, "error reported", |s| !errors(s).is_empty()).await;
    assert_eq!(
        names(&s),
        ["p1"],
        "neither document of the broken version applies"
    );
    let file = errors(&s)[0].file.clone().unwrap_or_default();
    assert!(file.starts_with(&format!("{}:", dir.name("p.yaml"))), "{file}");
    let line: usize = file.rsplit(':').next().and_then(|l| l.parse().ok()).unwrap_or(0);
    assert!(line > 8, "the error points into the second document: {file}");

    // A file that is not UTF-8 is rejected the same way, with its line.
    dir.write("p.yaml", b"apiVersion: v1\nkind: \xff\xfe\n");
    let s = until(&mut rx, "UTF-8 error", |s| {
        errors(s).iter().any(|d| d.message.contains("UTF-8"))
    })
    .await;
    assert_eq!(names(&s), ["p1"]);
    assert_eq!(
        errors(&s)[0].file.as_deref(),
        Some(format!("{}:2", dir.name("p.yaml")).as_str())
    );
}

#[tokio::test]
async fn a_file_truncated_before_it_is_written_keeps_its_objects() {
    let dir = TempDir::new("truncate");
    dir.write("a.yaml", route("a"));
    dir.write("b.yaml", route("b"));
    // A grace period (max_delay) far beyond the 200 ms pause below, so a
    // loaded machine's late wake-up cannot let the empty file through.
    let options = Options {
        max_delay: Duration::from_secs(2),
        ..Options::default()
    };
    let (p, mut rx) = FileProvider::start(dir.path().to_path_buf(), options).expect("start");
    // Record every published route list.
    let seen = {
        let mut rx = p.subscribe();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while rx.changed().await.is_ok() {
                seen.push(names(&rx.borrow_and_update()));
            }
            seen
        })
    };

    // `> a.yaml`, then the content 200 ms later (within max_delay).
    dir.write("a.yaml", "");
    tokio::time::sleep(Duration::from_millis(200)).await;
    dir.write("a.yaml", route("a2"));
    until(&mut rx, "new content", |s| names(s) == ["a2", "b"]).await;

    // Left empty: its objects go once the grace period is over.
    dir.write("a.yaml", "");
    until(&mut rx, "emptied file applied", |s| names(s) == ["b"]).await;
    drop(p);
    let seen = seen.await.expect("recorder");
    assert_eq!(
        seen,
        [vec!["a2", "b"], vec!["b"]],
        "a's objects were never withdrawn mid-write"
    );
}

#[tokio::test]
async fn a_burst_of_writes_is_coalesced_and_ends_with_the_final_content() {
    let dir = TempDir::new("burst");
    // The mechanism, with a window wide enough that a loaded machine's
    // late 1 ms sleeps still fall inside it (the default is 5 ms).
    let (debounce, max_delay) = (Duration::from_millis(100), Duration::from_millis(1000));
    let options = Options {
        debounce,
        max_delay,
        ..Options::default()
    };
    let (p, mut rx) = FileProvider::start(dir.path().to_path_buf(), options).expect("start");
    let writing = Instant::now();
    for i in 0..50 {
        dir.write("r.yaml", route(&format!("r{i}")));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let writing = writing.elapsed();
    let s = until(&mut rx, "final content", |s| names(s) == ["r49"]).await;
    settled(&p).await;
    let published = rx.borrow().generation - 1;
    assert_eq!(
        rx.borrow().generation,
        s.generation,
        "nothing after the final content"
    );
    println!("50 writes in {writing:?} published {published} generation(s)");
    // A window closes only after `debounce` of quiet or at `max_delay`, so
    // the writes can close at most one per debounce and one per max_delay
    // of the time they took (more when a loaded machine stretched them),
    // besides a fixed allowance. On an idle machine that is ~10 against
    // the ~50 of publishing every write.
    let windows = writing.as_millis() / debounce.as_millis() + writing.as_millis() / max_delay.as_millis();
    let allowed = 10 + u64::try_from(windows).unwrap_or(u64::MAX);
    assert!(
        published <= allowed,
        "50 quick writes in {writing:?} published {published} generations (at most {allowed})"
    );
}

#[tokio::test]
async fn a_continuous_stream_of_writes_still_publishes_every_max_delay() {
    let dir = TempDir::new("max-delay");
    let options = Options {
        debounce: Duration::from_millis(200),
        max_delay: Duration::from_millis(300),
        ..Options::default()
    };
    let (_p, mut rx) = FileProvider::start(dir.path().to_path_buf(), options).expect("start");
    // Writes every 20 ms until told to stop (at most 1000 writes, 20 s or
    // more): the debounce alone would wait for the end; max_delay publishes
    // in between. The stream outlasts the wait for that publication (5 s),
    // so a publication only after the end is never seen in time.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let path = dir.path().join("s.yaml");
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut last = 0;
            for i in 0..1000 {
                std::fs::write(&path, route(&format!("s{i}"))).expect("write");
                last = i;
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            last
        })
    };
    until(&mut rx, "a publication during the stream", |s| s.generation > 1).await;
    assert!(!writer.is_finished(), "published only after the stream ended");
    stop.store(true, Ordering::SeqCst);
    let last = writer.await.expect("writer");
    until(&mut rx, "final content", |s| names(s) == [format!("s{last}")]).await;
}

#[tokio::test]
async fn events_that_cannot_change_the_output_publish_nothing() {
    let dir = TempDir::new("unchanged");
    dir.write("a.yaml", route("a"));
    let (p, rx) = start(&dir);

    // Same bytes rewritten, mtime touched, unrelated and hidden files.
    dir.write("a.yaml", route("a"));
    std::fs::File::options()
        .append(true)
        .open(dir.path().join("a.yaml"))
        .and_then(|f| f.set_modified(std::time::SystemTime::now()))
        .expect("touch");
    dir.write("README.md", "notes");
    dir.write(".a.yaml.swp", "editor state");
    // A trailing comment does not change any object or line.
    dir.write("a.yaml", format!("{}# comment\n", route("a")));
    settled(&p).await;
    // Give straggling events a chance to (wrongly) publish.
    tokio::time::sleep(Duration::from_millis(150)).await;
    settled(&p).await;
    assert_eq!(rx.borrow().generation, 1);
    assert!(p.stats().events > 0);
}

#[tokio::test]
async fn subdirectories_are_watched_as_they_come_and_go() {
    let dir = TempDir::new("subdirs");
    dir.write("a.yaml", route("a"));
    let (_p, mut rx) = start(&dir);

    // Created together with its file, before a watch can be added for it.
    dir.write("x/y/z/deep.yaml", route("deep"));
    until(&mut rx, "file in a new subdirectory", |s| {
        names(s) == ["a", "deep"]
    })
    .await;

    // A later file in the (now watched) subdirectory.
    dir.write("x/y/later.yml", route("later"));
    until(&mut rx, "later file", |s| names(s) == ["a", "deep", "later"]).await;

    // Renaming a directory moves its objects' source; removing it drops them.
    std::fs::rename(dir.path().join("x"), dir.path().join("w")).expect("rename");
    let s = until(&mut rx, "renamed directory", |s| {
        s.loaded
            .inputs
            .http_routes
            .iter()
            .any(|r| r.source.file.starts_with(&dir.name("w/")))
    })
    .await;
    assert_eq!(names(&s), ["a", "deep", "later"]);
    assert!(
        s.loaded
            .inputs
            .http_routes
            .iter()
            .all(|r| !r.source.file.starts_with(&dir.name("x/"))),
        "no object from the old path"
    );
    std::fs::remove_dir_all(dir.path().join("w")).expect("rm -r");
    until(&mut rx, "directory removed", |s| names(s) == ["a"]).await;
}

#[tokio::test]
async fn an_atomic_save_replaces_the_file() {
    let dir = TempDir::new("rename");
    dir.write("a.yaml", route("a"));
    let (_p, mut rx) = start(&dir);
    dir.write("a.yaml.tmp", route("a2"));
    std::fs::rename(dir.path().join("a.yaml.tmp"), dir.path().join("a.yaml")).expect("rename");
    let s = until(&mut rx, "renamed over", |s| names(s) == ["a2"]).await;
    assert!(s.loaded.diagnostics.is_empty(), "{:#?}", s.loaded.diagnostics);
}

#[tokio::test]
async fn files_merge_in_path_order_whatever_order_they_were_written_in() {
    let dir = TempDir::new("order");
    dir.write("b.yaml", route("same"));
    let (_p, mut rx) = start(&dir);
    // Written later but sorts first: its object wins the duplicate check.
    dir.write("a.yaml", route("same"));
    let s = until(&mut rx, "duplicate", |s| !s.loaded.diagnostics.is_empty()).await;
    let routes = &s.loaded.inputs.http_routes;
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0].source.file, dir.name("a.yaml"));
    let offline = api::loader::load_path(dir.path()).expect("load_path");
    assert_eq!(s.loaded, offline, "same result as the offline loader");
}

#[tokio::test]
async fn dropping_the_provider_stops_watching() {
    let dir = TempDir::new("drop");
    let (p, mut rx) = start(&dir);
    drop(p);
    let closed = tokio::time::timeout(WAIT, rx.changed()).await;
    assert!(matches!(closed, Ok(Err(_))), "the snapshot channel closes");
}

/// The latency the debounce costs: median time from a write to the
/// publication of its content, over 20 writes. Printed, not asserted.
#[tokio::test]
async fn write_to_publish_latency() {
    let dir = TempDir::new("latency");
    for i in 0..20 {
        dir.write(&format!("bg{i:02}.yaml"), route(&format!("bg{i}")));
    }
    let (_p, mut rx) = start(&dir);
    let mut wall = Vec::new();
    let mut reported = Vec::new();
    for i in 0..20 {
        let name = format!("w{i}");
        let written = Instant::now();
        dir.write("w.yaml", route(&name));
        let s = until(&mut rx, &name, |s| names(s).contains(&name)).await;
        wall.push(written.elapsed());
        reported.extend(s.debounce_latency);
    }
    wall.sort();
    reported.sort();
    let median = |v: &[Duration]| v.get(v.len() / 2).copied().unwrap_or_default();
    println!(
        "write→publish over {} writes (debounce {:?}): median {:?} (min {:?}, max {:?}); \
         first event→publish median {:?}",
        wall.len(),
        Options::default().debounce,
        median(&wall),
        wall.first().copied().unwrap_or_default(),
        wall.last().copied().unwrap_or_default(),
        median(&reported),
    );
    assert_eq!(reported.len(), 20, "every publication reports its latency");
}

fn policy(name: &str, body: &str) -> String {
    format!(
        "apiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: {name}, namespace: app}}\n\
         spec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: a}}]\n{body}\n"
    )
}

fn policies(s: &Snapshot) -> Vec<(String, bool)> {
    s.loaded
        .inputs
        .traffic_policies
        .iter()
        .map(|p| {
            (
                p.object.metadata.name.clone().unwrap_or_default(),
                p.object.load_errors.is_empty(),
            )
        })
        .collect()
}

/// A TrafficPolicy that cannot be read is published anyway (invalid, with
/// its targets) when the file has no good version defining it: its routes
/// are fenced rather than served as if it did not exist. When a good
/// version defines it, that version stays in force as for any object.
#[tokio::test]
async fn a_broken_new_policy_is_published_to_fail_closed() {
    let dir = TempDir::new("policy");
    dir.write("a.yaml", route("a"));
    let (_p, mut rx) = start(&dir);
    dir.write("p.yaml", policy("guard", "  rbca: {matchExpressions: ['true']}"));
    let s = until(&mut rx, "the broken policy", |s| !policies(s).is_empty()).await;
    assert_eq!(policies(&s), [("guard".to_string(), false)]);
    assert!(!errors(&s).is_empty(), "the error is reported");
    // The file's note does not say that nothing of it is applied.
    let note = s
        .loaded
        .diagnostics
        .iter()
        .find(|d| d.message.contains("not applied"))
        .expect("the file's note");
    assert!(
        note.message
            .contains("except its TrafficPolicies that could not be read (app/guard)"),
        "{}",
        note.message
    );

    // A good version, then a broken one: the good one stays.
    dir.write("p.yaml", policy("guard", "  rbac: {matchExpressions: ['true']}"));
    until(&mut rx, "the good policy", |s| {
        policies(s) == [("guard".to_string(), true)]
    })
    .await;
    dir.write("p.yaml", policy("guard", "  rbca: {matchExpressions: ['false']}"));
    let s = until(&mut rx, "the error", |s| !errors(s).is_empty()).await;
    assert_eq!(policies(&s), [("guard".to_string(), true)]);
}

/// `start`, failing the test (instead of hanging it) if the initial load
/// does not return in time. It runs on a plain thread: a blocking-pool task
/// that never returns would also hang the test runtime's shutdown.
fn start_with_deadline(dir: &TempDir) -> (FileProvider, watch::Receiver<Arc<Snapshot>>) {
    let handle = tokio::runtime::Handle::current();
    let path = dir.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _guard = handle.enter();
        let _ = tx.send(FileProvider::start(path, Options::default()));
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the initial load must not block on a file")
        .expect("start")
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

fn diagnostic_for<'a>(s: &'a Snapshot, file: &str) -> Option<&'a api::Diagnostic> {
    s.loaded
        .diagnostics
        .iter()
        .find(|d| d.file.as_deref() == Some(file) && d.severity == Severity::Error)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_in_the_directory_is_reported_and_does_not_freeze_the_provider() {
    let dir = TempDir::new("fifo");
    dir.write("a.yaml", route("a"));
    mkfifo(&dir.path().join("fifo.yaml"));
    let (p, mut rx) = start_with_deadline(&dir);
    let s = rx.borrow().clone();
    assert_eq!(names(&s), ["a"]);
    let d = diagnostic_for(&s, &dir.name("fifo.yaml")).expect("the FIFO is reported");
    assert_eq!(
        d.message,
        "not a regular file (a FIFO); only regular files are read"
    );

    // Edits are still applied: the provider is not stuck on the FIFO.
    dir.write("a.yaml", route("a2"));
    until(&mut rx, "the edit beside the FIFO", |s| names(s) == ["a2"]).await;
    // A FIFO created later (an event on it) is not read either.
    mkfifo(&dir.path().join("late.yml"));
    dir.write("b.yaml", route("b"));
    let s = until(&mut rx, "the late FIFO reported and b added", |s| {
        names(s) == ["a2", "b"] && diagnostic_for(s, &dir.name("late.yml")).is_some()
    })
    .await;
    assert!(diagnostic_for(&s, &dir.name("fifo.yaml")).is_some());
    // A full rescan too.
    settled(&p).await;
    // A file event can still be in flight after the rescan; the provider
    // must become idle again (never stay stuck on a FIFO), not be idle at
    // this exact instant.
    let deadline = Instant::now() + WAIT;
    while let Some(busy) = p.health().busy_for() {
        assert!(Instant::now() < deadline, "the provider stayed busy for {busy:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(p.health().read_timeouts(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_out_of_the_directory_are_not_followed() {
    let outside = TempDir::new("outside");
    outside.write("x.yaml", route("outside-file"));
    outside.write("d/y.yaml", route("outside-dir"));
    let dir = TempDir::new("links");
    dir.write("a.yaml", route("a"));
    dir.write(".data/cm.yaml", route("inside-link"));
    std::os::unix::fs::symlink(".data/cm.yaml", dir.path().join("cm.yaml")).expect("symlink");
    std::os::unix::fs::symlink(outside.path().join("x.yaml"), dir.path().join("escape.yaml"))
        .expect("symlink");
    std::os::unix::fs::symlink(outside.path().join("d"), dir.path().join("escape-dir")).expect("symlink");
    std::os::unix::fs::symlink("loop.yaml", dir.path().join("loop.yaml")).expect("symlink");
    // A link to `/`: neither read nor watched (watching would walk and
    // add an inotify watch for every directory of the file system).
    std::os::unix::fs::symlink("/", dir.path().join("everything")).expect("symlink");
    let started = Instant::now();
    let (p, mut rx) = start_with_deadline(&dir);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "start took {:?}",
        started.elapsed()
    );
    let s = rx.borrow().clone();
    assert_eq!(names(&s), ["a", "inside-link"]);
    let out = std::fs::canonicalize(outside.path()).expect("canonical");
    for (link, target) in [("escape.yaml", out.join("x.yaml")), ("escape-dir", out.join("d"))] {
        let d = diagnostic_for(&s, &dir.name(link)).unwrap_or_else(|| panic!("{link} reported"));
        assert!(
            d.message.starts_with(&format!(
                "symbolic link to {}, outside the directory",
                target.display()
            )),
            "{}",
            d.message
        );
    }
    assert!(diagnostic_for(&s, &dir.name("loop.yaml")).is_some());

    // Links added while watching, and an inside link retargeted outside
    // (atomically, as `ln -sfn` through a rename): never followed out.
    std::os::unix::fs::symlink(outside.path().join("x.yaml"), dir.path().join("later.yaml"))
        .expect("symlink");
    std::os::unix::fs::symlink(outside.path().join("d"), dir.path().join(".tmp-link")).expect("symlink");
    std::fs::rename(dir.path().join(".tmp-link"), dir.path().join("later-dir")).expect("rename");
    std::os::unix::fs::symlink(outside.path().join("x.yaml"), dir.path().join(".tmp-cm")).expect("symlink");
    std::fs::rename(dir.path().join(".tmp-cm"), dir.path().join("cm.yaml")).expect("rename");
    dir.write("b.yaml", route("b"));
    let s = until(&mut rx, "the new links reported", |s| {
        names(s).contains(&"b".to_string())
            && diagnostic_for(s, &dir.name("later.yaml")).is_some()
            && diagnostic_for(s, &dir.name("later-dir")).is_some()
            && diagnostic_for(s, &dir.name("cm.yaml")).is_some()
    })
    .await;
    // The retargeted link keeps its last version read inside the root.
    assert_eq!(names(&s), ["a", "b", "inside-link"]);
    settled(&p).await;
    let s = rx.borrow().clone();
    assert!(
        !names(&s).iter().any(|n| n.starts_with("outside")),
        "{:?}",
        names(&s)
    );
}

/// The kinds an extension server registered (`Options::loader`) load as
/// extension resources, at start and after an edit; without them the same
/// document is an unknown kind (warned about and ignored).
#[tokio::test]
async fn registered_extension_kinds_load_as_extension_resources() {
    let doc = "apiVersion: example.dev/v1\nkind: BasicAuth\nmetadata: {name: users, namespace: app}\nspec: {users: []}\n";
    let dir = TempDir::new("extension-kinds");
    dir.write("ext.yaml", doc);
    let options = Options {
        loader: api::loader::Options {
            extension_kinds: [("example.dev".to_string(), "BasicAuth".to_string())].into(),
            ..Default::default()
        },
        ..Options::default()
    };
    let (_p, mut rx) = FileProvider::start(dir.path().to_path_buf(), options).expect("start");
    {
        let s = rx.borrow();
        assert_eq!(
            s.loaded.inputs.extension_resources.len(),
            1,
            "{:?}",
            s.loaded.diagnostics
        );
        assert!(s.loaded.diagnostics.is_empty(), "{:?}", s.loaded.diagnostics);
    }
    dir.write(
        "ext.yaml",
        format!("{doc}---\n{}", doc.replace("name: users", "name: more")),
    );
    until(&mut rx, "the edit", |s| {
        s.loaded.inputs.extension_resources.len() == 2
    })
    .await;

    let plain = TempDir::new("extension-kinds-unregistered");
    plain.write("ext.yaml", doc);
    let (_p, rx) = FileProvider::start(plain.path().to_path_buf(), Options::default()).expect("start");
    let s = rx.borrow();
    assert!(s.loaded.inputs.extension_resources.is_empty());
    assert!(
        s.loaded
            .diagnostics
            .iter()
            .any(|d| d.message.contains("unknown kind")),
        "{:?}",
        s.loaded.diagnostics
    );
}
