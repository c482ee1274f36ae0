//! Per-file state of the watched directory: for every manifest file, the
//! last good load and why the version on disk is not in force, if it isn't.
//!
//! Objects are shared, not copied (`api::Sourced`): a file's good load,
//! its document cache and every snapshot [`Tree::loaded`] builds point at
//! the same allocations, and a document that did not change keeps its
//! objects across reloads of its file.
//!
//! Files are keyed by their path relative to the root, so the map's order
//! (component-wise, as [`Path`] compares) is the order `load_path` reads a
//! directory in, and every subtree is one contiguous range of the map.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs;
use std::hash::{Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use api::files::{Entry, FileError, Root};
use api::loader::{self, Loaded};
use api::{Diagnostic, Source};

use crate::deadline::{self, Reader};

/// What a burst of file-system events asks to look at again.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Rescan the whole directory (reload_now, a lost event, a watch error,
    /// an event on a hidden path or outside the root).
    pub full: bool,
    /// Absolute paths named by the events (files or directories, present
    /// or gone).
    pub paths: BTreeSet<PathBuf>,
}

/// The bytes of a version of a file, for "did it change" (not security).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Digest {
    len: usize,
    hash: u64,
}

impl Digest {
    fn of(bytes: &[u8]) -> Self {
        let mut hasher = DefaultHasher::new();
        bytes.hash(&mut hasher);
        Self {
            len: bytes.len(),
            hash: hasher.finish(),
        }
    }
}

#[derive(Clone, Debug, Default)]
struct FileState {
    /// The version last read; `None` when the last attempt could not read it.
    digest: Option<Digest>,
    /// The last version without error diagnostics: its objects are in force.
    good: Option<Loaded>,
    /// Set when the version on disk is not the good one: its diagnostics
    /// (or the read error). `None` implies `good` is `Some`.
    rejected: Option<Vec<Diagnostic>>,
    /// From a rejected version: TrafficPolicies that could not be read but
    /// were kept (with their targets) to fail those targets closed, and
    /// that the good version does not define. They are published beside
    /// the good objects: a broken security policy must fence its routes,
    /// not leave them serving as if it did not exist.
    fail_closed: Vec<api::Sourced<api::policy::TrafficPolicy>>,
    /// When the file was first seen empty while its good version has
    /// objects; the empty version is applied only after a grace period.
    empty_since: Option<Instant>,
    /// The decoded documents of the last version read: a new version
    /// decodes only its changed documents (`api::loader::DocumentCache`).
    /// Its objects are `good`'s own allocations (and every published
    /// snapshot's), not copies: see `api::Sourced`.
    documents: loader::DocumentCache,
}

impl FileState {
    /// Whether two states publish the same objects and diagnostics.
    fn same_output(&self, other: &FileState) -> bool {
        self.good == other.good && self.rejected == other.rejected && self.fail_closed == other.fail_closed
    }
}

pub(crate) struct Tree {
    /// The directory as given: file names in sources and diagnostics are
    /// `dir.join(relative)`, as `api::loader::load_path(dir)` names them.
    dir: PathBuf,
    /// The directory made absolute the way the watcher does (not
    /// canonicalized): event paths start with it.
    absolute: PathBuf,
    /// Its canonical form, in case an event path is reported that way.
    canonical: Option<PathBuf>,
    files: BTreeMap<PathBuf, FileState>,
    /// Directories below the root that could not be read, keyed by their
    /// relative path. Files tracked below them keep their last state.
    dir_errors: BTreeMap<PathBuf, Diagnostic>,
    /// Entries that are not followed because they lead out of the root
    /// (not manifest files themselves: those are tracked in `files` with
    /// the refusal as their read error), keyed by relative path.
    escapes: BTreeMap<PathBuf, Diagnostic>,
    /// The root as judged for containment; `None` until it resolves.
    root: Option<Root>,
    /// Reads files off this thread, with a deadline.
    reader: Reader,
    /// How long an emptied file keeps its objects (see `reload`).
    empty_grace: Duration,
    /// Files to read again, and when (absolute paths).
    rechecks: Vec<(PathBuf, Instant)>,
    /// What a load accepts beyond the built-in kinds.
    loader: loader::Options,
    /// Visible entries (files or directories) that are symbolic links, or
    /// files with several names (hard links), by relative path: the only
    /// ways the content of a hidden path reaches a file that is read
    /// (Kubernetes' ConfigMap volumes: `a.yaml -> ..data/a.yaml`;
    /// [`shows_hidden_changes`]). An event on a hidden path re-checks
    /// these, not the whole tree: an editor's `.a.yaml.tmp` then costs
    /// nothing.
    links: BTreeSet<PathBuf>,
    /// Files read and versions parsed since the tree was made (an edit
    /// must cost the files it touches: the provider logs these per burst,
    /// and tests count them).
    counters: Counters,
}

/// See [`Tree::counters`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Files read (or attempted).
    pub reads: AtomicU64,
    /// Versions whose bytes changed and were loaded.
    pub parses: AtomicU64,
}

/// How an event's path relates to the watched directory.
enum Relative {
    /// Strictly below the root, no component hidden.
    Visible(PathBuf),
    /// Below the root with a hidden component: never read itself, but a
    /// visible link may lead into it.
    Hidden,
    /// The root itself or outside it: only a rescan can tell.
    Unknown,
}

impl Tree {
    pub fn new(dir: PathBuf, empty_grace: Duration, loader: loader::Options) -> io::Result<Self> {
        let absolute = if dir.is_absolute() {
            dir.clone()
        } else {
            std::env::current_dir()?.join(&dir)
        };
        let canonical = fs::canonicalize(&absolute).ok();
        let root = Root::new(&absolute).ok();
        Ok(Self {
            dir,
            absolute,
            canonical,
            files: BTreeMap::new(),
            dir_errors: BTreeMap::new(),
            escapes: BTreeMap::new(),
            root,
            reader: Reader::new(deadline::READ_DEADLINE),
            empty_grace,
            rechecks: Vec::new(),
            loader,
            links: BTreeSet::new(),
            counters: Counters::default(),
        })
    }

    /// The reader (its counters are the provider's health).
    pub fn reader(&self) -> Reader {
        self.reader.clone()
    }

    /// Files that must be read again later, with when.
    pub fn take_rechecks(&mut self) -> Vec<(PathBuf, Instant)> {
        std::mem::take(&mut self.rechecks)
    }

    /// (files read, versions parsed) since the tree was made.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.counters.reads.load(Ordering::Relaxed),
            self.counters.parses.load(Ordering::Relaxed),
        )
    }

    /// Number of manifest files known (present or with a kept version).
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Rescans the whole directory. Fails only if the root itself cannot
    /// be read, and then changes nothing. Returns whether the output changed.
    pub fn rescan(&mut self) -> io::Result<bool> {
        fs::read_dir(&self.absolute)?;
        // The root may itself be a link that was retargeted.
        let root = Root::new(&self.absolute)?;
        self.canonical = Some(root.canonical().to_path_buf());
        self.root = Some(root);
        Ok(self.reconcile_dir(Path::new("")))
    }

    /// Applies a burst of events. Returns whether the output changed.
    pub fn apply(&mut self, batch: &Batch) -> bool {
        let mut changed = false;
        let mut full = batch.full;
        let mut hidden = false;
        if !full {
            for path in &batch.paths {
                match self.relative(path) {
                    Relative::Visible(rel) => changed |= self.reconcile(&rel),
                    Relative::Hidden => hidden = true,
                    Relative::Unknown => {
                        full = true;
                        break;
                    }
                }
            }
        }
        if hidden && !full {
            // Only a link can show what changed under a hidden path; each
            // is read again (unchanged bytes are not parsed).
            let links: Vec<PathBuf> = self.links.iter().cloned().collect();
            for rel in links {
                changed |= self.reconcile(&rel);
            }
        }
        if full {
            match self.rescan() {
                Ok(rescanned) => changed |= rescanned,
                Err(error) => tracing::error!(
                    dir = %self.dir.display(),
                    %error,
                    "cannot read the manifest directory; the current configuration stays in force"
                ),
            }
        }
        changed
    }

    /// The published state: the good objects of every file in path order,
    /// merged with the duplicate check, and the diagnostics of every
    /// file's version on disk.
    pub fn loaded(&self) -> Loaded {
        let mut parts = Vec::with_capacity(self.files.len() + 1);
        if !self.dir_errors.is_empty() || !self.escapes.is_empty() {
            parts.push(Loaded {
                inputs: Default::default(),
                diagnostics: self
                    .dir_errors
                    .values()
                    .chain(self.escapes.values())
                    .cloned()
                    .collect(),
            });
        }
        for (rel, state) in &self.files {
            let mut inputs = state.good.as_ref().map(|g| g.inputs.clone()).unwrap_or_default();
            inputs.traffic_policies.extend(state.fail_closed.iter().cloned());
            let diagnostics = match &state.rejected {
                None => state
                    .good
                    .as_ref()
                    .map(|g| g.diagnostics.clone())
                    .unwrap_or_default(),
                Some(rejected) => {
                    let mut diagnostics = rejected.clone();
                    diagnostics.push(self.not_applied(rel, state.good.as_ref(), &state.fail_closed));
                    diagnostics
                }
            };
            parts.push(Loaded { inputs, diagnostics });
        }
        loader::merge(parts)
    }

    fn not_applied(
        &self,
        rel: &Path,
        good: Option<&Loaded>,
        fail_closed: &[api::Sourced<api::policy::TrafficPolicy>],
    ) -> Diagnostic {
        let mut message = match good {
            Some(good) => format!(
                "this version of the file is not applied because it has errors; \
                 its last version without errors ({} objects) stays in force",
                good.inputs.len()
            ),
            None => "this file is not applied because it has errors, \
                     and no earlier version without errors was read"
                .to_string(),
        };
        // Not "nothing of it": a broken policy still fences its targets.
        if !fail_closed.is_empty() {
            let names: Vec<String> = fail_closed
                .iter()
                .map(|p| {
                    let m = &p.object.metadata;
                    format!(
                        "{}/{}",
                        m.namespace.as_deref().unwrap_or("default"),
                        m.name.as_deref().unwrap_or("")
                    )
                })
                .collect();
            message.push_str(&format!(
                "; except its TrafficPolicies that could not be read ({}), which are applied \
                 so that what they target answers 500 rather than serving without them",
                names.join(", ")
            ));
        }
        Diagnostic {
            severity: api::Severity::Warning,
            object: None,
            file: Some(self.name(rel)),
            message,
        }
    }

    fn name(&self, rel: &Path) -> String {
        self.dir.join(rel).display().to_string()
    }

    /// Where `path` lies (see [`Relative`]). Hidden entries are never read
    /// themselves, but they can be what visible symbolic links point to
    /// (Kubernetes' `..data` in a mounted ConfigMap): the caller re-checks
    /// the links then.
    fn relative(&self, path: &Path) -> Relative {
        let Some(rel) = path
            .strip_prefix(&self.absolute)
            .ok()
            .or_else(|| self.canonical.as_deref().and_then(|c| path.strip_prefix(c).ok()))
        else {
            return Relative::Unknown;
        };
        if rel.as_os_str().is_empty() {
            return Relative::Unknown;
        }
        let hidden = rel
            .components()
            .any(|c| c.as_os_str().to_str().is_none_or(|s| s.starts_with('.')));
        if hidden {
            return Relative::Hidden;
        }
        Relative::Visible(rel.to_path_buf())
    }

    /// Brings the state of one path (a file, a directory, or something
    /// gone) in line with the disk.
    fn reconcile(&mut self, rel: &Path) -> bool {
        let Some(root) = self.root.clone() else {
            // The root did not resolve: only a rescan can tell more.
            return false;
        };
        let path = self.absolute.join(rel);
        if shows_hidden_changes(&path) {
            self.links.insert(rel.to_path_buf());
        } else {
            self.links.remove(rel);
        }
        let manifest = loader::is_manifest_file(rel);
        let previous_escape = self.escapes.remove(rel);
        let mut changed = previous_escape.is_some();
        match root.entry(&path) {
            Entry::Dir { .. } => changed | self.reconcile_dir(rel),
            Entry::File => {
                // It may have been a directory before.
                changed |= self.forget_below(rel, false);
                if manifest {
                    changed |= self.reload(rel);
                }
                changed
            }
            // Gone (reload forgets it), or there but not readable (reload
            // reports why), possibly a directory before.
            Entry::Refused(_) if manifest => changed | self.forget_below(rel, false) | self.reload(rel),
            Entry::Refused(error @ FileError::Escapes { .. }) => {
                let diagnostic = self.refusal(rel, &error);
                let changed = self.forget_below(rel, true) || previous_escape.as_ref() != Some(&diagnostic);
                self.escapes.insert(rel.to_path_buf(), diagnostic);
                changed
            }
            Entry::Refused(error) if error.is_not_found() => changed | self.forget_below(rel, true),
            Entry::Refused(FileError::NotRegular { .. }) => changed | self.forget_below(rel, true),
            // Cannot tell what is there now: keep what was read last.
            Entry::Refused(_) => changed,
        }
    }

    /// The diagnostic for an entry that is not followed or not read.
    fn refusal(&self, rel: &Path, error: &FileError) -> Diagnostic {
        Diagnostic {
            severity: api::Severity::Error,
            object: None,
            file: Some(self.name(rel)),
            message: error.to_string(),
        }
    }

    /// Walks a directory (the root for `""`), reloads every manifest file
    /// in it, and forgets tracked files under it that are gone.
    fn reconcile_dir(&mut self, rel: &Path) -> bool {
        let mut found = BTreeSet::new();
        let mut dir_errors = BTreeMap::new();
        let mut escapes = BTreeMap::new();
        let mut links = BTreeSet::new();
        // A link back up to an ancestor is a loop, as in a walk from the root.
        let mut visited: HashSet<PathBuf> = rel
            .ancestors()
            .skip(1)
            .filter_map(|a| fs::canonicalize(self.absolute.join(a)).ok())
            .collect();
        self.walk(
            rel,
            &mut found,
            &mut dir_errors,
            &mut escapes,
            &mut visited,
            &mut links,
        );
        // The links below `rel` are now the ones the walk saw (`rel`
        // itself is its parent's to judge).
        let stale: Vec<PathBuf> = below_set(&self.links, rel)
            .filter(|p| p.as_path() != rel)
            .cloned()
            .collect();
        for path in stale {
            self.links.remove(&path);
        }
        self.links.extend(links);

        let mut changed = false;
        let old_escapes: Vec<PathBuf> = below(&self.escapes, rel).cloned().collect();
        for key in old_escapes {
            changed |= escapes.get(&key) != self.escapes.get(&key);
            self.escapes.remove(&key);
        }
        changed |= escapes.keys().any(|k| !self.escapes.contains_key(k));
        self.escapes.extend(escapes);
        // A file that was here before the directory was replaced.
        if !rel.as_os_str().is_empty() {
            changed |= self.files.remove(rel).is_some();
        }
        let old_errors: Vec<PathBuf> = below(&self.dir_errors, rel).cloned().collect();
        for key in old_errors {
            if dir_errors.get(&key) != self.dir_errors.get(&key) {
                changed = true;
            }
            self.dir_errors.remove(&key);
        }
        changed |= dir_errors.keys().any(|k| !self.dir_errors.contains_key(k));
        let unreadable: Vec<PathBuf> = dir_errors.keys().cloned().collect();
        self.dir_errors.extend(dir_errors);

        let gone: Vec<PathBuf> = below(&self.files, rel)
            .filter(|p| !found.contains(*p) && !unreadable.iter().any(|u| p.starts_with(u)))
            .cloned()
            .collect();
        for path in gone {
            self.files.remove(&path);
            changed = true;
        }
        // Read and parsed in parallel (the initial load of a large
        // directory is most of `serve`'s start), committed in path order.
        let found: Vec<PathBuf> = found.into_iter().collect();
        for (path, version) in found.iter().zip(self.read_versions(&found)) {
            changed |= self.commit(path, version);
        }
        changed
    }

    /// [`Tree::read_version`] of each path, on up to one thread per core
    /// (at most 8), in the order given.
    fn read_versions(&self, paths: &[PathBuf]) -> Vec<Version> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 8)
            .min(paths.len());
        if threads < 2 {
            return paths.iter().map(|p| self.read_version(p)).collect();
        }
        claimed(paths.len(), threads, |i| self.read_version(&paths[i]))
            .into_iter()
            .map(|v| v.unwrap_or(Version::Unchanged))
            .collect()
    }

    /// Collects the manifest files under `rel` the way `load_path` does:
    /// hidden entries skipped, symbolic links followed only inside the root
    /// (see `api::files`), each real directory visited once. A directory
    /// that cannot be read, or a link out of the root, becomes a diagnostic.
    fn walk(
        &self,
        rel: &Path,
        found: &mut BTreeSet<PathBuf>,
        dir_errors: &mut BTreeMap<PathBuf, Diagnostic>,
        escapes: &mut BTreeMap<PathBuf, Diagnostic>,
        visited: &mut HashSet<PathBuf>,
        links: &mut BTreeSet<PathBuf>,
    ) {
        let Some(root) = &self.root else { return };
        let path = self.absolute.join(rel);
        if let Ok(real) = fs::canonicalize(&path)
            && !visited.insert(real)
        {
            return;
        }
        let mut unreadable = |error: io::Error| {
            let diagnostic = Diagnostic {
                severity: api::Severity::Error,
                object: None,
                file: Some(self.name(rel)),
                message: format!("cannot read directory: {error}"),
            };
            dir_errors.insert(rel.to_path_buf(), diagnostic);
        };
        let entries = match fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(error) => {
                unreadable(error);
                return;
            }
        };
        let mut names = Vec::new();
        for entry in entries {
            match entry {
                Ok(entry) => names.push(entry.file_name()),
                Err(error) => unreadable(error),
            }
        }
        for name in names {
            if name.to_str().is_none_or(|n| n.starts_with('.')) {
                continue;
            }
            let child = rel.join(&name);
            let manifest = loader::is_manifest_file(&child);
            let absolute = self.absolute.join(&child);
            if shows_hidden_changes(&absolute) {
                links.insert(child.clone());
            }
            match root.entry(&absolute) {
                Entry::Dir { .. } => self.walk(&child, found, dir_errors, escapes, visited, links),
                // Refused manifest files are listed too: reading them
                // reports why (and keeps their last good version).
                Entry::File | Entry::Refused(_) if manifest => {
                    found.insert(child);
                }
                // A link out of the root is reported whatever its name: it
                // may be a directory of manifests that is not read.
                Entry::Refused(error @ FileError::Escapes { .. }) => {
                    escapes.insert(child.clone(), self.refusal(&child, &error));
                }
                Entry::File | Entry::Refused(_) => {}
            }
        }
    }

    /// Forgets tracked files (and, with `itself`, the file `rel`) below
    /// `rel`, e.g. after a directory was removed or replaced by a file.
    fn forget_below(&mut self, rel: &Path, itself: bool) -> bool {
        let files: Vec<PathBuf> = below(&self.files, rel)
            .filter(|p| itself || p.as_path() != rel)
            .cloned()
            .collect();
        let errors: Vec<PathBuf> = below(&self.dir_errors, rel).cloned().collect();
        let escapes: Vec<PathBuf> = below(&self.escapes, rel)
            .filter(|p| itself || p.as_path() != rel)
            .cloned()
            .collect();
        let changed = !files.is_empty() || !errors.is_empty() || !escapes.is_empty();
        let links: Vec<PathBuf> = below_set(&self.links, rel)
            .filter(|p| itself || p.as_path() != rel)
            .cloned()
            .collect();
        for path in links {
            self.links.remove(&path);
        }
        for path in files {
            self.files.remove(&path);
        }
        for path in errors {
            self.dir_errors.remove(&path);
        }
        for path in escapes {
            self.escapes.remove(&path);
        }
        changed
    }

    /// Reads one manifest file and updates its state; returns whether the
    /// output changed. Identical bytes are not parsed again.
    fn reload(&mut self, rel: &Path) -> bool {
        let version = self.read_version(rel);
        self.commit(rel, version)
    }

    /// Applies what [`Tree::read_version`] found; returns whether the
    /// output changed.
    fn commit(&mut self, rel: &Path, version: Version) -> bool {
        match version {
            Version::Unchanged => false,
            Version::HeldEmpty { since, path } => {
                if let Some(state) = self.files.get_mut(rel) {
                    state.empty_since = Some(since);
                }
                self.rechecks.push((path, since + self.empty_grace));
                false
            }
            Version::Gone => self.files.remove(rel).is_some(),
            Version::Next(next) => {
                let changed = self.files.get(rel).is_none_or(|p| !p.same_output(&next));
                self.files.insert(rel.to_path_buf(), *next);
                changed
            }
        }
    }

    /// Reads and parses one manifest file, changing nothing (so that files
    /// can be read in parallel): what its state becomes.
    fn read_version(&self, rel: &Path) -> Version {
        let path = self.absolute.join(rel);
        let name = self.name(rel);
        let previous = self.files.get(rel);
        let good = previous.and_then(|p| p.good.as_ref());
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        let read = match &self.root {
            Some(root) => self.reader.read(root, &path),
            None => Err(deadline::ReadFailure::File(FileError::Io {
                source: io::Error::other("the watched directory cannot be resolved"),
            })),
        };
        let next = match read {
            Ok(bytes) => {
                let digest = Digest::of(&bytes);
                if previous.is_some_and(|p| p.digest == Some(digest)) {
                    return Version::Unchanged;
                }
                // Truncated by a writer that has not written yet (`kubectl
                // get ... > file`)? Hold the objects for a grace period.
                if bytes.is_empty() && good.is_some_and(|g| !g.inputs.is_empty()) {
                    let since = previous.and_then(|p| p.empty_since).unwrap_or_else(Instant::now);
                    if since.elapsed() < self.empty_grace {
                        return Version::HeldEmpty { since, path };
                    }
                }
                self.counters.parses.fetch_add(1, Ordering::Relaxed);
                let good = good.cloned();
                // A cheap clone: the decoded documents are shared.
                let mut documents = previous.map(|p| p.documents.clone()).unwrap_or_default();
                let load = match std::str::from_utf8(&bytes) {
                    Ok(text) => loader::load_str_cached(&name, text, &self.loader, &mut documents),
                    Err(error) => {
                        let valid = bytes.get(..error.valid_up_to()).unwrap_or_default();
                        let line = 1 + valid.iter().filter(|&&b| b == b'\n').count();
                        Loaded {
                            inputs: Default::default(),
                            diagnostics: vec![Diagnostic::error(
                                None,
                                Some(&Source::new(name.clone(), line)),
                                "file is not valid UTF-8",
                            )],
                        }
                    }
                };
                if load.has_errors() {
                    tracing::warn!(
                        file = %name,
                        "file has errors; its last version without errors stays in force"
                    );
                    let defined = |p: &api::Sourced<api::policy::TrafficPolicy>| {
                        good.as_ref().is_some_and(|g| {
                            g.inputs.traffic_policies.iter().any(|q| {
                                q.object.metadata.namespace == p.object.metadata.namespace
                                    && q.object.metadata.name == p.object.metadata.name
                            })
                        })
                    };
                    let fail_closed = load
                        .inputs
                        .traffic_policies
                        .iter()
                        .filter(|p| !p.object.load_errors.is_empty() && !defined(p))
                        .cloned()
                        .collect();
                    FileState {
                        digest: Some(digest),
                        good,
                        rejected: Some(load.diagnostics),
                        fail_closed,
                        empty_since: None,
                        documents,
                    }
                } else {
                    FileState {
                        digest: Some(digest),
                        good: Some(load),
                        rejected: None,
                        fail_closed: Vec::new(),
                        empty_since: None,
                        documents,
                    }
                }
            }
            // Absent (and not a dangling link): the file was deleted.
            Err(deadline::ReadFailure::File(error)) if error.is_not_found() => {
                return Version::Gone;
            }
            Err(error) => {
                tracing::warn!(file = %name, %error, "file not read; its last good version stays in force");
                FileState {
                    digest: None,
                    good: good.cloned(),
                    fail_closed: Vec::new(),
                    rejected: Some(vec![Diagnostic {
                        severity: api::Severity::Error,
                        object: None,
                        file: Some(name),
                        message: error.to_string(),
                    }]),
                    empty_since: None,
                    documents: Default::default(),
                }
            }
        };
        Version::Next(Box::new(next))
    }
}

/// `f(i)` for every `i` in `0..n` on `threads` scoped threads, in index
/// order. Each thread takes the next index nobody has taken when it is
/// done with one (not a fixed share): files differ in size, and on a busy
/// machine one thread may be descheduled for a while; the others read on,
/// and all finish within about one file of each other. `None` only for an
/// index no thread reached (none: every thread runs until all are taken).
fn claimed<T: Send>(n: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<Option<T>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<T>> = std::iter::repeat_with(|| None).take(n).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (next, f) = (&next, &f);
                scope.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        done.push((i, f(i)));
                    }
                    done
                })
            })
            .collect();
        for worker in workers {
            // A panic while parsing is a bug; surface it as the same panic.
            let done = worker.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            for (i, value) in done {
                out[i] = Some(value);
            }
        }
    });
    out
}

/// What reading a file found (see [`Tree::commit`]).
enum Version {
    /// The bytes of the version in force: nothing to do.
    Unchanged,
    /// Emptied while its good version has objects: kept for the grace
    /// period from `since`, then `path` is read again.
    HeldEmpty { since: Instant, path: PathBuf },
    /// Deleted.
    Gone,
    /// Boxed: a file's state is large, and a directory's versions are
    /// collected before they are committed.
    Next(Box<FileState>),
}

/// Whether a visible entry can show a change made under a hidden path: a
/// symbolic link, or a regular file with another name (a hard link: `a.yaml`
/// and `.a.yaml` the same file, written through the hidden one, gives an
/// event on the hidden name only).
fn shows_hidden_changes(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink() || (m.is_file() && m.nlink() > 1))
}

/// The keys of `map` equal to `rel` or below it (all keys for `""`).
fn below<'a, V>(map: &'a BTreeMap<PathBuf, V>, rel: &'a Path) -> impl Iterator<Item = &'a PathBuf> {
    map.range::<Path, _>((std::ops::Bound::Included(rel), std::ops::Bound::Unbounded))
        .map(|(k, _)| k)
        .take_while(move |k| k.starts_with(rel))
}

/// The paths in `set` equal to `rel` or below it (all for `""`).
fn below_set<'a>(set: &'a BTreeSet<PathBuf>, rel: &'a Path) -> impl Iterator<Item = &'a PathBuf> {
    set.range::<Path, _>((std::ops::Bound::Included(rel), std::ops::Bound::Unbounded))
        .take_while(move |k| k.starts_with(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(i: usize, path: &str) -> String {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r{i}\n  namespace: ns\nspec:\n  rules:\n  - matches:\n    - path: {{type: PathPrefix, value: {path}}}\n"
        )
    }

    /// A file edited in one document: the next load decodes that document
    /// only, and publishes what a full load of the directory gives.
    #[test]
    fn a_slow_file_does_not_hold_up_the_files_after_it() {
        // File 0 is slow: it is done only once every other file is. Each
        // thread taking the next file, the other thread reads them all
        // meanwhile; with a fixed share (every other file), files 2, 4, ...
        // would wait behind file 0 and it would give up.
        let n = 9;
        let others = std::sync::atomic::AtomicUsize::new(0);
        let read = claimed(n, 2, |i| {
            if i > 0 {
                others.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                return i;
            }
            let until = Instant::now() + Duration::from_secs(10);
            while others.load(std::sync::atomic::Ordering::SeqCst) < n - 1 {
                assert!(Instant::now() < until, "file 0 waited for files held behind it");
                std::thread::sleep(Duration::from_millis(1));
            }
            0
        });
        assert_eq!(
            read,
            (0..n).map(Some).collect::<Vec<_>>(),
            "every file once, in order"
        );
    }

    #[test]
    fn an_edited_file_decodes_only_its_changed_document() {
        let dir = std::env::temp_dir().join(format!("provider-decoded-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("routes.yaml");
        let mut documents: Vec<String> = (0..5).map(|i| route(i, "/a")).collect();
        fs::write(&file, documents.join("---\n")).expect("write");

        let mut tree =
            Tree::new(dir.clone(), Duration::from_secs(1), loader::Options::default()).expect("tree");
        assert!(tree.rescan().expect("rescan"));
        let state = |tree: &Tree| {
            let documents = &tree.files[Path::new("routes.yaml")].documents;
            (documents.decoded(), documents.reused())
        };
        assert_eq!(state(&tree), (5, 0));

        documents[2] = route(2, "/edited");
        fs::write(&file, documents.join("---\n")).expect("write");
        let batch = Batch {
            full: false,
            paths: [tree.absolute.join("routes.yaml")].into_iter().collect(),
        };
        assert!(tree.apply(&batch));
        assert_eq!(state(&tree), (1, 4), "only the edited document is decoded");
        let full = loader::load_path(&dir).expect("full load");
        assert_eq!(tree.loaded(), full);
        assert!(
            tree.loaded().inputs.http_routes[2]
                .object
                .spec
                .rules
                .as_ref()
                .is_some_and(|rules| format!("{rules:?}").contains("/edited"))
        );
        let _ = fs::remove_dir_all(&dir);
    }

    fn batch(tree: &Tree, rels: &[&str]) -> Batch {
        Batch {
            full: false,
            paths: rels.iter().map(|r| tree.absolute.join(r)).collect(),
        }
    }

    /// An editor's atomic save (`.b.yaml.tmp` written, renamed to
    /// `b.yaml`) names a hidden path: only `b.yaml` is read, not every
    /// file of the directory (it was a full rescan: an edit cost every
    /// file at 10,000 routes, 0.4-2.3 s at 100,000).
    #[test]
    fn an_atomic_save_reads_only_the_saved_file() {
        let dir = std::env::temp_dir().join(format!("provider-atomic-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        for (i, f) in ["a.yaml", "b.yaml", "c.yaml"].iter().enumerate() {
            fs::write(dir.join(f), route(i, "/a")).expect("write");
        }
        let mut tree =
            Tree::new(dir.clone(), Duration::from_secs(1), loader::Options::default()).expect("tree");
        assert!(tree.rescan().expect("rescan"));
        let before = tree.counts();
        fs::write(dir.join(".b.yaml.tmp"), route(1, "/saved")).expect("write");
        fs::rename(dir.join(".b.yaml.tmp"), dir.join("b.yaml")).expect("rename");
        assert!(tree.apply(&batch(&tree, &[".b.yaml.tmp", "b.yaml"])));
        let after = tree.counts();
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            (1, 1),
            "one file read and parsed"
        );
        assert_eq!(tree.loaded(), loader::load_path(&dir).expect("full load"));
        // A hidden file, and no link in the directory: nothing is read.
        fs::write(dir.join(".notes.yaml"), route(9, "/x")).expect("write");
        let before = tree.counts();
        assert!(!tree.apply(&batch(&tree, &[".notes.yaml"])));
        assert_eq!(tree.counts(), before, "no file read");
        let _ = fs::remove_dir_all(&dir);
    }

    /// A change under a hidden path reaches a visible link into it (a
    /// Kubernetes ConfigMap volume swaps `..data`): the link is read
    /// again, the other files are not.
    #[test]
    fn a_hidden_change_rereads_only_the_links_into_it() {
        let dir = std::env::temp_dir().join(format!("provider-hidden-link-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("..v1")).expect("temp dir");
        fs::create_dir_all(dir.join("..v2")).expect("temp dir");
        fs::create_dir_all(dir.join("sub")).expect("temp dir");
        fs::write(dir.join("..v1/a.yaml"), route(0, "/v1")).expect("write");
        fs::write(dir.join("..v2/a.yaml"), route(0, "/v2")).expect("write");
        std::os::unix::fs::symlink("..v1", dir.join("..data")).expect("link");
        std::os::unix::fs::symlink("..data/a.yaml", dir.join("a.yaml")).expect("link");
        // A directory link too: its files are read through it.
        std::os::unix::fs::symlink("..data", dir.join("linked")).expect("link");
        for i in 1..4 {
            fs::write(dir.join(format!("sub/r{i}.yaml")), route(i, "/plain")).expect("write");
        }
        let mut tree =
            Tree::new(dir.clone(), Duration::from_secs(1), loader::Options::default()).expect("tree");
        assert!(tree.rescan().expect("rescan"));
        let before = tree.counts();
        // The swap: `..data` now points at `..v2` (renamed into place).
        std::os::unix::fs::symlink("..v2", dir.join("..data_tmp")).expect("link");
        fs::rename(dir.join("..data_tmp"), dir.join("..data")).expect("rename");
        assert!(tree.apply(&batch(&tree, &["..data_tmp", "..data"])));
        let after = tree.counts();
        assert_eq!(
            after.0 - before.0,
            2,
            "a.yaml and linked/a.yaml read, not the three files in sub/"
        );
        let loaded = tree.loaded();
        assert!(format!("{:?}", loaded.inputs.http_routes[0].object.spec.rules).contains("/v2"));
        // Both links name r0: the second is a duplicate, as a full load says.
        assert_eq!(loaded, loader::load_path(&dir).expect("full load"));
        let _ = fs::remove_dir_all(&dir);
    }

    /// A visible file hard-linked to a hidden name, written through the
    /// hidden one: the only event names the hidden path, and the visible
    /// file is read again (it is re-checked as a link is).
    #[test]
    fn a_write_through_a_hidden_hard_link_is_seen() {
        let dir = std::env::temp_dir().join(format!("provider-hard-link-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        fs::write(dir.join("a.yaml"), route(0, "/before")).expect("write");
        fs::write(dir.join("b.yaml"), route(1, "/plain")).expect("write");
        fs::hard_link(dir.join("a.yaml"), dir.join(".a.yaml")).expect("hard link");
        let mut tree =
            Tree::new(dir.clone(), Duration::from_secs(1), loader::Options::default()).expect("tree");
        assert!(tree.rescan().expect("rescan"));
        let before = tree.counts();
        // In place (same inode), through the hidden name.
        fs::write(dir.join(".a.yaml"), route(0, "/after")).expect("write");
        assert!(tree.apply(&batch(&tree, &[".a.yaml"])), "the change is seen");
        assert_eq!(tree.counts().0 - before.0, 1, "a.yaml read again, not b.yaml");
        let loaded = tree.loaded();
        assert!(format!("{:?}", loaded.inputs.http_routes[0].object.spec.rules).contains("/after"));
        assert_eq!(loaded, loader::load_path(&dir).expect("full load"));
        let _ = fs::remove_dir_all(&dir);
    }

    /// Snapshots share the provider's objects (see `api::Sourced`): two
    /// snapshots of an unchanged tree hold the same allocations; an edit
    /// gives the edited document a new object while its neighbours, in
    /// its file and in others, keep theirs; and the objects live exactly
    /// as long as the provider's state or a snapshot points at them (the
    /// per-file `DocumentCache` holds the same ones, no copy of its own).
    #[test]
    fn snapshots_share_the_objects_of_unchanged_documents() {
        use std::sync::{Arc, Weak};

        let dir = std::env::temp_dir().join(format!("provider-shared-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        let (a, b) = (dir.join("a.yaml"), dir.join("b.yaml"));
        let mut documents: Vec<String> = (0..3).map(|i| route(i, "/a")).collect();
        fs::write(&a, documents.join("---\n")).expect("write");
        fs::write(&b, route(9, "/b")).expect("write");
        let mut tree =
            Tree::new(dir.clone(), Duration::from_secs(1), loader::Options::default()).expect("tree");
        assert!(tree.rescan().expect("rescan"));
        let first = tree.loaded();
        assert!(!tree.rescan().expect("rescan"), "nothing changed");
        let second = tree.loaded();
        let routes = |l: &Loaded| {
            l.inputs
                .http_routes
                .iter()
                .map(|r| Arc::clone(&r.object))
                .collect::<Vec<_>>()
        };
        let (one, two) = (routes(&first), routes(&second));
        assert_eq!(one.len(), 4);
        assert!(
            one.iter().zip(&two).all(|(x, y)| Arc::ptr_eq(x, y)),
            "same tree, same objects"
        );

        documents[1] = route(1, "/edited");
        fs::write(&a, documents.join("---\n")).expect("write");
        let batch = Batch {
            full: false,
            paths: [tree.absolute.join("a.yaml")].into_iter().collect(),
        };
        assert!(tree.apply(&batch));
        let three = routes(&tree.loaded());
        assert!(!Arc::ptr_eq(&one[1], &three[1]), "the edited route is new");
        for i in [0, 2, 3] {
            assert!(Arc::ptr_eq(&one[i], &three[i]), "route {i} kept its object");
        }

        // Held by the file's good load and its document cache, nothing
        // else, once the snapshots are gone.
        drop((first, second, one, two));
        assert!(
            three.iter().all(|r| Arc::strong_count(r) == 3),
            "this test, the load, the cache"
        );
        let weak: Vec<Weak<_>> = three.iter().map(Arc::downgrade).collect();
        drop(three);
        assert!(
            weak.iter().all(|w| w.upgrade().is_some()),
            "the provider holds them"
        );
        fs::remove_file(&a).expect("remove");
        assert!(tree.apply(&batch));
        assert!(
            weak[..3].iter().all(|w| w.upgrade().is_none()),
            "gone with their file"
        );
        assert!(weak[3].upgrade().is_some(), "the other file's route stays");
        let _ = fs::remove_dir_all(&dir);
    }
}
