//! Which Services a part of a translation looked up, so that an edit of
//! Services alone re-translates only the routes that read them
//! (`incremental/services.rs` decides; ARCHITECTURE.md §7).
//!
//! Data model. Every Service lookup goes through [`crate::index::Index::service`],
//! which notes the key `(namespace, name)` it was asked for — found or not:
//! a route whose backend was missing must be rebuilt when it appears. A
//! note goes to the innermost [`scoped`] recording open on the calling
//! thread (the pipeline opens one around each route it builds, and
//! around the report of each route it built), else to the index's
//! *unscoped* reads (today the ext_auth providers and the HTTPProxy
//! trees: what is not kept per route). Two readers are left out on
//! purpose and read through [`crate::index::Index::service_untracked`]: the
//! ClusterLoadAssignments and the endpoint guard, which the incremental
//! translator rebuilds by their own rule when a Service changes.
//!
//! ReferenceGrant lookups are noted the same way, in the same reads, by
//! the namespace they look into ([`grants_key`]:
//! `incremental/reference_grants.rs`). Secret lookups are keyed and
//! collected the same way, always unscoped (`incremental/secrets.rs`).
//!
//! Keys are 64-bit hashes of `(namespace, name)`: two Services sharing a
//! hash only make an edit of one rebuild the other's readers too (a read
//! set is only ever asked whether it *may* have read a Service).

use std::cell::RefCell;
use std::hash::BuildHasher;

/// One Service's key: a hash of its namespace and name.
pub(crate) type Key = u64;

/// The key of Service `ns/name`.
pub(crate) fn key(ns: &str, name: &str) -> Key {
    // A fixed seed: keys are compared across translations.
    foldhash::fast::FixedState::with_seed(0x5e41_1ce5).hash_one((ns, name))
}

/// The key of the ReferenceGrants of namespace `ns`: as a Service's, under
/// a name no Service can have (names are DNS labels).
pub(crate) fn grants_key(ns: &str) -> Key {
    key(ns, "\0ReferenceGrants")
}

/// The Services one recording read, sorted, each once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reads(Box<[Key]>);

impl Reads {
    pub(crate) fn of(mut keys: Vec<Key>) -> Self {
        keys.sort_unstable();
        keys.dedup();
        Self(keys.into_boxed_slice())
    }

    /// These reads and `other`'s.
    pub(crate) fn union(self, other: &Reads) -> Reads {
        if other.0.is_empty() {
            return self;
        }
        Self::of(self.0.iter().chain(other.0.iter()).copied().collect())
    }

    /// Whether any of the `changed` Services was read (`changed` is a few
    /// keys, asked of every route: a binary search, no hashing).
    pub(crate) fn touches(&self, changed: &Reads) -> bool {
        self.0.iter().any(|k| changed.0.binary_search(k).is_ok())
    }

    #[cfg(test)]
    pub(crate) fn keys(&self) -> &[Key] {
        &self.0
    }
}

thread_local! {
    /// The recording open on this thread, if any.
    static SCOPE: RefCell<Option<Vec<Key>>> = const { RefCell::new(None) };
}

/// Runs `f`, returning what it returned and the Services it looked up on
/// this thread. A recording open around this one does not see them.
pub(crate) fn scoped<T>(f: impl FnOnce() -> T) -> (T, Reads) {
    let outer = SCOPE.with(|s| s.borrow_mut().replace(Vec::new()));
    // Restores the outer recording even if `f` unwinds.
    struct Restore(Option<Option<Vec<Key>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(outer) = self.0.take() {
                SCOPE.with(|s| *s.borrow_mut() = outer);
            }
        }
    }
    let mut restore = Restore(Some(outer));
    let out = f();
    let outer = restore.0.take().unwrap_or_default();
    let keys = SCOPE.with(|s| std::mem::replace(&mut *s.borrow_mut(), outer));
    (out, Reads::of(keys.unwrap_or_default()))
}

/// Notes a lookup of `key` in the recording open on this thread; `false`
/// when none is.
pub(crate) fn note(key: Key) -> bool {
    SCOPE.with(|s| match s.borrow_mut().as_mut() {
        Some(keys) => {
            keys.push(key);
            true
        }
        None => false,
    })
}

/// The reads made outside any recording, collected from every thread
/// (kept by the index while the incremental translator asks for them).
#[derive(Default)]
pub(crate) struct Unscoped(std::sync::Mutex<Vec<Key>>);

impl Unscoped {
    pub(crate) fn note(&self, key: Key) {
        // A poisoned lock only means another thread panicked mid-push: the
        // keys are still keys.
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(key);
    }

    pub(crate) fn into_reads(self) -> Reads {
        Reads::of(self.0.into_inner().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_sees_its_own_reads_only() {
        let ((), outer) = scoped(|| {
            assert!(note(key("a", "x")));
            let ((), inner) = scoped(|| {
                note(key("b", "y"));
                note(key("b", "y"));
            });
            assert_eq!(inner.keys(), [key("b", "y")]);
            note(key("c", "z"));
        });
        let mut want = vec![key("a", "x"), key("c", "z")];
        want.sort_unstable();
        assert_eq!(outer.keys(), want);
        assert!(!note(key("a", "x")), "no recording is open after the outer one");
    }

    #[test]
    fn touches_asks_about_changed_services_only() {
        let ((), reads) = scoped(|| {
            note(key("ns", "a"));
        });
        let changed = Reads::of(vec![key("ns", "b"), key("ns", "c")]);
        assert!(!reads.touches(&changed));
        let changed = Reads::of(vec![key("ns", "c"), key("ns", "a")]);
        assert!(reads.touches(&changed));
        // Namespace and name are not run together.
        assert_ne!(key("ns", "a"), key("nsa", ""));
    }

    #[test]
    fn a_panic_inside_a_recording_restores_the_outer_one() {
        let ((), outer) = scoped(|| {
            let r = std::panic::catch_unwind(|| {
                scoped(|| {
                    note(key("in", "x"));
                    panic!("inside");
                })
            });
            assert!(r.is_err());
            note(key("out", "y"));
        });
        assert_eq!(outer.keys(), [key("out", "y")]);
    }
}
