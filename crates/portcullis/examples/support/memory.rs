//! What the memory examples share: jemalloc's live and resident bytes and
//! the process's resident set.

/// jemalloc's live (allocated) bytes, its statistics refreshed first.
pub fn allocated() -> usize {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0)
}

/// jemalloc's resident bytes, its statistics refreshed first.
pub fn resident() -> usize {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::resident::read().unwrap_or(0)
}

pub fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// This process's `VmRSS` in MiB (0 where `/proc` is missing).
pub fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            l.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .unwrap_or(0.0)
        / 1024.0
}
