//! Which virtual hosts of a Gateway an edit can have changed, so that its
//! assembly merges only those into the IR and splices every other host's
//! bytes from last call's route configuration (`xds::route::build_memo`).
//!
//! Data model. A Gateway's works (one per route per listener, in route
//! order) are compared with last call's by identity (`Arc`): the common
//! prefix and suffix are the very same works, each the same route with the
//! same content on the same listener; what lies between (works added,
//! removed, replaced or moved) is *changed* — when as many works lie
//! between on both sides, only those that differ position by position. A virtual host is a route
//! configuration (`ChainId`) and a hostname; its bytes are a function of
//! the works contributing to it, in their relative order (their routes'
//! precedence, age as the tie-break: the same objects keep their relative
//! age), and of context (listener ownership, policies), unchanged whenever
//! a memo exists. So a host no changed work names — neither last call's
//! nor this call's — is *clean*: its bytes are last call's. Every work
//! naming a dirty host is merged into it, changed or not, so a dirty host
//! is built exactly as a full assembly builds it.
//!
//! A work naming no dirty host (a *clean* work) adds to the assembly only
//! its clusters and HTTP filters; when last call's sets of those are known
//! to be all it would add ([`Partial::clean_skippable`]), clean works are
//! not merged at all, and a one-route edit merges one work instead of
//! every work of its Gateway.
//!
//! Used only where every host of last call's configurations is in the
//! memo: no Gateway or listener policy (nothing fenced or projected per
//! host), no STRICT, no hooks, not the Gateway serving HTTPProxies, and a
//! memo with its bytes for every route configuration (checked by the
//! caller). Soundness is held by `tests/incremental.rs` (random edits,
//! output compared with a full translation after every step).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::pipeline::{GatewayWork, Work};

/// A route configuration of one Gateway: its port and its chain's index
/// on that port (as `pipeline::chain_slot` finds it).
pub(crate) type ChainId = (i32, usize);

/// Per route configuration, the hostnames of its dirty hosts (a few: a
/// lookup is a few comparisons, no hashing). A route configuration absent
/// here is clean throughout.
pub(crate) type DirtyHosts = HashMap<ChainId, BTreeSet<String>>;

/// Which hosts of one route configuration a work is merged into.
#[derive(Clone, Copy)]
pub(crate) enum Merged<'a> {
    /// A full assembly: every host.
    All,
    /// A partial assembly: the dirty ones (none: the configuration is
    /// clean).
    Dirty(Option<&'a BTreeSet<String>>),
}

impl Merged<'_> {
    /// Per listener, from a partial assembly's dirty hosts (`slot`: the
    /// listener's route configuration), or every host.
    pub(crate) fn per_listener(
        dirty: Option<&DirtyHosts>,
        listeners: usize,
        slot: impl Fn(usize) -> ChainId,
    ) -> Vec<Merged<'_>> {
        (0..listeners)
            .map(|li| match dirty {
                None => Merged::All,
                Some(d) => Merged::Dirty(d.get(&slot(li))),
            })
            .collect()
    }

    pub(crate) fn wants(self, hostname: &str) -> bool {
        match self {
            Merged::All => true,
            Merged::Dirty(hosts) => hosts.is_some_and(|h| h.contains(hostname)),
        }
    }
}

/// Above this many changed works the assembly merges every work: the
/// partial merge saves nothing when most hosts are dirty.
const MAX_CHANGED: usize = 256;

/// A partial assembly's plan.
pub(crate) struct Partial {
    /// The hosts the changed works name, by route configuration.
    pub(crate) hosts: DirtyHosts,
    /// Whether the works that name no dirty host (*clean* works) need not
    /// be merged at all. Besides hosts, merging a work adds its clusters
    /// to the Gateway's and its HTTP filters to its route configuration's
    /// (as sets: a cluster's spec is a function of its name in one
    /// translation, and a reused work was built under the same context).
    /// Last call's sets are the union over last call's works (and the
    /// ext_authz clusters of the filters used). When every cluster a
    /// changed work of last call named is named by a changed work of this
    /// call, and every HTTP filter by one on the same route configuration,
    /// this call's unions are last call's plus the changed works': so the
    /// assembly starts from last call's sets and merges only the works
    /// naming a dirty host. Otherwise (a route dropped a backend or a
    /// filter) every work is merged.
    pub(crate) clean_skippable: bool,
}

/// The changed works between `prior` (last call's works, with their
/// relative ages) and `now`: those outside their common prefix and suffix
/// of the very same works; of those, when both hold as many works (an
/// edit that rebuilt works in place, such as a Service's readers spread
/// over the route order), only the positions where they differ — the
/// others hold the very same works at the same positions, as the prefix
/// and suffix do.
fn changed<'p, 'n, 'w>(
    prior: &'p [(Arc<Work>, usize)],
    now: &'n [(usize, GatewayWork<'w>)],
) -> (Vec<&'p Arc<Work>>, Vec<&'n GatewayWork<'w>>) {
    let same = |(a, _): &(Arc<Work>, usize), (_, b): &(usize, GatewayWork<'_>)| Arc::ptr_eq(a, b);
    let prefix = prior.iter().zip(now).take_while(|(a, b)| same(a, b)).count();
    let suffix = prior[prefix..]
        .iter()
        .rev()
        .zip(now[prefix..].iter().rev())
        .take_while(|(a, b)| same(a, b))
        .count();
    let (old, new) = (
        &prior[prefix..prior.len() - suffix],
        &now[prefix..now.len() - suffix],
    );
    if old.len() == new.len() {
        old.iter()
            .zip(new)
            .filter(|(a, b)| !same(a, b))
            .map(|((a, _), (_, b))| (a, b))
            .unzip()
    } else {
        (
            old.iter().map(|(a, _)| a).collect(),
            new.iter().map(|(_, b)| b).collect(),
        )
    }
}

/// The hosts the changed works between `prior` (last call's works, with
/// their relative ages) and `now` name, by route configuration (`chain`
/// of a work's listener), and whether clean works may be left unmerged;
/// None when too many works changed.
pub(crate) fn dirty_hosts(
    prior: &[(Arc<Work>, usize)],
    now: &[(usize, GatewayWork<'_>)],
    chain: impl Fn(usize) -> ChainId,
) -> Option<Partial> {
    let (old, new) = changed(prior, now);
    if old.len() + new.len() > MAX_CHANGED {
        return None;
    }
    let mut dirty = DirtyHosts::new();
    for w in old.iter().copied().chain(new.iter().map(|w| &***w)) {
        let hosts = dirty.entry(chain(w.listener)).or_default();
        for h in w.hostnames() {
            if !hosts.contains(h.as_str()) {
                hosts.insert(h.clone());
            }
        }
    }
    let clean_skippable = old.iter().all(|o| {
        o.cluster_names().all(|c| new.iter().any(|w| w.names_cluster(c)))
            && o.filters().iter().all(|f| {
                new.iter()
                    .any(|w| chain(w.listener) == chain(o.listener) && w.filters().contains(f))
            })
    });
    Some(Partial {
        hosts: dirty,
        clean_skippable,
    })
}
