//! What the client counts, for the binary's metrics
//! (`portcullis_extension_hook_calls_total{hook,result}`,
//! `portcullis_extension_hook_duration_seconds{hook}`) and `/api/status`.
//!
//! One call = one manager answering one request (retries are inside one
//! call). `result` is one of [`CallResult`]'s labels. Durations are of
//! calls that went to the server (not cache hits), as a histogram with the
//! Prometheus client's default buckets, so the binary can expose them as
//! one or feed its own through [`crate::Chain::set_observer`].

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use translate::extension::{Hook, HookFailure};

/// The outcome label of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CallResult {
    /// The server replied with a replacement.
    Modified,
    /// The server replied with the message unset.
    Unchanged,
    /// Answered from the reply cache; no call was made.
    Cached,
    Deadline,
    Unreachable,
    /// The server answered with an error status.
    Error,
    InvalidReply,
}

impl CallResult {
    pub fn label(self) -> &'static str {
        match self {
            CallResult::Modified => "modified",
            CallResult::Unchanged => "unchanged",
            CallResult::Cached => "cached",
            CallResult::Deadline => "deadline",
            CallResult::Unreachable => "unreachable",
            CallResult::Error => "error",
            CallResult::InvalidReply => "invalid_reply",
        }
    }

    pub fn of_failure(f: &HookFailure) -> Self {
        match f {
            HookFailure::Deadline { .. } => CallResult::Deadline,
            HookFailure::Unreachable { .. } => CallResult::Unreachable,
            HookFailure::Status { .. } => CallResult::Error,
            HookFailure::InvalidReply { .. } => CallResult::InvalidReply,
        }
    }
}

/// Upper bounds (seconds) of the duration histogram: the Prometheus
/// client's defaults.
pub const DURATION_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A histogram of call durations for one hook.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DurationHistogram {
    /// Cumulative counts per [`DURATION_BUCKETS`] bound (`le`).
    pub buckets: [u64; DURATION_BUCKETS.len()],
    pub count: u64,
    pub sum_seconds: f64,
}

impl DurationHistogram {
    fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        for (i, le) in DURATION_BUCKETS.iter().enumerate() {
            if s <= *le {
                self.buckets[i] += 1;
            }
        }
        self.count += 1;
        self.sum_seconds += s;
    }
}

/// Whether a manager's server answered lately, for `/api/status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reachability {
    pub manager: String,
    /// The address dialled (`host:port`, `unix:///path`).
    pub address: String,
    /// `None` until a call or probe has been made.
    pub reachable: Option<bool>,
    pub last_success: Option<SystemTime>,
    pub last_error: Option<String>,
}

/// A copy of the counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// `(hook rpc, result label) -> calls`.
    pub calls: BTreeMap<(Hook, CallResult), u64>,
    pub durations: BTreeMap<Hook, DurationHistogram>,
    pub managers: Vec<Reachability>,
    pub cache: crate::cache::CacheStats,
}

impl StatsSnapshot {
    /// Calls of one hook with one result.
    pub fn count(&self, hook: Hook, result: CallResult) -> u64 {
        self.calls.get(&(hook, result)).copied().unwrap_or(0)
    }

    /// Calls of one hook that reached the server (every result but cached).
    pub fn server_calls(&self, hook: Hook) -> u64 {
        self.calls
            .iter()
            .filter(|((h, r), _)| *h == hook && *r != CallResult::Cached)
            .map(|(_, n)| n)
            .sum()
    }
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    calls: BTreeMap<(Hook, CallResult), u64>,
    durations: BTreeMap<Hook, DurationHistogram>,
}

impl Stats {
    pub(crate) fn record(&self, hook: Hook, result: CallResult, duration: Option<Duration>) {
        let mut i = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        *i.calls.entry((hook, result)).or_default() += 1;
        if let Some(d) = duration {
            i.durations.entry(hook).or_default().observe(d);
        }
    }

    pub(crate) fn snapshot(
        &self,
    ) -> (
        BTreeMap<(Hook, CallResult), u64>,
        BTreeMap<Hook, DurationHistogram>,
    ) {
        let i = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (i.calls.clone(), i.durations.clone())
    }
}
