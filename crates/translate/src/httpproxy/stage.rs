//! The HTTPProxy stage of a translation, tree by tree, so that a tree's
//! result can be kept and reused (`incremental/httpproxy.rs`).
//!
//! Data model:
//! - Global steps, run on every call (each is one pass over the proxies):
//!   the proxies' own load errors and every root's checks
//!   ([`tree::roots`]: FQDN set and unique across roots, root namespace,
//!   TLS), orphans (a proxy no tree reached), the fenced FQDNs of invalid
//!   roots ([`serve::fenced_hosts`]).
//! - One [`Tree`] per root that passed its checks: its walk
//!   ([`tree::walk`]), duplicates ([`duplicates::detect`]), and, when a
//!   Gateway serves HTTPProxies, its built virtual host
//!   ([`serve::build_host`]), plus its share of the reports. A tree is
//!   owned data: what it found is kept as [`Events`] and replayed into the
//!   status, phase by phase (every tree's walk, then orphans, then every
//!   tree's duplicates, then every tree's build) in root order — the order
//!   a translation has always recorded them in, so a reused tree yields the
//!   same status, byte for byte, as a recomputed one.
//! - A tree's result depends on the root's object and checks, the objects
//!   (or absence) of every proxy the walk looked up ([`Tree::deps`]), and
//!   the context (Services, Secrets, delegations, settings); nothing
//!   else (its clusters name Service ports: EndpointSlices are read only
//!   when the serving Gateway is assembled, `crate::endpoints`). What depends on several trees (FQDN claims
//!   across roots, orphans) is in the global steps; FQDN conflicts with
//!   Gateway API routes are found when the serving Gateway is assembled
//!   (`serve::install`), on every call.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use super::report::{self, TreeReport};
use super::serve::{self, Served, ServedHost};
use super::status::{Events, Statuses};
use super::tree::{self, RootPlan, TlsPlan};
use super::{HttpProxySettings, ProxyId, duplicates};
use crate::backend::ClusterSpec;
use crate::incremental::httpproxy::Memo;
use crate::index::Index;

/// One root's tree, computed.
#[derive(Debug)]
pub struct Tree {
    pub root: ProxyId,
    /// The root's checks it was computed under (lower-cased FQDN, TLS).
    pub fqdn: String,
    pub tls: Option<TlsPlan>,
    /// Every proxy id the walk looked up (the root included), present or
    /// not: a change to any of them recomputes the tree.
    pub deps: BTreeSet<ProxyId>,
    /// Proxies the walk reached (they are not orphans).
    pub reached: BTreeSet<ProxyId>,
    /// What the walk found.
    pub walk: Events,
    /// What duplicate detection found.
    pub duplicates: Events,
    /// When a Gateway serves HTTPProxies: the tree built for it.
    pub served: Option<TreeServed>,
    pub report: TreeReport,
}

/// A tree built for the serving Gateway.
#[derive(Debug)]
pub struct TreeServed {
    /// `namespace/name` of the Gateway.
    pub gateway: String,
    pub host: Arc<ServedHost>,
    pub clusters: BTreeMap<String, ClusterSpec>,
    /// What building found (routes that cannot be programmed, a TLS Secret
    /// that does not read).
    pub events: Events,
}

/// What the stage hands the rest of the pipeline.
#[derive(Debug, Default)]
pub struct Stage {
    pub statuses: Statuses,
    /// One per root that passed its checks, in `namespace/name` order.
    pub trees: Vec<Arc<Tree>>,
    /// What the serving Gateway installs, when one is configured.
    pub served: Option<Served>,
}

/// Computes one tree.
pub fn compute(
    proxies: &tree::Proxies<'_>,
    index: &Index<'_>,
    root: RootPlan<'_>,
    gateway: Option<&str>,
) -> Tree {
    let tree::Walked {
        plan: mut vh,
        events,
        reached,
        deps,
    } = tree::walk(proxies, root);
    let mut found = Events::default();
    duplicates::detect(&mut vh, &mut found);
    let served = gateway.map(|g| {
        let mut events = Events::default();
        let mut clusters = BTreeMap::new();
        let host = serve::build_host(index, &vh, &mut events, &mut clusters);
        TreeServed {
            gateway: g.to_string(),
            host: Arc::new(host),
            clusters,
            events,
        }
    });
    Tree {
        root: vh.root.clone(),
        fqdn: vh.fqdn.clone(),
        tls: vh.tls.clone(),
        deps,
        reached,
        walk: events,
        duplicates: found,
        served,
        report: report::tree_report(&vh),
    }
}

/// The stage: every proxy's status before STRICT and FQDN conflicts, and
/// what the serving Gateway installs. With `memo`, a tree it still holds
/// is reused instead of computed, and every tree is handed back to it.
pub(crate) fn run<'a>(
    inputs: &'a api::Inputs,
    index: &Index<'a>,
    settings: &HttpProxySettings,
    mut memo: Option<&mut Memo>,
) -> Stage {
    let proxies = tree::proxies(inputs);
    let mut statuses = Statuses::default();
    let roots = tree::roots(inputs, index, settings, &proxies, &mut statuses);
    let gateway = settings
        .gateway
        .as_ref()
        .map(|(ns, name)| crate::naming::gateway(ns, name));
    let trees: Vec<Arc<Tree>> = roots
        .into_iter()
        .map(|root| {
            if let Some(t) = memo
                .as_deref_mut()
                .and_then(|m| m.take(&root, gateway.as_deref()))
            {
                return t;
            }
            let t = Arc::new(compute(&proxies, index, root, gateway.as_deref()));
            if let Some(m) = memo.as_deref_mut() {
                m.computed(&t);
            }
            t
        })
        .collect();
    for t in &trees {
        statuses.replay(&t.walk);
    }
    let reached: HashSet<&ProxyId> = trees.iter().flat_map(|t| &t.reached).collect();
    tree::orphans(&proxies, |id| reached.contains(id), &mut statuses);
    for t in &trees {
        statuses.replay(&t.duplicates);
    }
    let served = gateway.map(|gateway| {
        let mut served = Served {
            gateway,
            ..Default::default()
        };
        for t in &trees {
            let Some(s) = &t.served else { continue };
            statuses.replay(&s.events);
            served.hosts.push(Arc::clone(&s.host));
            for (k, v) in &s.clusters {
                // The same name is the same cluster (`naming::cluster`).
                served.clusters.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        let roots: BTreeSet<&ProxyId> = trees.iter().map(|t| &t.root).collect();
        let fqdns: BTreeSet<&str> = trees.iter().map(|t| t.fqdn.as_str()).collect();
        let fenced = serve::fenced_hosts(&statuses, &roots, &fqdns);
        served.hosts.extend(fenced.into_iter().map(Arc::new));
        served
    });
    Stage {
        statuses,
        trees,
        served,
    }
}
