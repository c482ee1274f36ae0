//! Loading manifests from files and directories.
//!
//! [`load_path`] reads a file, or every `*.yaml`, `*.yml` and `*.json` file
//! under a directory (recursively, in sorted path order); [`load_str`] reads
//! one file's text. Both return a [`Loaded`]: the typed objects of every
//! document that could be read, and a [`Diagnostic`] for every problem —
//! a bad document never stops the others from loading.
//!
//! How a file is read:
//! - A YAML file is a stream of documents separated by `---` lines; the stream
//!   is split on those lines before parsing (see `split.rs`), so a syntax error
//!   loses only its own document. Empty documents are skipped silently.
//! - A `.json` file is one document.
//! - `kind: List` (or a typed list such as `ServiceList`) is expanded into its
//!   `items`, each keeping its own line.
//! - Each document is dispatched on `apiVersion` and `kind`; unknown kinds
//!   are reported as warnings, except the kinds an extension server
//!   registered ([`Options::extension_kinds`]), which are kept as JSON
//!   ([`crate::ExtensionObject`]). Known kinds get a typed parse whose errors
//!   name the field path and the line of the offending value. Fields the
//!   typed object does not know are reported as warnings (they would
//!   otherwise be dropped silently); `status` is ignored.
//! - A name or namespace Kubernetes would refuse (DNS-1123 subdomain for
//!   most kinds, DNS-1035 label for Services, DNS-1123 label for Namespaces
//!   and namespaces) refuses the object: generated Envoy names are built
//!   from them (see `translate::naming`).
//! - In an HTTPRoute or GRPCRoute, a value inside `spec.rules[i]` that does
//!   not read (an unknown enum value, a wrong type) is neutralised and
//!   recorded in [`crate::Sourced::unreadable`], and the parse retried, so
//!   that every such value is reported and the route is still loaded (its
//!   rule is fenced by the translator) instead of dropped. Elsewhere a typed
//!   parse error drops the object (TrafficPolicy and GatewayExtension keep a
//!   fail-closed fallback).
//! - Namespaced objects without a namespace get `default`; cluster-scoped
//!   objects lose any namespace. A Secret's `stringData` is merged into
//!   `data`. The singular `spec.useDefaultGateway` of a route is read as
//!   `spec.useDefaultGateways`, with a warning.
//! - Of objects with the same kind, namespace and name, the first one read
//!   wins; the later ones are reported and dropped.
//!
//! Lines cost: recording a span for every node of the tree costs more than
//! the parse itself. So each document is first read without spans (a
//! `.json` file by `serde_json` when the YAML reader would read it to the
//! same tree) and loaded into a scratch sink; only a document that yields a
//! diagnostic (or holds several documents, or is a `List`, whose items need
//! their own lines) is read again with spans and loaded the spanned way.
//! The result is the same either way (`loader/fast_path_tests.rs` compares
//! both on every translator fixture and on broken inputs).
//!
//! The spanless read of a YAML document is itself done by the fast reader
//! of `loader/fast_yaml.rs` when the document is in the plain subset of YAML
//! manifests use (several times faster than serde-saphyr), and by
//! serde-saphyr otherwise; the fast reader never reports anything, so every
//! diagnostic still comes from serde-saphyr's spanned read.
//!
//! A tree from the fast reader or from `serde_json` (no duplicate keys) is
//! decoded into its typed object directly (`loader/decode.rs`: no
//! intermediate `serde_json::Value`, the unknown-field check walks the
//! object's serialisation beside the tree); a document it cannot take
//! (anything that would be a diagnostic, a neutralised value or a
//! fallback) bails to the decode through `serde_json::Value`, and so to
//! the spanned path when that yields a diagnostic.
//!
//! [`load_str_cached`] keeps each cleanly loaded document's objects in a
//! [`DocumentCache`] (one per file, held by the caller), so that a file
//! loaded again decodes only the documents whose text changed.
//!
//! Parsing hostile nesting needs a large stack: loads run on long-lived
//! loader workers with one (see [`on_large_stack`]).
//!
//! Every object's [`Source`] line is the first line of its document that is
//! not blank, a comment, a directive or a `---` marker (for a `List` item,
//! the item's first line).

mod cache;
mod decode;
#[cfg(test)]
mod fast_path_tests;
mod fast_yaml;
mod objects;
mod split;
mod tree;

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_saphyr::{MessageFormatter, NonFiniteFloatPolicy, UserMessageFormatter};

use crate::files::{self, Entry, FileError, Root};
use crate::{Diagnostic, Inputs, Severity, Source};
pub use cache::DocumentCache;
use objects::Sink;
use tree::Node;

/// The result of a load: every object read, and every problem found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Loaded {
    pub inputs: Inputs,
    pub diagnostics: Vec<Diagnostic>,
}

impl Loaded {
    /// Whether any diagnostic is an error that lost something: an error
    /// about an unreadable value of a route rule that was kept (and is
    /// fenced, see [`crate::Unreadable`]), of a route hostname or parentRef
    /// (neutralised), of a listener (refused, its Gateway kept), or about an HTTPProxy spec that
    /// does not read (the proxy is kept, invalid, see
    /// [`crate::httpproxy`]), does not count, since the object is loaded
    /// as fully as it can be. The loader emits exactly one error
    /// per unreadable value of a kept route, so the count says it.
    pub fn has_errors(&self) -> bool {
        let errors = self
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count();
        let fenced: usize = self
            .inputs
            .http_routes
            .iter()
            .map(|r| r.unreadable.len())
            .chain(self.inputs.grpc_routes.iter().map(|r| r.unreadable.len()))
            // A listener value that does not read refuses that listener
            // only (one error each), the Gateway or ListenerSet is kept.
            .chain(self.inputs.gateways.iter().map(|g| g.unreadable.len()))
            .chain(self.inputs.listener_sets.iter().map(|s| s.unreadable.len()))
            // An HTTPProxy whose spec does not read is kept too (one error
            // each): the translator reports it and fences what routes to it.
            .chain(
                self.inputs
                    .http_proxies
                    .iter()
                    .map(|p| usize::from(!p.object.load_errors.is_empty())),
            )
            .sum();
        errors > fenced
    }
}

/// What a load accepts beyond the built-in kinds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `(group, kind)` of the kinds an extension server registered: their
    /// documents are kept as JSON in [`Inputs::extension_resources`]
    /// instead of being reported as unknown kinds. Empty: today's
    /// behaviour (every such document is an unknown kind).
    pub extension_kinds: std::collections::BTreeSet<(String, String)>,
    /// `(group, kind)` → the version it was registered at
    /// (`extensionManager.resources[].version`). Not used by the loader (a
    /// file is read at whatever version it names); Kubernetes mode watches
    /// each registered kind at exactly this version, the shape its
    /// extension server expects.
    pub extension_versions: std::collections::BTreeMap<(String, String), String>,
}

/// A path that cannot be read at all. Problems inside a directory (an
/// unreadable file, a broken document) are diagnostics instead.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Loads a file (whatever its extension), or every manifest file under a
/// directory, recursively and in sorted path order. Entries whose name
/// starts with `.` are skipped (editor files, Kubernetes' `..data` links).
pub fn load_path(path: &Path) -> Result<Loaded, LoadError> {
    load_path_with(path, &Options::default())
}

/// [`load_path`] with [`Options`].
pub fn load_path_with(path: &Path, options: &Options) -> Result<Loaded, LoadError> {
    let read_error = |source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    };
    let metadata = fs::metadata(path).map_err(read_error)?;
    let mut sink = Sink::with_options(options);
    if metadata.is_dir() {
        let root = Root::new(path).map_err(read_error)?;
        let mut files = Vec::new();
        let mut visited = HashSet::new();
        walk(&root, path, true, &mut files, &mut visited, &mut sink).map_err(read_error)?;
        files.sort();
        sink = on_large_stack(move || {
            for file in files {
                load_file_into(&mut sink, &root, &file);
            }
            sink
        });
    } else {
        let bytes = files::read_file(path).map_err(|e| match e {
            FileError::Io { source } | FileError::Unresolvable { source } => read_error(source),
            other => read_error(io::Error::other(other)),
        })?;
        let name = path.display().to_string();
        sink = on_large_stack(move || {
            load_bytes_into(&mut sink, &name, &bytes);
            sink
        });
    }
    Ok(finish(sink))
}

/// Loads one file's text. `file` names it in every [`Source`] and
/// diagnostic; a name ending in `.json` selects JSON, anything else YAML.
pub fn load_str(file: &str, text: &str) -> Loaded {
    load_str_with(file, text, &Options::default())
}

/// [`load_str`] with [`Options`].
pub fn load_str_with(file: &str, text: &str, options: &Options) -> Loaded {
    load_owned(file, text, Sink::with_options(options), Reading::Fast)
}

/// [`load_str_with`] keeping each document's decoded objects in `cache`
/// (one per file, kept by the caller between loads of that file): a
/// document whose text was decoded by the previous load of the file is not
/// decoded again (see [`DocumentCache`]). The result is [`load_str_with`]'s.
pub fn load_str_cached(file: &str, text: &str, options: &Options, cache: &mut DocumentCache) -> Loaded {
    let mut sink = Sink::with_options(options);
    let mut taken = std::mem::take(cache);
    taken.begin(file, options);
    let (file, text) = (file.to_string(), text.to_string());
    let (sink, mut taken) = on_large_stack(move || {
        load_text_into(&mut sink, &file, &text, Reading::Fast, Some(&mut taken));
        (sink, taken)
    });
    taken.end();
    *cache = taken;
    finish(sink)
}

/// [`load_str`] with serde-saphyr reading every YAML document (no fast
/// YAML reader): the reference `examples/load_scale.rs` times and
/// `tests/fast_yaml_differential.rs` compares with. Not an API.
#[doc(hidden)]
pub fn load_str_without_fast_yaml(file: &str, text: &str) -> Loaded {
    load_owned(file, text, Sink::default(), Reading::Saphyr)
}

/// [`load_str`] with every typed object decoded through
/// `serde_json::Value` (the decode before `loader/decode.rs`), for
/// `examples/load_scale.rs` and the differential tests. Not an API.
#[doc(hidden)]
pub fn load_str_reference_decode(file: &str, text: &str) -> Loaded {
    load_owned(file, text, Sink::default(), Reading::FastReferenceDecode)
}

/// One document of a stream read both ways, for
/// `tests/fast_yaml_differential.rs`: the fast reader's tree (`None`: not
/// in its subset) and serde-saphyr's spanless tree (as the loader reads it),
/// each rendered with `Debug`. Not an API.
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadBothWays {
    /// 1-based line of the document's first line.
    pub first_line: usize,
    pub fast: Option<String>,
    /// `Err`: serde-saphyr refuses the document, or reads several.
    pub saphyr: Result<String, SaphyrRefusal>,
}

/// Why serde-saphyr gives no tree for a document in [`read_both_ways`].
/// Not an API.
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SaphyrRefusal {
    #[error("not exactly one document")]
    NotOneDocument,
    /// serde-saphyr's message (its error is neither `Clone` nor `Eq`).
    #[error("{message}")]
    Refused { message: String },
}

/// How many documents of a YAML stream the fast reader reads, of how many
/// (for `examples/load_scale.rs`: the bare cost of the fast reader). Not an
/// API.
#[doc(hidden)]
pub fn fast_yaml_documents(text: &str) -> (usize, usize) {
    let chunks = split::split(text);
    let documents: Vec<_> = chunks.iter().filter(|c| c.content_line.is_some()).collect();
    let read = documents
        .iter()
        .filter(|c| fast_yaml::read(c.text).is_some())
        .count();
    (read, documents.len())
}

/// Every document of a YAML stream (split as the loader splits it) read
/// both ways; see [`ReadBothWays`]. Not an API.
#[doc(hidden)]
pub fn read_both_ways(text: &str) -> Vec<ReadBothWays> {
    let text = text.to_string();
    on_large_stack(move || {
        split::split(&text)
            .into_iter()
            .filter(|chunk| chunk.content_line.is_some())
            .map(|chunk| {
                let fast = fast_yaml::read(chunk.text).map(|node| format!("{node:?}"));
                let saphyr = match serde_saphyr::from_multiple_with_options::<tree::PlainNode>(
                    chunk.text,
                    parse_options(),
                ) {
                    Ok(mut documents) => match (documents.pop(), documents.pop()) {
                        (Some(tree::PlainNode(node)), None) => Ok(format!("{node:?}")),
                        _ => Err(SaphyrRefusal::NotOneDocument),
                    },
                    Err(error) => Err(SaphyrRefusal::Refused {
                        message: error.to_string(),
                    }),
                };
                ReadBothWays {
                    first_line: chunk.first_line,
                    fast,
                    saphyr,
                }
            })
            .collect()
    })
}

/// [`load_str`] through the spanned path only (every document read with
/// spans): the reference the fast path is compared with.
#[cfg(test)]
fn load_str_spanned(file: &str, text: &str) -> Loaded {
    load_owned(file, text, Sink::default(), Reading::Spanned)
}

/// Merges separate loads (e.g. one per file, in path order) into one, with
/// the duplicate check across them: the first object wins.
pub fn merge(parts: impl IntoIterator<Item = Loaded>) -> Loaded {
    let mut sink = Sink::default();
    for part in parts {
        sink.diagnostics.extend(part.diagnostics);
        sink.add_all(part.inputs);
    }
    finish(sink)
}

/// Whether [`load_path`] reads `path` when it is found in a directory:
/// `*.yaml`, `*.yml` or `*.json` (any case), not hidden.
pub fn is_manifest_file(path: &Path) -> bool {
    let hidden = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_none_or(|n| n.starts_with('.'));
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    !hidden && matches!(extension.as_deref(), Some("yaml" | "yml" | "json"))
}

/// Loads `text` into `sink` on a loader worker (see [`on_large_stack`]):
/// the text is copied, since the worker outlives the call.
fn load_owned(file: &str, text: &str, mut sink: Sink, reading: Reading) -> Loaded {
    let (file, text) = (file.to_string(), text.to_string());
    let sink = on_large_stack(move || {
        load_text_into(&mut sink, &file, &text, reading, None);
        sink
    });
    finish(sink)
}

/// Stack for parsing: building the spanned tree takes tens of kilobytes of
/// stack per nesting level in debug builds (serde-saphyr's deserializer
/// frames, the spanned visitor, the typed parse of values kept as JSON),
/// and serde-saphyr allows 64 levels (its `max_depth` budget; deeper
/// documents are refused with a diagnostic), more than a 2 MiB thread
/// (tokio's, the test harness's) holds. The reservation is virtual; only
/// the pages used are committed.
const PARSE_STACK_BYTES: usize = 64 << 20;

/// A job for a loader worker.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Idle loader workers: threads with [`PARSE_STACK_BYTES`] of stack, kept
/// between loads. A load takes one (starting one only when none is idle)
/// and gives it back, so a process starts as many as it ever runs loads at
/// once, instead of a thread per load (the Kubernetes provider loads each
/// object on its own: a thread start cost more than the load).
static IDLE_WORKERS: std::sync::Mutex<Vec<std::sync::mpsc::Sender<Job>>> = std::sync::Mutex::new(Vec::new());

/// How many loader workers this process has started.
static WORKERS_STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

thread_local! {
    /// Whether this thread is a loader worker (a nested load runs inline).
    static ON_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// How many loader workers this process has started (see
/// [`on_large_stack`]), for `tests/load_stack.rs`. Not an API.
#[doc(hidden)]
pub fn workers_started() -> usize {
    WORKERS_STARTED.load(std::sync::atomic::Ordering::Relaxed)
}

fn start_worker() -> Option<std::sync::mpsc::Sender<Job>> {
    let (jobs, queue) = std::sync::mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("portcullis-load".to_string())
        .stack_size(PARSE_STACK_BYTES)
        .spawn(move || {
            ON_WORKER.set(true);
            // Ends when the sender is dropped (never, for a kept worker).
            while let Ok(job) = queue.recv() {
                job();
            }
        })
        .ok()?;
    WORKERS_STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Some(jobs)
}

/// Runs `f` on an idle loader worker (one with [`PARSE_STACK_BYTES`] of
/// stack; started if none is idle) and waits for it; on the current thread
/// when that is a worker already, or when no worker can be started. A
/// panic in `f` is propagated unchanged (the worker survives it).
fn on_large_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    if ON_WORKER.get() {
        return f();
    }
    let (reply, answer) = std::sync::mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        // The caller waits for this; it cannot have gone.
        let _ = reply.send(result);
    });
    let mut job = Some(job);
    let idle = IDLE_WORKERS.lock().ok().and_then(|mut idle| idle.pop());
    let mut worker = None;
    for candidate in [idle, None] {
        let (Some(sender), Some(pending)) = (candidate.or_else(start_worker), job.take()) else {
            break;
        };
        match sender.send(pending) {
            Ok(()) => {
                worker = Some(sender);
                break;
            }
            // A worker that is gone gives the job back.
            Err(std::sync::mpsc::SendError(back)) => job = Some(back),
        }
    }
    if let Some(pending) = job {
        // No worker could take it: run here, as best we can.
        pending();
    }
    let result = answer.recv();
    if let (Some(worker), Ok(mut idle)) = (worker, IDLE_WORKERS.lock()) {
        idle.push(worker);
    }
    match result {
        Ok(Ok(result)) => result,
        Ok(Err(payload)) => std::panic::resume_unwind(payload),
        // The job ran (here or on a worker) and replied, or its worker
        // died without replying: only an abort does that, which takes this
        // process with it.
        Err(_) => unreachable!("a loader job ended without replying"),
    }
}

/// Every message and object label goes through [`sanitize`]: they quote
/// input text, which may hold line breaks and control characters.
fn finish(sink: Sink) -> Loaded {
    let mut diagnostics = sink.diagnostics;
    for diagnostic in &mut diagnostics {
        diagnostic.message = sanitize(&diagnostic.message);
        if let Some(object) = &mut diagnostic.object {
            *object = sanitize(object);
        }
    }
    Loaded {
        inputs: sink.inputs,
        diagnostics,
    }
}

/// A diagnostic about a whole file or directory (no line).
fn path_error(path: &Path, message: String) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        object: None,
        file: Some(path.display().to_string()),
        message,
    }
}

/// Collects manifest files under `dir`. Only a failure to read `dir` itself
/// when `top` is an error; everything below becomes a diagnostic. Entries
/// are judged by [`Root::entry`]: links are followed only inside the root,
/// and a manifest name on anything but a regular file is reported.
fn walk(
    root: &Root,
    dir: &Path,
    top: bool,
    files: &mut Vec<PathBuf>,
    visited: &mut HashSet<PathBuf>,
    sink: &mut Sink,
) -> io::Result<()> {
    // Symbolic links may form loops; visit each real directory once.
    if let Ok(real) = fs::canonicalize(dir)
        && !visited.insert(real)
    {
        return Ok(());
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if top => return Err(error),
        Err(error) => {
            sink.diagnostics
                .push(path_error(dir, format!("cannot read directory: {error}")));
            return Ok(());
        }
    };
    let mut paths = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => paths.push(entry.path()),
            Err(error) => sink
                .diagnostics
                .push(path_error(dir, format!("cannot read directory: {error}"))),
        }
    }
    paths.sort();
    for path in paths {
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_none_or(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        match root.entry(&path) {
            Entry::Dir { .. } => walk(root, &path, false, files, visited, sink)?,
            Entry::File => {
                if is_manifest_file(&path) {
                    files.push(path);
                }
            }
            // A link out of the root is reported whatever its name: it may
            // be a directory of manifests that is silently not read.
            Entry::Refused(error @ FileError::Escapes { .. }) => {
                sink.diagnostics.push(path_error(&path, error.to_string()));
            }
            Entry::Refused(error) => {
                if is_manifest_file(&path) {
                    sink.diagnostics.push(path_error(&path, error.to_string()));
                }
            }
        }
    }
    Ok(())
}

fn load_file_into(sink: &mut Sink, root: &Root, path: &Path) {
    match root.read(path) {
        Ok(bytes) => load_bytes_into(sink, &path.display().to_string(), &bytes),
        Err(error) => sink.diagnostics.push(path_error(path, error.to_string())),
    }
}

fn load_bytes_into(sink: &mut Sink, file: &str, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => load_text_into(sink, file, text, Reading::Fast, None),
        Err(error) => {
            let valid = bytes.get(..error.valid_up_to()).unwrap_or_default();
            let line = 1 + valid.iter().filter(|&&b| b == b'\n').count();
            sink.diagnostics.push(Diagnostic::error(
                None,
                Some(&Source::new(file, line)),
                "file is not valid UTF-8; ignored",
            ));
        }
    }
}

/// How documents are read first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    /// Spanned only (the reference of `fast_path_tests.rs`).
    Spanned,
    /// [`load_fast`] with serde-saphyr only (the reference of the fast
    /// YAML reader).
    Saphyr,
    /// [`load_fast`] with the fast YAML reader first: what loads do.
    Fast,
    /// [`Reading::Fast`] but every typed object decoded the reference way
    /// (through `serde_json::Value`), never by `loader/decode.rs`: what
    /// `examples/load_scale.rs` compares with.
    FastReferenceDecode,
}

/// Tries [`load_fast`] first unless `reading` says spanned only; with a
/// cache, a document decoded before is taken from it.
fn load_text_into(
    sink: &mut Sink,
    file: &str,
    text: &str,
    reading: Reading,
    mut cache: Option<&mut DocumentCache>,
) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let is_json = Path::new(file)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if is_json {
        load_json_into(sink, file, text, reading, cache);
        return;
    }
    for chunk in split::split(text) {
        let Some(content_line) = chunk.content_line else {
            continue; // blank, comments only
        };
        if reading != Reading::Spanned
            && fast_cached(sink, cache.as_deref_mut(), chunk.text, content_line, |sink| {
                load_fast(sink, file, chunk.text, content_line, reading)
            })
        {
            continue;
        }
        match parse_yaml(chunk.text, chunk.first_line) {
            Ok(documents) => load_documents(sink, file, &documents, content_line),
            Err((line, message)) => {
                let line = line.unwrap_or(content_line);
                sink.diagnostics.push(Diagnostic::error(
                    None,
                    Some(&Source::new(file, line)),
                    format!("invalid YAML: {message}"),
                ));
            }
        }
    }
}

/// The fast path of one document through `cache`: its objects from the
/// cache when its text was decoded before, else `fast(sink)` (which adds
/// them when the document loads cleanly) and the result kept. Whether the
/// document is done.
fn fast_cached(
    sink: &mut Sink,
    cache: Option<&mut DocumentCache>,
    text: &str,
    content_line: usize,
    fast: impl FnOnce(&mut Sink) -> Option<Inputs>,
) -> bool {
    let Some(cache) = cache else {
        return match fast(sink) {
            Some(inputs) => {
                sink.add_all(inputs);
                true
            }
            None => false,
        };
    };
    let key = cache.key(text);
    if let Some(inputs) = cache.take(key, content_line) {
        sink.add_all(inputs);
        return true;
    }
    cache.count_decoded();
    match fast(sink) {
        Some(inputs) => {
            cache.keep(key, content_line, &inputs);
            sink.add_all(inputs);
            true
        }
        None => false,
    }
}

/// JSON goes through the YAML parser first (JSON is YAML, and that parser
/// knows lines); what it cannot read, `serde_json` reads or reports.
fn load_json_into(
    sink: &mut Sink,
    file: &str,
    text: &str,
    reading: Reading,
    cache: Option<&mut DocumentCache>,
) {
    let Some(content_line) = split::first_content_line(text) else {
        return;
    };
    if reading != Reading::Spanned
        && fast_cached(sink, cache, text, content_line, |sink| {
            load_fast_json(sink, file, text, content_line, reading)
                .or_else(|| load_fast(sink, file, text, content_line, reading))
        })
    {
        return;
    }
    let yaml_error = match parse_yaml(text, 1) {
        Ok(documents) => {
            load_documents(sink, file, &documents, content_line);
            return;
        }
        Err(error) => error,
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => {
            // Valid JSON the YAML reader refused (e.g. a duplicate key, where
            // JSON keeps the last value): say so, since lines are now lost.
            let (line, reason) = yaml_error;
            sink.diagnostics.push(Diagnostic::warning(
                None,
                Some(&Source::new(file, line.unwrap_or(content_line))),
                format!("{reason}; read as plain JSON, lines inside this document are approximate"),
            ));
            let root = Node::from_json(&value, content_line);
            objects::load_document(sink, file, &root, content_line, 0);
        }
        Err(error) => {
            let line = if error.line() > 0 {
                error.line()
            } else {
                content_line
            };
            let full = error.to_string();
            let suffix = format!(" at line {} column {}", error.line(), error.column());
            let message = full.strip_suffix(&suffix).unwrap_or(&full);
            sink.diagnostics.push(Diagnostic::error(
                None,
                Some(&Source::new(file, line)),
                format!("invalid JSON: {message}"),
            ));
        }
    }
}

fn load_documents(sink: &mut Sink, file: &str, documents: &[Node], content_line: usize) {
    for (index, root) in documents.iter().enumerate() {
        // A chunk holds more than one document only after a `...` marker.
        let line = if index == 0 || root.line == 0 {
            content_line
        } else {
            root.line
        };
        objects::load_document(sink, file, root, line, 0);
    }
}

/// The fast path: reads a chunk holding one document without recording
/// spans and loads it into a scratch sink; when that yields no diagnostic,
/// its objects join `sink` and the chunk is done (true). Lines are needed
/// only by diagnostics (an object's own line is the chunk's content line,
/// found by the split), so a document that loads cleanly loads the same
/// either way. Anything else (a syntax error, a diagnostic, several
/// documents after a `...`, a `List` whose items need their own lines)
/// returns false and the caller reads the chunk again with spans: the
/// result is exactly the spanned path's, at the cost of a second parse of
/// that chunk only. The spanless read is the fast YAML reader's when the
/// document is in its subset (and `reading` allows it), serde-saphyr's
/// otherwise: both give the same tree (`tests/fast_yaml_differential.rs`).
fn load_fast(sink: &Sink, file: &str, text: &str, content_line: usize, reading: Reading) -> Option<Inputs> {
    if reading == Reading::Fast
        && let Some(root) = fast_yaml::read(text)
    {
        return load_root_fast(sink, file, &root, content_line, true);
    }
    if reading == Reading::FastReferenceDecode
        && let Some(root) = fast_yaml::read(text)
    {
        return load_root_fast(sink, file, &root, content_line, false);
    }
    let Ok(mut documents) =
        serde_saphyr::from_multiple_with_options::<tree::PlainNode>(text, parse_options())
    else {
        return None;
    };
    let (Some(tree::PlainNode(root)), None) = (documents.pop(), documents.pop()) else {
        return None;
    };
    // serde-saphyr's tree may hold what the direct decode does not mirror
    // (duplicate keys): decoded the reference way.
    load_root_fast(sink, file, &root, content_line, false)
}

/// Loads a tree read without spans into a scratch sink; keeps the result
/// only when it yields no diagnostic (see [`load_fast`]). `direct`: the
/// tree has no duplicate keys, so known kinds are decoded straight from
/// it (`loader/decode.rs`).
fn load_root_fast(sink: &Sink, file: &str, root: &Node, content_line: usize, direct: bool) -> Option<Inputs> {
    if root.get("items").is_some() {
        return None; // a List: each item's own line is its source
    }
    let mut scratch = sink.scratch(direct);
    objects::load_document(&mut scratch, file, root, content_line, 0);
    if !scratch.diagnostics.is_empty() || scratch.bailed {
        return None;
    }
    Some(scratch.inputs)
}

/// The fast path of a `.json` file: `serde_json` reads it (many times
/// faster than the YAML reader), but only text the YAML reader would read
/// to the same tree takes it, so that the result stays the spanned path's
/// (which reads JSON as YAML first): printable characters and no tab
/// (YAML refuses the others, or reads U+0085/U+2028/U+2029 as line
/// breaks), no `\u` escape of a surrogate (YAML escapes are one code
/// point each), no duplicate key (YAML refuses it, JSON keeps the last),
/// and well inside the YAML reader's limits (nodes, depth, key length).
/// Anything else goes the YAML way.
fn load_fast_json(
    sink: &Sink,
    file: &str,
    text: &str,
    content_line: usize,
    reading: Reading,
) -> Option<Inputs> {
    const MAX_BYTES: usize = 16 << 20;
    let printable = |c: char| {
        matches!(c, '\n' | '\r' | ' '..='~')
            || (c >= '\u{a0}' && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'))
    };
    let surrogate_escape = text.match_indices("\\u").any(|(at, _)| {
        let next = text.as_bytes().get(at + 2..at + 4);
        matches!(next, Some([b'd' | b'D', b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F']))
    });
    if text.len() > MAX_BYTES || surrogate_escape || !text.chars().all(printable) {
        return None;
    }
    let Ok(tree::PlainNode(root)) = serde_json::from_str::<tree::PlainNode>(text) else {
        return None;
    };
    let mut nodes = 0usize;
    if !root.within_yaml_limits(0, &mut nodes) {
        return None;
    }
    let direct = reading != Reading::FastReferenceDecode;
    load_root_fast(sink, file, &root, content_line, direct)
}

fn parse_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        with_snippet: false,
        strict_booleans: true,
        non_finite_float_policy: NonFiniteFloatPolicy::AsString,
    }
}

/// Parses one chunk; lines in the result (and in the error) are lines of the
/// whole file, given that the chunk starts on `first_line`.
fn parse_yaml(text: &str, first_line: usize) -> Result<Vec<Node>, (Option<usize>, String)> {
    let options = parse_options();
    let delta = first_line.saturating_sub(1);
    match serde_saphyr::from_multiple_with_options::<Node>(text, options) {
        Ok(mut documents) => {
            for document in &mut documents {
                document.shift(delta);
            }
            Ok(documents)
        }
        Err(error) => {
            let error = error.without_snippet();
            let line = error
                .location()
                .map(|l| l.line() as usize)
                .filter(|&l| l > 0)
                .map(|l| l + delta);
            let message = UserMessageFormatter.format_message(error);
            Err((line, message.into_owned()))
        }
    }
}

/// Keeps a message on one line and free of control characters (escaped
/// as `\n`, `\u{1b}`, ...).
fn sanitize(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for c in message.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod read_both_ways_tests {
    use super::*;

    #[test]
    fn a_document_serde_saphyr_refuses_is_a_refusal() {
        let read = read_both_ways("a: [\n");
        let saphyr = read.first().map(|r| r.saphyr.clone());
        assert!(
            matches!(saphyr, Some(Err(SaphyrRefusal::Refused { .. }))),
            "{saphyr:?}"
        );
        assert_eq!(
            SaphyrRefusal::NotOneDocument.to_string(),
            "not exactly one document"
        );
    }
}
