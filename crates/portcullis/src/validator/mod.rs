//! The STRICT validator: `envoy --mode validate` on each candidate
//! bootstrap (see `translate::strict` for what is validated and how the
//! results are used).
//!
//! - results are cached by content hash in a bounded LRU;
//! - identical candidates, in one batch or in concurrent batches, run once
//!   (the others wait for that run's verdict);
//! - at most `parallelism` Envoy processes run at a time;
//! - each call has a timeout; a timeout, a missing binary or a crash is an
//!   `environment` verdict (`Unavailable`), never a rejection, and is not
//!   cached.
//!
//! The leaf that runs Envoy is `process` (one `envoy --mode validate` per
//! candidate).

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use translate::GatewayXds;
use translate::strict::{Candidate, Validator, Verdict};

mod process;
mod resident;

/// Why a STRICT validator could not start (a startup error of `serve`,
/// `controller` and `translate`), or could not start one resident Envoy.
#[derive(Debug, thiserror::Error)]
pub enum ValidatorError {
    #[error(
        "STRICT route replacement needs the Envoy binary, and there is none at {}: run scripts/install-envoy.sh or set ENVOY_BIN",
        .0.display()
    )]
    NoEnvoy(PathBuf),
    /// A file or directory the validator writes.
    #[error("cannot {what} {}: {source}", path.display())]
    File {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The resident validator's xDS server or runtime.
    #[error("the validator's xDS server: cannot {what}: {source}")]
    Server {
        what: &'static str,
        source: std::io::Error,
    },
}

/// Counters the validator keeps (registered by `serve`, unregistered
/// elsewhere).
#[derive(Clone)]
pub struct ValidatorMetrics {
    pub calls: Counter,
    pub cache_hits: Counter,
    pub environment_errors: Counter,
    /// Calls a resident Envoy could not answer, run as a process instead.
    pub fallbacks: Counter,
    pub duration: Histogram,
}

impl Default for ValidatorMetrics {
    fn default() -> Self {
        Self {
            calls: Counter::default(),
            cache_hits: Counter::default(),
            environment_errors: Counter::default(),
            fallbacks: Counter::default(),
            duration: Histogram::new(exponential_buckets(0.005, 2.0, 12)),
        }
    }
}

/// How candidates reach Envoy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// Resident Envoys fed over ADS (one per `parallelism`); a candidate
    /// without its xDS form, or one they cannot answer, goes to a process.
    #[default]
    Resident,
    /// One `envoy --mode validate` process per candidate.
    Process,
}

pub struct Options {
    pub timeout: Duration,
    pub backend: Backend,
    pub parallelism: usize,
    pub cache_entries: usize,
    /// Route / envelope content keys remembered as accepted (FIFO bound).
    pub known_good_entries: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            backend: Backend::default(),
            parallelism: std::thread::available_parallelism().map_or(2, |n| n.get()),
            cache_entries: 4096,
            known_good_entries: 262_144,
        }
    }
}

#[derive(Default)]
struct Flight {
    verdict: Mutex<Option<Verdict>>,
    done: Condvar,
}

/// A bounded LRU of verdicts by content key.
struct Lru {
    map: HashMap<Key, Verdict>,
    order: VecDeque<Key>,
    capacity: usize,
}

impl Lru {
    fn get(&mut self, k: &Key) -> Option<Verdict> {
        let v = self.map.get(k)?.clone();
        if let Some(pos) = self.order.iter().position(|x| x == k) {
            self.order.remove(pos);
        }
        self.order.push_back(*k);
        Some(v)
    }

    fn put(&mut self, k: Key, v: Verdict) {
        if self.map.insert(k, v).is_none() {
            self.order.push_back(k);
        }
        while self.order.len() > self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }
}

/// Content hash: two independent SipHash runs and the length.
type Key = (u64, u64, usize);

fn key_of(text: &str) -> Key {
    let mut a = std::hash::DefaultHasher::new();
    text.hash(&mut a);
    let mut b = std::hash::DefaultHasher::new();
    0x5eed_u32.hash(&mut b);
    text.hash(&mut b);
    (a.finish(), b.finish(), text.len())
}

pub struct EnvoyValidator {
    bin: PathBuf,
    options: Options,
    dir: PathBuf,
    seq: AtomicU64,
    cache: Mutex<Lru>,
    inflight: Mutex<HashMap<Key, Arc<Flight>>>,
    running: (Mutex<usize>, Condvar),
    known_good: Mutex<(std::collections::HashSet<u64>, VecDeque<u64>)>,
    resident: Option<resident::Resident>,
    pub metrics: ValidatorMetrics,
}

impl EnvoyValidator {
    /// The address of the resident Envoys' xDS server, if there is one: it
    /// serves candidates (keys included) to whoever connects, so `serve`
    /// reserves it from tenants' endpoints.
    pub fn xds_address(&self) -> Option<std::net::SocketAddr> {
        self.resident
            .as_ref()
            .map(|r| std::net::SocketAddr::from(([127, 0, 0, 1], r.port())))
    }

    /// Fails when `bin` is not a file: STRICT without Envoy is a startup
    /// error.
    pub fn new(bin: PathBuf, options: Options, metrics: ValidatorMetrics) -> Result<Self, ValidatorError> {
        if !bin.is_file() {
            return Err(ValidatorError::NoEnvoy(bin));
        }
        // One directory per validator: several may live in one process.
        static INSTANCE: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "portcullis-strict-{}-{}",
            std::process::id(),
            INSTANCE.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|source| ValidatorError::File {
            what: "create",
            path: dir.clone(),
            source,
        })?;
        let resident = match options.backend {
            Backend::Process => None,
            // A resident Envoy that answers late is replaced by a process
            // run: its wait is bounded below the whole call's timeout.
            Backend::Resident => Some(resident::Resident::new(
                &bin,
                &dir,
                options.parallelism,
                options.timeout.min(Duration::from_secs(5)),
            )?),
        };
        Ok(Self {
            resident,
            bin,
            cache: Mutex::new(Lru {
                map: HashMap::new(),
                order: VecDeque::new(),
                capacity: options.cache_entries.max(1),
            }),
            options,
            dir,
            seq: AtomicU64::new(0),
            inflight: Mutex::new(HashMap::new()),
            running: (Mutex::new(0), Condvar::new()),
            known_good: Mutex::new(Default::default()),
            metrics,
        })
    }

    /// One verdict, from the cache, from a concurrent identical run, or
    /// from running Envoy.
    fn verdict(&self, text: &str, xds: Option<&GatewayXds>) -> Verdict {
        let key = key_of(text);
        if let Some(v) = self.cache.lock().ok().and_then(|mut c| c.get(&key)) {
            self.metrics.cache_hits.inc();
            return v;
        }
        let (flight, leader) = {
            let Ok(mut inflight) = self.inflight.lock() else {
                return Verdict::Unavailable("validator state poisoned".into());
            };
            match inflight.get(&key) {
                Some(f) => (f.clone(), false),
                None => {
                    let f = Arc::new(Flight::default());
                    inflight.insert(key, f.clone());
                    (f, true)
                }
            }
        };
        if !leader {
            self.metrics.cache_hits.inc();
            let Ok(mut v) = flight.verdict.lock() else {
                return Verdict::Unavailable("validator state poisoned".into());
            };
            while v.is_none() {
                v = match flight.done.wait(v) {
                    Ok(v) => v,
                    Err(_) => return Verdict::Unavailable("validator state poisoned".into()),
                };
            }
            return v.clone().unwrap_or(Verdict::Unavailable("no verdict".into()));
        }
        let verdict = self.run_bounded(text, xds);
        if !matches!(verdict, Verdict::Unavailable(_))
            && let Ok(mut c) = self.cache.lock()
        {
            c.put(key, verdict.clone());
        }
        if let Ok(mut v) = flight.verdict.lock() {
            *v = Some(verdict.clone());
        }
        flight.done.notify_all();
        if let Ok(mut inflight) = self.inflight.lock() {
            inflight.remove(&key);
        }
        verdict
    }

    fn run_bounded(&self, text: &str, xds: Option<&GatewayXds>) -> Verdict {
        let (lock, cv) = &self.running;
        {
            let Ok(mut n) = lock.lock() else {
                return Verdict::Unavailable("validator state poisoned".into());
            };
            while *n >= self.options.parallelism.max(1) {
                n = match cv.wait(n) {
                    Ok(n) => n,
                    Err(_) => return Verdict::Unavailable("validator state poisoned".into()),
                };
            }
            *n += 1;
        }
        let started = Instant::now();
        let verdict = match (&self.resident, xds) {
            (Some(r), Some(x)) => r.validate(x).unwrap_or_else(|| {
                self.metrics.fallbacks.inc();
                self.run_envoy(text)
            }),
            _ => self.run_envoy(text),
        };
        self.metrics.calls.inc();
        self.metrics.duration.observe(started.elapsed().as_secs_f64());
        if matches!(verdict, Verdict::Unavailable(_)) {
            self.metrics.environment_errors.inc();
        }
        if let Ok(mut n) = lock.lock() {
            *n -= 1;
        }
        cv.notify_one();
        verdict
    }

    /// The process leaf: one `envoy --mode validate` on a temp file.
    fn run_envoy(&self, text: &str) -> Verdict {
        let path = self.dir.join(format!(
            "candidate-{}.json",
            self.seq.fetch_add(1, Ordering::Relaxed)
        ));
        process::run(&self.bin, &path, text, self.options.timeout)
    }
}

/// The validator a mode needs: none for STANDARD; for STRICT, Envoy at
/// `bin` (default `.tools/bin/envoy`), or a startup error when absent.
pub fn for_mode(
    mode: translate::strict::ReplacementMode,
    bin: Option<PathBuf>,
    metrics: ValidatorMetrics,
) -> Result<Option<EnvoyValidator>, ValidatorError> {
    match mode {
        translate::strict::ReplacementMode::Standard => Ok(None),
        translate::strict::ReplacementMode::Strict => {
            let bin = bin.unwrap_or_else(|| PathBuf::from(".tools/bin/envoy"));
            EnvoyValidator::new(bin, Options::default(), metrics).map(Some)
        }
    }
}

impl Validator for EnvoyValidator {
    fn known_good(&self, key: u64) -> bool {
        self.known_good.lock().is_ok_and(|g| g.0.contains(&key))
    }

    fn remember_good(&self, keys: &[u64]) {
        let Ok(mut g) = self.known_good.lock() else { return };
        let (set, order) = &mut *g;
        for k in keys {
            if set.insert(*k) {
                order.push_back(*k);
            }
        }
        while order.len() > self.options.known_good_entries.max(1) {
            if let Some(old) = order.pop_front() {
                set.remove(&old);
            }
        }
    }

    fn validate(&self, batch: &[Candidate]) -> Vec<Verdict> {
        // The key is the bootstrap text: both forms describe the same
        // content, and hand-built candidates have only this one.
        let texts: Vec<String> = batch.iter().map(|c| c.bootstrap.to_string()).collect();
        // Identical candidates in one batch collapse through `inflight`;
        // threads give the parallelism (bounded in `run_bounded`).
        let mut verdicts: Vec<Option<Verdict>> = vec![None; texts.len()];
        std::thread::scope(|s| {
            let handles: Vec<_> = texts
                .iter()
                .zip(batch)
                .map(|(t, c)| s.spawn(|| self.verdict(t, c.xds.as_deref())))
                .collect();
            for (slot, h) in verdicts.iter_mut().zip(handles) {
                *slot = Some(
                    h.join()
                        .unwrap_or_else(|_| Verdict::Unavailable("validator thread panicked".into())),
                );
            }
        });
        verdicts
            .into_iter()
            .map(|v| v.unwrap_or(Verdict::Unavailable("no verdict".into())))
            .collect()
    }
}

impl Drop for EnvoyValidator {
    fn drop(&mut self) {
        // Resident Envoys first: they read their bootstraps from `dir`.
        self.resident = None;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
