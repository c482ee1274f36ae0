//! The HTTPProxy tree memo: which trees an edit recomputes.
//!
//! The HTTPProxy stage (`httpproxy/stage.rs`) is computed tree by tree; a
//! tree ([`Tree`]) is one root and every proxy reachable from it, with its
//! status findings, its built virtual host and its share of the reports.
//! This memo keeps every tree of the previous call, keyed by root.
//!
//! Invalidation (the soundness argument):
//! - A tree's result reads the root's object and root checks, the objects
//!   of the proxies its walk looked up ([`Tree::deps`], missing ones
//!   included: a missing include's 502 depends on its absence), and the
//!   context. Nothing else.
//! - **The context** (Services, Secrets,
//!   TLSCertificateDelegations, the serving Gateway, settings such as root
//!   namespaces …) is compared by the [`super::Translator`] as for routes:
//!   any change there drops this memo with every other (coarse, sound).
//!   HTTPProxies themselves are *not* context: they are judged here.
//! - **Proxies**: the ids whose object differs between the previous and
//!   this call's inputs (added, removed, or not equal — `Sourced::source`
//!   aside, which no tree reads) are *changed*. A tree is reused when none
//!   of its deps changed, and its root passed the root checks again with the
//!   same FQDN and TLS (the root checks — FQDN claims across roots, root
//!   namespaces, TLS — run on every call, see `stage.rs`), for the same
//!   serving Gateway. So an edit of one proxy recomputes exactly the trees
//!   that looked it up before the edit (their deps hold it) and the trees
//!   that look it up after it (a tree that did not look it up before and
//!   does now must have changed in a proxy it did look up — the includer —
//!   so it is recomputed too), plus a root whose checks changed.
//! - What spans trees (orphans, fenced FQDNs of invalid roots, FQDN
//!   conflicts with Gateway API routes, STRICT's verdicts) is recomputed
//!   on every call from the trees' kept results.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use api::Inputs;

use crate::httpproxy::ProxyId;
use crate::httpproxy::stage::Tree;
use crate::httpproxy::tree::RootPlan;

/// Trees by root, kept between calls.
pub(crate) type Trees = HashMap<ProxyId, Arc<Tree>>;

/// What the last call did with HTTPProxy trees (for tests, benchmarks).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Roots whose tree was computed, in root order.
    pub recomputed: Vec<ProxyId>,
    /// Trees reused from the previous call.
    pub reused: usize,
}

/// The stage's side of the memo.
#[derive(Default)]
pub(crate) struct Memo {
    prior: Trees,
    next: Trees,
    stats: TreeStats,
}

impl Memo {
    /// The trees of the previous call that no changed proxy touches.
    pub(crate) fn carry(prior: Trees, old: &Inputs, new: &Inputs) -> Self {
        let changed = changed(old, new);
        let prior = prior
            .into_iter()
            .filter(|(_, t)| t.deps.iter().all(|d| !changed.contains(d)))
            .collect();
        Self {
            prior,
            ..Default::default()
        }
    }

    /// The kept tree of `root`, if it is still valid for it.
    pub(crate) fn take(&mut self, root: &RootPlan<'_>, gateway: Option<&str>) -> Option<Arc<Tree>> {
        let t = self.prior.remove(&root.root)?;
        let same = t.fqdn == root.fqdn
            && t.tls == root.tls
            && t.served.as_ref().map(|s| s.gateway.as_str()) == gateway;
        if !same {
            return None;
        }
        self.stats.reused += 1;
        self.next.insert(root.root.clone(), Arc::clone(&t));
        Some(t)
    }

    /// A tree computed this call: kept for the next.
    pub(crate) fn computed(&mut self, tree: &Arc<Tree>) {
        self.stats.recomputed.push(tree.root.clone());
        self.next.insert(tree.root.clone(), Arc::clone(tree));
    }

    /// The trees to keep, and what this call did.
    pub(crate) fn finish(self) -> (Trees, TreeStats) {
        (self.next, self.stats)
    }
}

/// Proxy ids whose object differs between `old` and `new` (present in one
/// only, or not equal). Looked up as the stage does: the last object of
/// an id wins.
fn changed(old: &Inputs, new: &Inputs) -> HashSet<ProxyId> {
    fn by_id(inputs: &Inputs) -> HashMap<ProxyId, &Arc<api::httpproxy::HttpProxy>> {
        inputs
            .http_proxies
            .iter()
            .map(|p| (ProxyId::of(&p.object), &p.object))
            .collect()
    }
    let old = by_id(old);
    let new = by_id(new);
    let mut changed: HashSet<ProxyId> = old
        .iter()
        // The same allocation (an unchanged document) is equal unread.
        .filter(|(id, o)| new.get(*id).is_none_or(|n| !Arc::ptr_eq(n, o) && n != *o))
        .map(|(id, _)| id.clone())
        .collect();
    changed.extend(new.keys().filter(|id| !old.contains_key(*id)).cloned());
    changed
}
