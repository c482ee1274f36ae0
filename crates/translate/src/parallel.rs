//! Order-preserving parallel map for the translator's independent steps
//! (route models, rule building, per-Gateway xDS assembly, route status),
//! on a persistent worker pool.
//!
//! The output never depends on the thread count: results are collected in
//! input order whichever worker computed them. Small inputs stay on the
//! calling thread (handing work over costs more than it saves).
//!
//! # The pool
//!
//! One rayon pool per thread count, started on first use and kept for the
//! life of the process (at most [`MAX_THREADS`] pools; a map on `n`
//! threads runs on the calling thread and the `n - 1` workers of its
//! pool), instead of scoped threads started for every map of every
//! translation. So:
//! - a translation starts no thread: `serve` translates on every edit,
//!   and four maps a translation each started one thread per core;
//! - per-thread memos (`envoy::regex`'s RE2 program sizes) live on the
//!   workers and survive from one translation to the next, where a scoped
//!   thread's memo died with it;
//! - the work is cut into pieces that the caller and the workers take one
//!   at a time, so every thread is busy until the map ends even when items
//!   differ in cost or a worker is descheduled by the rest of the machine
//!   (equal contiguous chunks left one core idle while the other finished
//!   its chunk), and the caller, running already, never waits for a
//!   worker to be scheduled before the work starts;
//! - the allocator's per-thread caches and arenas stay with the same
//!   threads from one translation to the next.
//!
//! Nothing in a mapped closure may wait on another item's closure. A map
//! called from inside a worker runs its pieces there and on the pool
//! (rayon's nesting), not on new threads.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Most threads a translation uses (and so most workers a pool has).
pub const MAX_THREADS: usize = 8;

/// Resolved thread count: `Settings::parallelism`, else one per core (at
/// most [`MAX_THREADS`]).
pub fn threads(parallelism: Option<usize>) -> usize {
    parallelism.unwrap_or_else(cores).clamp(1, MAX_THREADS)
}

/// The cores this process may use, asked once: the answer reads cgroup
/// files and the affinity mask (system calls that showed as ~2% of a
/// one-route edit), and a pool keeps its thread count for the life of the
/// process anyway.
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Pieces per worker a map is split into at most: small enough that a
/// worker finishing early steals the rest of a slow one's work, large
/// enough that handing a piece over (well under a microsecond) is noise
/// beside it (a route's rules take tens of microseconds).
const PIECES_PER_THREAD: usize = 16;

/// The pool for maps on `threads` threads: `threads - 1` workers (the
/// calling thread is the last), started on first use, then the same for
/// the life of the process. `None` when its threads cannot be started (the
/// map then runs on the calling thread).
fn pool(threads: usize) -> Option<Arc<rayon::ThreadPool>> {
    static POOLS: Mutex<BTreeMap<usize, Arc<rayon::ThreadPool>>> = Mutex::new(BTreeMap::new());
    let threads = threads.clamp(2, MAX_THREADS);
    let mut pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(p) = pools.get(&threads) {
        return Some(p.clone());
    }
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(threads - 1)
        .thread_name(move |i| format!("portcullis-translate-{threads}.{i}"))
        .build()
        .ok()?;
    let built = Arc::new(built);
    pools.insert(threads, built.clone());
    Some(built)
}

/// `items.map(f)` on the calling thread and up to `threads - 1` workers of
/// the persistent pool when there are at least `min_items` items; the
/// results in input order.
///
/// The items are cut into pieces; the calling thread and the workers each
/// take the next piece nobody has taken until none is left. The calling
/// thread is running already and starts at once (a worker may take a
/// while to be scheduled on a busy machine; until it is, the caller takes
/// its pieces), and a descheduled worker holds up at most one piece.
pub fn map<T, R, F>(items: Vec<T>, threads: usize, min_items: usize, f: F) -> Vec<R>
where
    T: Send,
    R: Send,
    F: Fn(T) -> R + Sync,
{
    if threads < 2 || items.len() < min_items.max(2) {
        return items.into_iter().map(f).collect();
    }
    let Some(pool) = pool(threads) else {
        return items.into_iter().map(f).collect();
    };
    let piece = items.len().div_ceil(threads * PIECES_PER_THREAD).max(1);
    let mut pieces: Vec<Mutex<Option<Vec<T>>>> = Vec::with_capacity(items.len().div_ceil(piece));
    let mut rest = items.into_iter();
    loop {
        let p: Vec<T> = rest.by_ref().take(piece).collect();
        if p.is_empty() {
            break;
        }
        pieces.push(Mutex::new(Some(p)));
    }
    let results: Vec<Mutex<Option<Vec<R>>>> = pieces.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let (Some(slot), Some(result)) = (pieces.get(i), results.get(i)) else {
                break;
            };
            // Each index is taken once, so each piece is there.
            let Some(mine) = slot.lock().unwrap_or_else(PoisonError::into_inner).take() else {
                continue;
            };
            let out: Vec<R> = mine.into_iter().map(&f).collect();
            *result.lock().unwrap_or_else(PoisonError::into_inner) = Some(out);
        }
    };
    let helpers = (threads - 1).min(pieces.len().saturating_sub(1));
    // A panic in `f` (a bug) reaches the caller once every piece is done.
    pool.in_place_scope(|scope| {
        for _ in 0..helpers {
            scope.spawn(|_| work());
        }
        work();
    });
    let results: Vec<Vec<R>> = results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .unwrap_or_default()
        })
        .collect();
    // Sized once: flattening without a size grows the result by doubling,
    // moving every item again (route models are large).
    let mut out = Vec::with_capacity(results.iter().map(Vec::len).sum());
    for r in results {
        out.extend(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn keeps_input_order_for_any_thread_count() {
        let items: Vec<u32> = (0..1000).collect();
        let want: Vec<u32> = items.iter().map(|x| x * 3).collect();
        for t in 1..=MAX_THREADS + 2 {
            assert_eq!(map(items.clone(), t, 1, |x| x * 3), want, "threads {t}");
        }
        assert_eq!(map(Vec::<u32>::new(), 4, 1, |x| x), Vec::<u32>::new());
    }

    /// The threads a map of `n` items ran its items on (each item
    /// sleeps, so that every worker takes some).
    fn threads_used(threads: usize, n: usize) -> BTreeSet<String> {
        map((0..n).collect(), threads, 1, |_| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            format!("{:?}", std::thread::current().id())
        })
        .into_iter()
        .collect()
    }

    #[test]
    fn the_same_workers_serve_every_map() {
        // A thread count no other test uses: its pool is this test's.
        // 4 workers and the calling thread.
        let first = threads_used(5, 200);
        assert!(first.len() >= 2, "the work was shared: {first:?}");
        let mut all = first.clone();
        for _ in 0..5 {
            all.extend(threads_used(5, 200));
        }
        // Scoped threads per map: six maps, new threads each time.
        assert!(
            all.len() <= 5,
            "maps on 5 threads ran on {} distinct threads",
            all.len()
        );
    }

    #[test]
    fn per_thread_memos_survive_between_maps() {
        thread_local! {
            // A memo as `envoy::regex` keeps one: here, how many items
            // this thread has mapped before.
            static SEEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        }
        let seen_before = |_: usize| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            SEEN.with(|s| s.replace(s.get() + 1))
        };
        // An item that finds an empty memo is the first its thread ever
        // mapped: with 5 persistent workers and this thread, that happens
        // at most 6 times over any number of maps. Threads started per
        // map find empty memos again in every map.
        let mut empty = 0;
        for _ in 0..4 {
            empty += map((0..60).collect(), 6, 1, seen_before)
                .iter()
                .filter(|&&n| n == 0)
                .count();
        }
        assert!(empty >= 1);
        assert!(
            empty <= 6,
            "{empty} items found an empty memo over 4 maps on 6 threads"
        );
    }

    #[test]
    fn a_panic_in_a_worker_reaches_the_caller_and_the_pool_survives() {
        let r = std::panic::catch_unwind(|| {
            map((0..100).collect::<Vec<u32>>(), 7, 1, |x| {
                assert!(x != 50, "item 50");
                x
            })
        });
        assert!(r.is_err());
        assert_eq!(map((0..100).collect::<Vec<u32>>(), 7, 1, |x| x + 1)[99], 100);
    }
}
