//! The file provider against a real directory: initial load, new, edited,
//! broken, fixed and deleted files, coalescing, and unchanged bytes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use provider::{FileProvider, Options, Snapshot};
use tokio::sync::watch;

fn route(name: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: app}}\nspec:\n  parentRefs: [{{name: gw}}]\n"
    )
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("portcullis-provider-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("mkdir");
    d
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

/// Waits (functionally, up to 10 s) for a snapshot satisfying `f`.
async fn until(
    rx: &mut watch::Receiver<Arc<Snapshot>>,
    what: &str,
    f: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let cur = rx.borrow_and_update().clone();
        if f(&cur) {
            return cur;
        }
        if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
            panic!(
                "timed out waiting for {what}; last snapshot: generation {} routes {:?}",
                cur.generation,
                names(&cur)
            );
        }
    }
}

#[tokio::test]
async fn follows_the_directory() {
    let dir = temp_dir("follow");
    std::fs::write(dir.join("a.yaml"), route("a")).expect("write");
    let (p, mut rx) = FileProvider::start(dir.clone(), Options::default()).expect("start");
    let first = rx.borrow_and_update().clone();
    assert_eq!(first.generation, 1);
    assert_eq!(names(&first), ["a"]);

    // New file, in a subdirectory.
    std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
    std::fs::write(dir.join("sub/b.yaml"), route("b")).expect("write");
    until(&mut rx, "b added", |s| names(s) == ["a", "b"]).await;

    // Broken edit: b's last good version stays, the error is reported.
    std::fs::write(dir.join("sub/b.yaml"), "apiVersion: v1\nkind: [\n").expect("write");
    let s = until(&mut rx, "error reported", |s| !s.loaded.diagnostics.is_empty()).await;
    assert_eq!(
        names(&s),
        ["a", "b"],
        "the broken file's objects must stay in force"
    );
    let d = &s.loaded.diagnostics[0];
    assert!(
        d.file.as_deref().is_some_and(|f| f.contains("sub/b.yaml:")),
        "{d:?}"
    );

    // Fixed with new content.
    std::fs::write(dir.join("sub/b.yaml"), route("b2")).expect("write");
    let s = until(&mut rx, "b2", |s| names(s) == ["a", "b2"]).await;
    assert!(s.loaded.diagnostics.is_empty(), "{:?}", s.loaded.diagnostics);

    // Deleted.
    std::fs::remove_file(dir.join("a.yaml")).expect("rm");
    until(&mut rx, "a removed", |s| names(s) == ["b2"]).await;

    // Unchanged bytes: no new generation.
    let g = rx.borrow_and_update().generation;
    std::fs::write(dir.join("sub/b.yaml"), route("b2")).expect("rewrite");
    p.reload_now();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        rx.borrow().generation,
        g,
        "rewriting identical bytes must not publish"
    );
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn bursts_are_coalesced() {
    let dir = temp_dir("burst");
    let (p, mut rx) = FileProvider::start(dir.clone(), Options::default()).expect("start");
    for i in 0..50 {
        std::fs::write(dir.join("r.yaml"), route(&format!("r{i}"))).expect("write");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let s = until(&mut rx, "final content", |s| names(s) == ["r49"]).await;
    assert!(
        s.generation < 25,
        "50 quick writes produced {} generations",
        s.generation
    );
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
}
