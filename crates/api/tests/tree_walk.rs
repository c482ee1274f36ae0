//! The directory walk of `load_path` (`translate -f DIR`) against hostile
//! directory contents: FIFOs, devices, oversized files, symbolic links out
//! of the directory and link loops. Every load runs on its own thread with
//! a deadline, so a regression fails the test instead of hanging it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use api::Severity;
use api::files::{FileError, MAX_FILE_BYTES, Root};
use api::loader::{LoadError, Loaded, load_path};
use common::TempDir;

const DEADLINE: Duration = Duration::from_secs(20);

/// `load_path(dir)`, failing the test if it does not return in time.
fn load_with_deadline(path: &Path) -> Result<Loaded, LoadError> {
    let (tx, rx) = mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(load_path(&path));
    });
    rx.recv_timeout(DEADLINE)
        .unwrap_or_else(|_| panic!("load_path did not return within {DEADLINE:?}: it blocked on a file"))
}

fn service(name: &str) -> String {
    format!("apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: app}}\n")
}

fn services(loaded: &Loaded) -> Vec<String> {
    let mut names: Vec<String> = loaded
        .inputs
        .services
        .iter()
        .filter_map(|s| s.object.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// (file, message) of every diagnostic, with the directory prefix removed.
fn diagnostics(loaded: &Loaded, dir: &Path) -> Vec<(String, String)> {
    let prefix = format!("{}/", dir.display());
    loaded
        .diagnostics
        .iter()
        .map(|d| {
            assert_eq!(d.severity, Severity::Error, "{d:?}");
            let file = d.file.clone().unwrap_or_default();
            (
                file.strip_prefix(&prefix).unwrap_or(&file).to_string(),
                d.message.clone(),
            )
        })
        .collect()
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

fn symlink(target: impl AsRef<Path>, link: PathBuf) {
    std::os::unix::fs::symlink(target, link).expect("symlink");
}

#[test]
fn a_fifo_or_a_device_named_yaml_is_reported_and_the_rest_loads() {
    let dir = TempDir::new("fifo");
    dir.write("a.yaml", service("a"));
    dir.write("sub/b.yaml", service("b"));
    mkfifo(&dir.path().join("fifo.yaml"));
    mkfifo(&dir.path().join("sub/pipe.json"));
    // A FIFO with another name is not a manifest: not even looked at.
    mkfifo(&dir.path().join("notes.txt"));

    let loaded = load_with_deadline(dir.path()).expect("directory loads");
    assert_eq!(services(&loaded), ["a", "b"]);
    let fifo = "not a regular file (a FIFO); only regular files are read".to_string();
    assert_eq!(
        diagnostics(&loaded, dir.path()),
        [
            ("fifo.yaml".to_string(), fifo.clone()),
            ("sub/pipe.json".to_string(), fifo)
        ]
    );
}

#[test]
fn a_file_over_the_size_cap_is_reported_not_read() {
    let dir = TempDir::new("cap");
    dir.write("a.yaml", service("a"));
    // Sparse: costs no disk, but is one byte over the cap.
    let big = std::fs::File::create(dir.path().join("big.yaml")).expect("create");
    big.set_len(MAX_FILE_BYTES + 1).expect("set_len");
    dir.write("edge.yaml", format!("{}{}", service("edge"), "#".repeat(100)));

    let loaded = load_with_deadline(dir.path()).expect("directory loads");
    assert_eq!(services(&loaded), ["a", "edge"]);
    assert_eq!(
        diagnostics(&loaded, dir.path()),
        [(
            "big.yaml".to_string(),
            format!("the file is larger than the {MAX_FILE_BYTES}-byte limit")
        )]
    );
}

#[test]
fn an_explicit_device_path_ends_at_the_cap() {
    // `translate -f /dev/zero`: the user named it, so it is read, but the
    // read stops at the cap instead of exhausting memory.
    let error = load_with_deadline(Path::new("/dev/zero")).expect_err("over the cap");
    assert!(error.to_string().contains("larger than the"), "{error}");
}

#[test]
fn links_are_followed_only_inside_the_root() {
    let outside = TempDir::new("outside");
    outside.write("secret.yaml", service("outside-file"));
    outside.write("dir/x.yaml", service("outside-dir"));
    let dir = TempDir::new("links");
    dir.write("a.yaml", service("a"));
    // Kubernetes ConfigMap volume layout: visible links into hidden entries.
    dir.write("..2026_11_24/cm.yaml", service("configmap"));
    symlink("..2026_11_24", dir.path().join("..data"));
    symlink("..data/cm.yaml", dir.path().join("cm.yaml"));
    // A directory link inside the root.
    dir.write(".real/inner.yaml", service("inner"));
    symlink(dir.path().join(".real"), dir.path().join("linked"));
    // Out of the root: a file, a directory, the parent, a device.
    symlink(outside.path().join("secret.yaml"), dir.path().join("escape.yaml"));
    symlink(outside.path().join("dir"), dir.path().join("escape-dir"));
    symlink("..", dir.path().join("up"));
    symlink("/dev/zero", dir.path().join("zero.yaml"));
    // Loops: two links to each other, and a directory link to the root.
    symlink("loop-b.yaml", dir.path().join("loop-a.yaml"));
    symlink("loop-a.yaml", dir.path().join("loop-b.yaml"));
    symlink(".", dir.path().join("again"));

    let loaded = load_with_deadline(dir.path()).expect("directory loads");
    assert_eq!(services(&loaded), ["a", "configmap", "inner"]);
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let out = std::fs::canonicalize(outside.path()).expect("canonical");
    let escape = |target: &Path| {
        format!(
            "symbolic link to {}, outside the directory {}; not followed",
            target.display(),
            root.display()
        )
    };
    let found = diagnostics(&loaded, dir.path());
    let parent = root.parent().expect("parent");
    let expected = vec![
        ("escape-dir".to_string(), escape(&out.join("dir"))),
        ("escape.yaml".to_string(), escape(&out.join("secret.yaml"))),
        (
            "loop-a.yaml".to_string(),
            "cannot read file: Too many levels of symbolic links (os error 40)".to_string(),
        ),
        (
            "loop-b.yaml".to_string(),
            "cannot read file: Too many levels of symbolic links (os error 40)".to_string(),
        ),
        ("up".to_string(), escape(parent)),
        ("zero.yaml".to_string(), escape(Path::new("/dev/zero"))),
    ];
    assert_eq!(found, expected);
}

#[test]
fn root_read_refuses_what_the_walk_would_refuse() {
    // A read is judged again on its own, as when an entry was swapped for
    // a FIFO or a link after the walk listed it.
    let dir = TempDir::new("read");
    let outside = TempDir::new("read-outside");
    outside.write("x.yaml", service("x"));
    mkfifo(&dir.path().join("swapped.yaml"));
    symlink(outside.path().join("x.yaml"), dir.path().join("link.yaml"));
    dir.write("ok.yaml", service("ok"));
    let root = Root::new(dir.path()).expect("root");

    let (tx, rx) = mpsc::channel();
    let fifo = dir.path().join("swapped.yaml");
    let r = root.clone();
    std::thread::spawn(move || {
        let _ = tx.send(r.read(&fifo));
    });
    let fifo = rx.recv_timeout(DEADLINE).expect("reading a FIFO must not block");
    assert!(
        matches!(fifo, Err(FileError::NotRegular { kind: "a FIFO" })),
        "{fifo:?}"
    );
    let link = root.read(&dir.path().join("link.yaml"));
    assert!(matches!(link, Err(FileError::Escapes { .. })), "{link:?}");
    let gone = root.read(&dir.path().join("gone.yaml"));
    assert!(gone.as_ref().is_err_and(FileError::is_not_found), "{gone:?}");
    assert_eq!(
        root.read(&dir.path().join("ok.yaml")).ok(),
        Some(service("ok").into_bytes())
    );
}
