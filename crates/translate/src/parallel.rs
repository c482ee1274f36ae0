//! Order-preserving parallel map for the translator's independent steps
//! (route models, rule building, per-Gateway xDS assembly, route status).
//!
//! The output never depends on the thread count: items are split into
//! contiguous chunks, the first mapped on the calling thread and each other
//! on its own scoped thread, and the results are concatenated in input
//! order. Small inputs stay on the calling thread (a thread costs more
//! than it saves).

/// Resolved thread count: `Settings::parallelism`, else one per core (at
/// most 8).
pub fn threads(parallelism: Option<usize>) -> usize {
    parallelism
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 8)
}

/// `items.map(f)` on up to `threads` threads when there are at least
/// `min_items` items.
pub fn map<T, R, F>(items: Vec<T>, threads: usize, min_items: usize, f: F) -> Vec<R>
where
    T: Send,
    R: Send,
    F: Fn(T) -> R + Sync,
{
    if threads < 2 || items.len() < min_items.max(2) {
        return items.into_iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let mut chunks: Vec<Vec<T>> = Vec::with_capacity(threads);
    let mut rest = items.into_iter();
    loop {
        let c: Vec<T> = rest.by_ref().take(chunk).collect();
        if c.is_empty() {
            break;
        }
        chunks.push(c);
    }
    let f = &f;
    let mut chunks = chunks.into_iter();
    let first = chunks.next().unwrap_or_default();
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .map(|c| s.spawn(move || c.into_iter().map(f).collect::<Vec<R>>()))
            .collect();
        // The first chunk runs here: one thread fewer to start, and its
        // allocations stay in this thread's allocator arena, where the
        // next step can reuse what it frees.
        let mut out: Vec<R> = first.into_iter().map(f).collect();
        for h in handles {
            // A panic in a worker is a bug; surface it as the same panic.
            out.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_input_order_for_any_thread_count() {
        let items: Vec<u32> = (0..1000).collect();
        let want: Vec<u32> = items.iter().map(|x| x * 3).collect();
        for t in 1..=8 {
            assert_eq!(map(items.clone(), t, 1, |x| x * 3), want, "threads {t}");
        }
        assert_eq!(map(Vec::<u32>::new(), 4, 1, |x| x), Vec::<u32>::new());
    }
}
