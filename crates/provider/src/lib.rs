//! The file provider: watches a directory of manifests and publishes input
//! snapshots for `portcullis serve DIR`.
//!
//! # Data model
//!
//! The provider keeps, per manifest file under the directory (`*.yaml`,
//! `*.yml`, `*.json`, recursively, hidden entries skipped — exactly the
//! files `api::loader::load_path` reads), the last **good** load of that
//! file. A [`Snapshot`] merges the good loads of all files in sorted path
//! order (so of two objects with the same kind, namespace and name, the one
//! in the file that sorts first wins, as in `portcullis translate -f DIR`),
//! together with the diagnostics of every file's version on disk.
//!
//! # When a file's new version replaces its objects
//!
//! A version is *good* when it can be read and its load has no diagnostic
//! of severity error; warnings (unknown kinds, unknown fields) do not
//! disqualify it. A good version replaces all of that file's objects.
//!
//! A version that is not good is not applied **at all**, even if some of
//! its documents are valid: a half-written or broken file keeps the
//! previous good version of the whole file in force (none of its objects
//! before it was read, when there was no previous good version — also at
//! startup). Applying only the valid documents could apply a route without
//! the policy that was meant to guard it. That covers YAML/JSON syntax
//! errors, typed-parse errors, content that is not UTF-8, and a file that
//! exists but cannot be read (permissions, I/O errors). The snapshot then
//! carries the rejected version's diagnostics (with `file:line`) and a
//! warning that names the file and says which version stays in force, so
//! the problem is visible in status and logs.
//!
//! A file that is absent when its events are processed is deleted: its
//! objects are removed. The debounce window is the grace period for
//! editors that delete and re-create a file on save (atomic rename saves
//! never leave it absent). A new file adds its objects.
//!
//! One half-written state parses without error: an empty file, left by a
//! writer that truncates before it writes (`kubectl get ... > f.yaml`).
//! A file that had objects and is now empty keeps them until it has stayed
//! empty for `max_delay` (it is read again then); emptying a file does
//! remove its objects, just not in the middle of a write.
//!
//! # Events
//!
//! The directory is watched recursively with `notify`. Access events (for
//! example the provider's own reads) are dropped where they arrive. Other
//! events are coalesced: a burst is processed `debounce` after its last
//! event (default 5 ms: one save's events arrive within a millisecond or
//! two; a slower writer at worst shows a transient parse error while the
//! file's last good objects stay in force), and at most `max_delay` after
//! its first (default 500 ms), so a continuous stream of writes still publishes at that rate.
//! Processing a burst reads only the paths its events name (a directory
//! is walked); an event on a hidden path (an editor's temporary file, a
//! Kubernetes ConfigMap volume's `..data`) re-reads only the visible
//! symbolic links, the only way into it; a lost event, a watch error, an
//! event on the directory itself or [`FileProvider::reload_now`] rescans
//! everything. Each burst logs (debug, "burst processed") the files it
//! read and parsed and where its time went.
//! Files whose bytes did not change are not parsed again, and a burst that
//! changes no file's objects or diagnostics publishes nothing.
//!
//! Reading and parsing run on tokio's blocking pool, never on the async
//! workers. Only regular files inside the directory are read (links are
//! followed only when their target is inside it; FIFOs, devices and files
//! over 16 MiB are reported, see `api::files`), and each read has a
//! deadline ([`READ_DEADLINE`]), so no single file can stall the provider;
//! [`Health`] tells how long the current burst has been processing. The snapshot records the time from the first event of its
//! burst to publication ([`Snapshot::debounce_latency`]), the latency this
//! coalescing costs.

mod deadline;
mod tree;

pub use deadline::READ_DEADLINE;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use api::loader::Loaded;
use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use tree::{Batch, Tree};

/// Why the provider could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot watch {}: {source}", path.display())]
    Watch {
        path: PathBuf,
        #[source]
        source: notify::Error,
    },
    #[error("the file provider must be started inside a tokio runtime")]
    NoRuntime,
}

/// How events are coalesced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Quiet time after the last event of a burst before it is processed.
    /// Default 5 ms.
    pub debounce: Duration,
    /// Longest time from the first event of a burst to its processing, so
    /// that a continuous stream of writes still publishes. Default 500 ms.
    pub max_delay: Duration,
    /// What each file's load accepts beyond the built-in kinds (the kinds
    /// an extension server registered).
    pub loader: api::loader::Options,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(5),
            max_delay: Duration::from_millis(500),
            loader: api::loader::Options::default(),
        }
    }
}

/// One published state of the inputs.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Increments with every published change; the initial load is 1.
    pub generation: u64,
    pub loaded: Loaded,
    /// From the first event of the burst to publication; `None` for the
    /// initial load.
    pub debounce_latency: Option<Duration>,
}

/// Counters of the provider's work, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// File-system events that may have changed a file (access events are
    /// not counted), plus calls to [`FileProvider::reload_now`].
    pub events: u64,
    /// Bursts processed, whether or not they published.
    pub reloads: u64,
    /// The generation of the latest published snapshot.
    pub generation: u64,
    /// [`Snapshot::debounce_latency`] of the latest published snapshot.
    pub last_debounce_latency: Option<Duration>,
}

/// One event (or `reload_now`), as forwarded from the watcher's thread.
struct Signal {
    at: Instant,
    /// `None`: rescan everything.
    paths: Option<Vec<PathBuf>>,
}

/// Signals waiting to be coalesced; beyond this, a full rescan is forced
/// instead of queueing more.
const QUEUE: usize = 4096;

struct Shared {
    /// Set when a signal could not be queued: the next burst rescans all.
    overflow: AtomicBool,
    events: AtomicU64,
    stats: Mutex<Stats>,
    /// When the burst being processed now started processing; `None` when
    /// the provider is idle (waiting for events).
    busy_since: Mutex<Option<Instant>>,
}

impl Shared {
    fn forward(&self, queue: &mpsc::Sender<Signal>, signal: Signal) {
        self.events.fetch_add(1, Ordering::Relaxed);
        if queue.try_send(signal).is_err() {
            self.overflow.store(true, Ordering::SeqCst);
        }
    }

    fn stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Watches a directory and publishes [`Snapshot`]s; dropping it stops the
/// watch and closes the snapshot channel.
pub struct FileProvider {
    watcher: Option<notify::RecommendedWatcher>,
    queue: mpsc::Sender<Signal>,
    shared: Arc<Shared>,
    reader: deadline::Reader,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    task: tokio::task::JoinHandle<()>,
}

/// Whether the provider is keeping up, for readiness and metrics; cheap to
/// clone and to query from any thread.
#[derive(Clone)]
pub struct Health {
    shared: Arc<Shared>,
    reader: deadline::Reader,
}

impl Health {
    /// How long the burst being processed now has been running; `None`
    /// when the provider is idle. Reads have a deadline
    /// ([`READ_DEADLINE`] per file), so this stays short unless something
    /// unforeseen blocks the provider: a caller should treat a long busy
    /// time as a stuck provider (edits are not being applied).
    pub fn busy_for(&self) -> Option<Duration> {
        self.shared
            .busy_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map(|since| since.elapsed())
    }

    /// File reads abandoned after [`READ_DEADLINE`] so far.
    pub fn read_timeouts(&self) -> u64 {
        self.reader.timeouts()
    }
}

impl FileProvider {
    /// Loads `dir` and starts watching it. The initial load happens before
    /// this returns and is published as generation 1, so nothing is served
    /// before it is complete. Must be called inside a tokio runtime. Fails
    /// if `dir` cannot be read or watched.
    pub fn start(
        dir: PathBuf,
        options: Options,
    ) -> Result<(Self, watch::Receiver<Arc<Snapshot>>), ProviderError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| ProviderError::NoRuntime)?;
        let read_error = |source| ProviderError::Read {
            path: dir.clone(),
            source,
        };
        let mut tree =
            Tree::new(dir.clone(), options.max_delay, options.loader.clone()).map_err(read_error)?;
        std::fs::read_dir(&dir).map_err(read_error)?;

        // Watch before the initial load, so that a change made during the
        // load is not lost (its event is processed right after).
        let shared = Arc::new(Shared {
            overflow: AtomicBool::new(false),
            events: AtomicU64::new(0),
            stats: Mutex::new(Stats {
                generation: 1,
                ..Stats::default()
            }),
            busy_since: Mutex::new(None),
        });
        let (queue, signals) = mpsc::channel(QUEUE);
        let watch_error = |source| ProviderError::Watch {
            path: dir.clone(),
            source,
        };
        let mut watcher = {
            let shared = shared.clone();
            let queue = queue.clone();
            let handler = move |event: notify::Result<notify::Event>| {
                if let Some(paths) = classify(event) {
                    let at = Instant::now();
                    shared.forward(&queue, Signal { at, paths });
                }
            };
            // Links are not followed by the watch: a tenant's link to `/`
            // would otherwise add a watch for every directory of the file
            // system (or fail the start on the first unreadable one). Links
            // inside the root lead to directories that are watched anyway.
            let config = notify::Config::default().with_follow_symlinks(false);
            notify::RecommendedWatcher::new(handler, config).map_err(watch_error)?
        };
        watcher
            .watch(&dir, RecursiveMode::Recursive)
            .map_err(watch_error)?;

        tree.rescan().map_err(read_error)?;
        let reader = tree.reader();
        let loaded = tree.loaded();
        tracing::info!(
            dir = %dir.display(),
            files = tree.file_count(),
            objects = loaded.inputs.len(),
            diagnostics = loaded.diagnostics.len(),
            "initial load"
        );
        let (publish, snapshots) = watch::channel(Arc::new(Snapshot {
            generation: 1,
            loaded,
            debounce_latency: None,
        }));

        let task = runtime.spawn(run(
            Arc::new(Mutex::new(tree)),
            signals,
            queue.downgrade(),
            publish,
            shared.clone(),
            options,
        ));
        let provider = Self {
            watcher: Some(watcher),
            queue,
            shared,
            reader,
            snapshots: snapshots.clone(),
            task,
        };
        Ok((provider, snapshots))
    }

    /// Forces a rescan of the whole directory, coalesced with other events
    /// like any event. It publishes only if something changed.
    pub fn reload_now(&self) {
        let signal = Signal {
            at: Instant::now(),
            paths: None,
        };
        self.shared.forward(&self.queue, signal);
    }

    /// Another receiver of the snapshots.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshots.clone()
    }

    /// A handle on whether the provider keeps up.
    pub fn health(&self) -> Health {
        Health {
            shared: self.shared.clone(),
            reader: self.reader.clone(),
        }
    }

    /// The provider's counters.
    pub fn stats(&self) -> Stats {
        let mut stats = *self.shared.stats();
        stats.events = self.shared.events.load(Ordering::Relaxed);
        stats
    }
}

impl Drop for FileProvider {
    fn drop(&mut self) {
        // Stop the watcher's thread first, then the coalescing task (which
        // owns the sender, so receivers see the channel close).
        drop(self.watcher.take());
        self.task.abort();
    }
}

/// Which paths an event asks to look at again: `None` inside means all,
/// `None` outside means the event cannot change any file's content.
fn classify(event: notify::Result<notify::Event>) -> Option<Option<Vec<PathBuf>>> {
    let event = match event {
        Ok(event) => event,
        Err(error) => {
            // e.g. the inotify watch limit: subdirectories may go unwatched.
            tracing::error!(%error, "file watch error; rescanning the directory");
            return Some(None);
        }
    };
    if event.need_rescan() {
        return Some(None);
    }
    match event.kind {
        // Written and closed: content may have changed (usually a Modify
        // came first; this one catches the rest cheaply).
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
        // Opening and reading, including the provider's own reads.
        EventKind::Access(_) => return None,
        _ => {}
    }
    if event.paths.is_empty() {
        return Some(None);
    }
    Some(Some(event.paths))
}

/// Coalesces signals into bursts, processes each on the blocking pool and
/// publishes what changed.
async fn run(
    tree: Arc<Mutex<Tree>>,
    mut signals: mpsc::Receiver<Signal>,
    queue: mpsc::WeakSender<Signal>,
    publish: watch::Sender<Arc<Snapshot>>,
    shared: Arc<Shared>,
    options: Options,
) {
    let mut generation = 1;
    while let Some(first) = signals.recv().await {
        let started = first.at;
        let hard = started + options.max_delay;
        let mut last = first.at;
        let mut batch = Batch::default();
        add(&mut batch, first);
        loop {
            // Whatever queued up (e.g. during the previous reload) belongs
            // to this burst, even when its deadline has already passed.
            while let Ok(signal) = signals.try_recv() {
                last = last.max(signal.at);
                add(&mut batch, signal);
            }
            if Instant::now() >= hard {
                break;
            }
            let until = (last + options.debounce).min(hard);
            tokio::select! {
                signal = signals.recv() => match signal {
                    Some(signal) => {
                        last = last.max(signal.at);
                        add(&mut batch, signal);
                    }
                    None => return,
                },
                () = tokio::time::sleep_until(until.into()) => break,
            }
        }
        if shared.overflow.swap(false, Ordering::SeqCst) {
            batch.full = true;
        }

        let tree = tree.clone();
        let processing = Instant::now();
        *shared.busy_since.lock().unwrap_or_else(PoisonError::into_inner) = Some(processing);
        let paths = batch.paths.len();
        let full = batch.full;
        let processed = tokio::task::spawn_blocking(move || {
            let mut tree = tree.lock().unwrap_or_else(PoisonError::into_inner);
            let before = tree.counts();
            let t0 = Instant::now();
            let changed = tree.apply(&batch);
            let applied = t0.elapsed();
            let loaded = changed.then(|| (tree.loaded(), tree.file_count()));
            let after = tree.counts();
            // Where a burst's time goes (`serve`'s per-edit stages start
            // here): waiting out the debounce, reading and parsing the
            // files it names, merging every file's objects into the
            // snapshot.
            tracing::debug!(
                paths,
                full,
                reads = after.0 - before.0,
                parses = after.1 - before.1,
                wait_ms = (processing - started).as_secs_f64() * 1e3,
                apply_ms = applied.as_secs_f64() * 1e3,
                merge_ms = (t0.elapsed() - applied).as_secs_f64() * 1e3,
                "burst processed"
            );
            (loaded, tree.take_rechecks())
        })
        .await;
        *shared.busy_since.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let (changed, rechecks) = match processed {
            Ok(processed) => processed,
            Err(error) => {
                tracing::error!(%error, "reloading manifests failed; the current configuration stays in force");
                (None, Vec::new())
            }
        };
        for (path, due) in rechecks {
            let queue = queue.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(due.into()).await;
                if let Some(queue) = queue.upgrade() {
                    let paths = Some(vec![path]);
                    let _ = queue.try_send(Signal {
                        at: Instant::now(),
                        paths,
                    });
                }
            });
        }
        // Counted after publication: a caller that sees the counter move
        // also sees what the reload published.
        let Some((loaded, files)) = changed else {
            shared.stats().reloads += 1;
            continue;
        };
        generation += 1;
        let latency = started.elapsed();
        tracing::info!(
            generation,
            files,
            objects = loaded.inputs.len(),
            diagnostics = loaded.diagnostics.len(),
            latency_ms = latency.as_secs_f64() * 1e3,
            "manifests changed"
        );
        publish.send_replace(Arc::new(Snapshot {
            generation,
            loaded,
            debounce_latency: Some(latency),
        }));
        let mut stats = shared.stats();
        stats.reloads += 1;
        stats.generation = generation;
        stats.last_debounce_latency = Some(latency);
    }
}

fn add(batch: &mut Batch, signal: Signal) {
    match signal.paths {
        Some(paths) => batch.paths.extend(paths),
        None => batch.full = true,
    }
}
