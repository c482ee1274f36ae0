//! The reply cache (issue 13 item 8): a bounded LRU from the SHA-256 of
//! `(manager, rpc, encoded request)` to the encoded reply, so a call whose
//! request message — the resource and its context — is byte-identical to
//! one already answered is not made again. Only successful replies are
//! kept: a failure is retried on the next translation.
//!
//! SHA-256 rather than a fast hash because tenants shape the requests (a
//! route's content is theirs): a collision would hand one tenant's route
//! another's reply.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

pub type CacheKey = [u8; 32];

/// The key of one request to one manager's rpc.
pub fn key(manager: usize, rpc: &str, request: &[u8]) -> CacheKey {
    let mut h = Sha256::new();
    h.update((manager as u64).to_be_bytes());
    h.update((rpc.len() as u64).to_be_bytes());
    h.update(rpc.as_bytes());
    h.update(request);
    h.finalize().into()
}

/// Counters a test or `/api/status` can read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
    pub capacity: usize,
    /// Bytes of replies held, and the most it may hold.
    pub bytes: usize,
    pub max_bytes: usize,
}

/// A bounded LRU, by entries and by bytes (a reply may be as large as
/// `maxMessageSize`, so an entry bound alone would not bound memory). The
/// recency order is a map from a use counter to the key, so eviction and
/// touch are `O(log n)`.
#[derive(Debug)]
pub struct ReplyCache {
    capacity: usize,
    max_bytes: usize,
    inner: std::sync::Mutex<Lru>,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Debug, Default)]
struct Lru {
    tick: u64,
    bytes: usize,
    map: HashMap<CacheKey, (Arc<[u8]>, u64)>,
    order: BTreeMap<u64, CacheKey>,
}

impl ReplyCache {
    /// At most `capacity` entries and `max_bytes` of replies; either 0
    /// disables caching.
    pub fn new(capacity: usize, max_bytes: usize) -> Self {
        Self {
            capacity: if max_bytes == 0 { 0 } else { capacity },
            max_bytes,
            inner: std::sync::Mutex::new(Lru::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub fn get(&self, key: &CacheKey) -> Option<Arc<[u8]>> {
        if self.capacity == 0 {
            return None;
        }
        // A poisoned lock only means another thread panicked mid-update of
        // plain maps; the data is still consistent enough to use.
        let mut lru = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        lru.tick += 1;
        let tick = lru.tick;
        let found = match lru.map.get_mut(key) {
            Some((v, used)) => {
                let old = std::mem::replace(used, tick);
                Some((v.clone(), old))
            }
            None => None,
        };
        match found {
            Some((v, old)) => {
                lru.order.remove(&old);
                lru.order.insert(tick, *key);
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(v)
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    pub fn put(&self, key: CacheKey, reply: Arc<[u8]>) {
        // A reply that would take more than a quarter of the budget is not
        // worth evicting everything else for.
        if self.capacity == 0 || reply.len() > self.max_bytes / 4 {
            return;
        }
        let mut lru = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        lru.tick += 1;
        let tick = lru.tick;
        lru.bytes += reply.len();
        if let Some((old_reply, old)) = lru.map.insert(key, (reply, tick)) {
            lru.order.remove(&old);
            lru.bytes -= old_reply.len();
        }
        lru.order.insert(tick, key);
        while lru.map.len() > self.capacity || lru.bytes > self.max_bytes {
            let Some((_, oldest)) = lru.order.pop_first() else {
                break;
            };
            if let Some((r, _)) = lru.map.remove(&oldest) {
                lru.bytes -= r.len();
            }
        }
    }

    pub fn stats(&self) -> CacheStats {
        let lru = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: lru.map.len(),
            capacity: self.capacity,
            bytes: lru.bytes,
            max_bytes: self.max_bytes,
        }
    }

    pub fn clear(&self) {
        let mut lru = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        lru.map.clear();
        lru.order.clear();
        lru.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used() {
        let c = ReplyCache::new(2, 1 << 20);
        let (a, b, d) = (key(0, "r", b"a"), key(0, "r", b"b"), key(0, "r", b"d"));
        c.put(a, Arc::from(&b"A"[..]));
        c.put(b, Arc::from(&b"B"[..]));
        assert!(c.get(&a).is_some()); // a is now the most recent
        c.put(d, Arc::from(&b"D"[..]));
        assert!(c.get(&b).is_none(), "b was least recently used");
        assert_eq!(c.get(&a).as_deref(), Some(&b"A"[..]));
        assert_eq!(c.get(&d).as_deref(), Some(&b"D"[..]));
        assert_eq!(c.stats().entries, 2);
    }

    #[test]
    fn bounded_by_bytes_too() {
        let c = ReplyCache::new(100, 400);
        for i in 0..10u8 {
            c.put(key(0, "r", &[i]), Arc::from(vec![i; 100]));
        }
        let s = c.stats();
        assert!(s.bytes <= 400, "{s:?}");
        assert_eq!(s.entries, 4);
        assert!(c.get(&key(0, "r", &[9])).is_some(), "the newest stays");
        assert!(c.get(&key(0, "r", &[0])).is_none(), "the oldest went");
        // Larger than a quarter of the budget: not kept.
        c.put(key(1, "r", b"big"), Arc::from(vec![0u8; 101]));
        assert!(c.get(&key(1, "r", b"big")).is_none());
    }

    #[test]
    fn key_separates_manager_rpc_and_bytes() {
        assert_ne!(key(0, "a", b"x"), key(1, "a", b"x"));
        assert_ne!(key(0, "a", b"x"), key(0, "b", b"x"));
        assert_ne!(key(0, "ab", b"x"), key(0, "a", b"bx"));
    }
}
