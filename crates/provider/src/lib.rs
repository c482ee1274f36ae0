//! The file provider: watches a directory of manifests and publishes input
//! snapshots for `portcullis serve`.
//!
//! Data model: per manifest file, the last *good* load of that file (a
//! load with no error diagnostic). A snapshot merges the good loads of all
//! files in path order, plus the diagnostics of every file's latest read:
//! a file that is half-written or broken keeps its previous objects in
//! force and its errors are reported beside them (a broken file is never a
//! reason to withdraw working configuration). A deleted file removes its
//! objects. A file whose bytes did not change causes no new snapshot.
//!
//! Events are coalesced: a reload happens `debounce` after the last event
//! of a burst (default 50 ms), and at most `max_delay` after its first
//! (default 500 ms), so a continuous stream of writes still publishes.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::loader::{self, Loaded};
use api::{Diagnostic, Severity};
use notify::{RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot watch {}: {source}", path.display())]
    Watch { path: PathBuf, source: notify::Error },
}

#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub debounce: Duration,
    pub max_delay: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(50),
            max_delay: Duration::from_millis(500),
        }
    }
}

/// One published state of the inputs.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Increments with every published change (the initial load is 1).
    pub generation: u64,
    pub loaded: Loaded,
    /// From the first event of the burst to publication.
    pub debounce_latency: Option<Duration>,
}

struct FileState {
    hash: u64,
    /// The last load without errors, if any.
    good: Option<Loaded>,
    /// Diagnostics of the latest read (errors of a rejected version too).
    latest: Vec<Diagnostic>,
}

struct Tree {
    dir: PathBuf,
    files: BTreeMap<PathBuf, FileState>,
}

fn hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn list(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        if path.is_dir() {
            // An unreadable subdirectory is skipped, not fatal.
            let _ = list(&path, out);
        } else if loader::is_manifest_file(&path) {
            out.push(path);
        }
    }
    Ok(())
}

impl Tree {
    /// Rescans the directory; returns whether anything that matters changed.
    fn rescan(&mut self) -> std::io::Result<bool> {
        let mut paths = Vec::new();
        list(&self.dir, &mut paths)?;
        let mut changed = false;
        let before = self.files.len();
        self.files.retain(|p, _| paths.contains(p));
        changed |= self.files.len() != before;
        for path in paths {
            let Ok(bytes) = std::fs::read(&path) else {
                // Vanished or unreadable mid-way: keep what we had.
                continue;
            };
            let h = hash(&bytes);
            if self.files.get(&path).is_some_and(|f| f.hash == h) {
                continue;
            }
            changed = true;
            let name = path.display().to_string();
            let text = String::from_utf8_lossy(&bytes);
            let load = loader::load_str(&name, &text);
            let ok = !load.diagnostics.iter().any(|d| d.severity == Severity::Error);
            let latest = load.diagnostics.clone();
            let entry = self.files.entry(path).or_insert(FileState {
                hash: h,
                good: None,
                latest: Vec::new(),
            });
            entry.hash = h;
            entry.latest = latest;
            if ok {
                entry.good = Some(load);
            } else {
                tracing::warn!(file = %name, "file has errors; its last good version stays in force");
            }
        }
        Ok(changed)
    }

    fn merged(&self) -> Loaded {
        let mut merged = loader::merge(self.files.values().filter_map(|f| f.good.clone()));
        // The good loads' own diagnostics are already in `merged`; add
        // those of rejected versions.
        for f in self.files.values() {
            let rejected = f.good.as_ref().is_none_or(|g| g.diagnostics != f.latest);
            if rejected {
                merged.diagnostics.extend(f.latest.iter().cloned());
            }
        }
        merged
    }
}

/// Watches a directory; dropping it stops the watch.
pub struct FileProvider {
    _watcher: notify::RecommendedWatcher,
    rescan: mpsc::UnboundedSender<Instant>,
    _task: tokio::task::JoinHandle<()>,
}

impl FileProvider {
    /// Loads `dir` (synchronously: nothing is served before the initial
    /// load) and starts watching it. Must run inside a tokio runtime.
    pub fn start(
        dir: PathBuf,
        options: Options,
    ) -> Result<(Self, watch::Receiver<Arc<Snapshot>>), ProviderError> {
        let mut tree = Tree {
            dir: dir.clone(),
            files: BTreeMap::new(),
        };
        tree.rescan().map_err(|source| ProviderError::Read {
            path: dir.clone(),
            source,
        })?;
        let (tx, rx) = watch::channel(Arc::new(Snapshot {
            generation: 1,
            loaded: tree.merged(),
            debounce_latency: None,
        }));

        let (events_tx, mut events_rx) = mpsc::unbounded_channel::<Instant>();
        let fwd = events_tx.clone();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if let Ok(ev) = res {
                if ev.kind.is_access() {
                    return;
                }
                let _ = fwd.send(Instant::now());
            }
        })
        .map_err(|source| ProviderError::Watch {
            path: dir.clone(),
            source,
        })?;
        watcher
            .watch(&dir, RecursiveMode::Recursive)
            .map_err(|source| ProviderError::Watch {
                path: dir.clone(),
                source,
            })?;

        let task = tokio::spawn(async move {
            let mut generation = 1u64;
            while let Some(first) = events_rx.recv().await {
                // Coalesce the burst.
                let deadline = first + options.max_delay;
                loop {
                    let wait = options
                        .debounce
                        .min(deadline.saturating_duration_since(Instant::now()));
                    match tokio::time::timeout(wait, events_rx.recv()).await {
                        Ok(Some(_)) if Instant::now() < deadline => continue,
                        Ok(None) => return,
                        _ => break,
                    }
                }
                let changed = match tree.rescan() {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot rescan the manifest directory; keeping the current configuration");
                        false
                    }
                };
                if changed {
                    generation += 1;
                    let snapshot = Snapshot {
                        generation,
                        loaded: tree.merged(),
                        debounce_latency: Some(first.elapsed()),
                    };
                    if tx.send(Arc::new(snapshot)).is_err() {
                        return;
                    }
                }
            }
        });
        Ok((
            Self {
                _watcher: watcher,
                rescan: events_tx,
                _task: task,
            },
            rx,
        ))
    }

    /// Forces a rescan (as if a file had changed).
    pub fn reload_now(&self) {
        let _ = self.rescan.send(Instant::now());
    }
}

impl Drop for FileProvider {
    fn drop(&mut self) {
        self._task.abort();
    }
}
