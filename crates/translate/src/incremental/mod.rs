//! Incremental translation: a [`Translator`] the caller holds between
//! translations reuses what an edit cannot have changed, and its output is
//! byte-identical to [`crate::translate_seams`] of the same inputs
//! (`tests/incremental.rs` checks this after every step of random edit
//! sequences).
//!
//! Data model. The translator keeps, from its previous call, the inputs it
//! was given (shared, never copied: [`Held`]), the settings, and per route
//! a [`Slot`], kept by the route's position in those inputs (HTTPRoutes,
//! then GRPCRoutes; the route's key is kind, namespace, name):
//! - its *works* — the route's rules built for each listener it attaches
//!   to, with their Envoy routes already encoded (`pipeline::Work`), each
//!   work shared (`Arc`) between the memo and the pipeline, and each
//!   encoded route shared (`ir::RouteBytes`) with the virtual hosts it is
//!   assembled into: a reuse copies no route;
//! - its bindings (`binding::ParentBinding`s);
//! - its *tail*: status, diagnostics and replacements (`pipeline::RouteTail`);
//!
//! and per Gateway its assembled xDS with, per route configuration, where
//! each virtual host's bytes lie and what they were assembled from
//! (`xds::route::ConfigMemo`). The memo's route configurations share their
//! bytes with the output.
//!
//! Invalidation (the soundness argument, per input kind):
//! - **The context** — every input that is not an HTTPRoute or GRPCRoute
//!   (GatewayClasses, Gateways, ListenerSets, TrafficPolicies,
//!   GatewayExtensions, Services, EndpointSlices, Secrets, ReferenceGrants,
//!   Namespaces, TLSCertificateDelegations, extension objects)
//!   and the [`Settings`]. A route's works read the context through the
//!   index, the Gateway and listener states, its bindings, its effective
//!   policies and the scopes above it. Any change to the context — compared
//!   exactly (`PartialEq`), kind by kind through an exhaustive destructuring
//!   of [`api::Inputs`], so a new input kind cannot be forgotten — drops
//!   every memo: everything is rebuilt.
//! - **A route** (HTTPRoute, GRPCRoute) is *unchanged* when the object and
//!   its unreadable values are equal to the previous call's object of the
//!   same kind, namespace and name, and that key is unique in both inputs.
//!   Finding it ([`carry`]): when every route of this call has the key of
//!   the route at its position last call (an edit that adds, removes,
//!   renames or moves no route — each position compared by pointer, a
//!   changed object by its key), the slots are taken by position and the
//!   ambiguous keys are last call's (the key list is the same); otherwise
//!   they are matched by key. Either way no slot moves to another key, so
//!   the position is only how a slot is found, never why it is reused.
//!   Its source (file and line) is not compared: only its diagnostics read
//!   it, and they are restamped with it. An unchanged route reuses:
//!   - its works. They depend on other routes in two ways only, both
//!     supplied beside the shared works by the pipeline: the route's index
//!     in the sorted route list and its age rank (the precedence
//!     tie-break, applied to its orders when merged);
//!   - its bindings ([`bind_all`]: binding reads the route and context);
//!   - its tail ([`Gateways::tails`]), when its works were reused: status
//!     reads the route, its bindings, its report (from its works) and the
//!     Gateways' names; the call's transition time and the route's source
//!     are the only things restamped.
//!
//!   Bindings and works are shared (`Arc`) between the memo and the
//!   pipeline, never copied.
//! - **A Gateway's assembly** (merging its works into virtual hosts, scope
//!   projection, xDS) is reused whole when its works are the very same
//!   (`Arc` identity: all reused, the same routes on the same listeners)
//!   in the same order and relative age order ([`Gateways`] says why that
//!   is all it reads besides the context). Otherwise it is assembled
//!   again, and each of its route configurations splices every virtual
//!   host whose bytes would be the
//!   same: the same name, the very same routes in order (shared bytes,
//!   compared by address — the memo holds them, so an address is never
//!   reused by another route meanwhile), the same listener policy and the
//!   same configuration retry policy (`xds::route`). Fenced hosts are
//!   always built. Each route configuration's memo is consumed and updated
//!   in place: its entries, in host order, are walked beside this call's
//!   hosts (both in hostname order), an entry is taken only for an equal
//!   hostname — so the walk decides how many hosts are found, never which
//!   bytes are spliced — and a spliced host's entry moves into the next
//!   memo (no entry rebuilt, no name copied or hashed).
//! - **The route order and the age order** (the precedence tie-break):
//!   last call's two permutations are offered whatever changed, and each
//!   is taken only when its comparison is strictly increasing along it on
//!   this call's routes (`pipeline::sorted_by`): then it is the only
//!   sorted order, the one a sort would produce. A route added, removed,
//!   renamed or given another creation time fails that check (or the
//!   length check) and the routes are sorted again. The check is O(routes)
//!   comparisons, the sort it saves O(routes log routes).
//! - **Everything else** (Gateway and ListenerSet status, policy reports,
//!   HTTPProxy's cross-tree steps, route models, policy attachment) runs in full on every
//!   call: those steps read all routes at once (attached-route counts,
//!   policy target lists, FQDN conflicts), or (route models) borrow the
//!   call's inputs.
//! - **HTTPProxies** are not context: the HTTPProxy stage is memoised per
//!   tree (a root and what it includes), and an edit recomputes only the
//!   trees whose proxies it touched (`httpproxy.rs` says why that is
//!   sound). The Gateway serving them is assembled on every call.
//! - **STRICT**: the validator runs on every call (its verdicts are never
//!   memoised); the works it does not touch are built before it; no
//!   Gateway assembly, virtual host or route tail is reused under STRICT
//!   (it edits assembled configurations and route reports).
//! - **Extension hooks**: when hooks are configured, every call is a full
//!   translation and nothing is kept (a hook's reply may depend on anything,
//!   and `PostRouteModify` rewrites built routes).

pub mod httpproxy;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use api::Inputs;

use crate::Seams;
use crate::binding::ParentBinding;
use crate::gateway::GatewayState;
use crate::parallel;
use crate::pipeline::{self, PARALLEL_MIN_ROUTES, RouteTail, Work};
use crate::policy::scope::ScopeFence;
use crate::route::model::{Route, RouteKind};
use crate::xds::ConfigMemos;
use crate::{GatewayXds, Output, Settings};

/// Inputs the [`Translator`] may keep until its next call (the caller's
/// snapshot, shared rather than copied).
pub trait Held: Send + Sync {
    fn inputs(&self) -> &Inputs;
}

impl Held for Inputs {
    fn inputs(&self) -> &Inputs {
        self
    }
}

/// (kind, namespace, name), as the route model derives them.
type RouteKey = (RouteKind, String, String);

/// What the last call reused and rebuilt (for tests, benchmarks, logs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Why nothing was reused, if so.
    pub full: Option<Full>,
    /// Routes whose works were built.
    pub routes_built: usize,
    /// Routes whose works were reused.
    pub routes_reused: usize,
    /// Gateways whose assembled xDS was reused.
    pub gateways_reused: usize,
    /// In the Gateways assembled again: virtual hosts spliced unchanged
    /// from the previous assembly, and those encoded.
    pub hosts_spliced: usize,
    pub hosts_encoded: usize,
}

/// Why a call reused nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// The first call (or the one after hooks were configured).
    First,
    /// Settings or an input other than a route changed.
    Context,
    /// Extension hooks are configured: always a full translation.
    Hooks,
}

/// The incremental translator (see the module doc). Holds the previous
/// call's inputs, settings and route memos; no globals.
#[derive(Default)]
pub struct Translator {
    prev: Option<Prev>,
    stats: Stats,
    /// HTTPProxy trees of the last call (`httpproxy.rs`).
    proxy_trees: httpproxy::TreeStats,
    /// The inputs of the call before the last, no longer needed: handed to
    /// the caller ([`Translator::retire`]) so that freeing a whole snapshot
    /// is not part of a translation (it showed as ~5% of an edit's time at
    /// 10,000 routes when the translator held the last reference).
    retired: Option<Arc<dyn Held>>,
}

struct Prev {
    inputs: Arc<dyn Held>,
    settings: Settings,
    /// Per route of `inputs`, in input order (HTTPRoutes, then GRPCRoutes):
    /// what its translation made, `None` for a key held by several routes.
    slots: Vec<Option<Slot>>,
    /// Keys held by several routes of `inputs`.
    ambiguous: HashSet<RouteKey>,
    gateways: HashMap<String, GatewayMemo>,
    proxy_trees: httpproxy::Trees,
    orders: Option<Orders>,
}

/// One route's memo: its works, its bindings and (but under STRICT) its
/// tail. Kept by the route's position in the inputs, so that an edit which
/// adds, removes or renames no route finds every memo where it was — by
/// position and pointer, without hashing a key (at 10,000 routes the maps
/// keyed by (kind, namespace, name) cost a third of an edit).
pub(crate) struct Slot {
    works: Vec<Arc<Work>>,
    bindings: Arc<Vec<ParentBinding>>,
    tail: Option<RouteTail>,
}

/// Last call's route order and age order (indices into the routes as the
/// pipeline read them from the inputs, then sorted): candidates the
/// pipeline takes only when they still sort this call's routes strictly
/// (`pipeline::sorted_by`), so they are offered whatever changed.
pub(crate) struct Orders {
    pub(crate) sorted: Vec<usize>,
    pub(crate) by_age: Vec<usize>,
}

impl Translator {
    pub fn new() -> Self {
        Self::default()
    }

    /// What the last call reused.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Which HTTPProxy trees the last call recomputed (and how many it
    /// reused).
    pub fn httpproxy_trees(&self) -> &httpproxy::TreeStats {
        &self.proxy_trees
    }

    /// The inputs of the previous call, which the last call no longer
    /// needs: the caller may drop them off its critical path (after
    /// publishing the output). Not taken, they are dropped at the start of
    /// the next call.
    pub fn retire(&mut self) -> Option<Arc<dyn Held>> {
        self.retired.take()
    }

    /// Translates `inputs` as [`crate::translate_seams`] would, reusing the
    /// works of routes unchanged since the previous call.
    pub fn translate(&mut self, inputs: Arc<dyn Held>, settings: &Settings, seams: Seams<'_>) -> Output {
        let mut prev = self.prev.take();
        // Dropped here only if the caller did not take it after last call.
        self.retired = None;
        if seams.hooks.is_some() {
            let out = pipeline::translate_seams(inputs.inputs(), settings, seams);
            self.stats = Stats {
                full: Some(Full::Hooks),
                routes_built: inputs.inputs().http_routes.len() + inputs.inputs().grpc_routes.len(),
                ..Default::default()
            };
            self.proxy_trees = httpproxy::TreeStats::default();
            return out;
        }
        let new = inputs.inputs();
        let prior_orders = prev.as_mut().and_then(|p| p.orders.take());
        let n = new.http_routes.len() + new.grpc_routes.len();
        let (prior, ambiguous, prior_gateways, full, proxies) = match prev {
            None => (
                Vec::new(),
                duplicate_keys(new),
                HashMap::new(),
                Some(Full::First),
                Default::default(),
            ),
            Some(p) if !same_settings(&p.settings, settings) || !context_eq(p.inputs.inputs(), new) => {
                self.retired = Some(p.inputs);
                (
                    Vec::new(),
                    duplicate_keys(new),
                    HashMap::new(),
                    Some(Full::Context),
                    Default::default(),
                )
            }
            Some(mut p) => {
                let gateways = std::mem::take(&mut p.gateways);
                let trees = std::mem::take(&mut p.proxy_trees);
                let proxies = httpproxy::Memo::carry(trees, p.inputs.inputs(), new);
                let (prior, ambiguous, old) = carry(p, new);
                self.retired = Some(old);
                (prior, ambiguous, gateways, None, proxies)
            }
        };
        // Per route (input order): whether its key is held by several.
        let ambiguous_at: Vec<bool> = if ambiguous.is_empty() {
            vec![false; n]
        } else {
            input_keys(new).map(|k| ambiguous.contains(&k)).collect()
        };
        let mut memo = RouteMemo {
            prior,
            ambiguous,
            ambiguous_at,
            order: Vec::new(),
            built: 0,
            reused: 0,
            rebuilt: Vec::new(),
            works: Vec::new(),
            bindings: Vec::new(),
            next: Vec::new(),
            prior_gateways,
            next_gateways: HashMap::new(),
            gateways_reused: 0,
            proxies,
            hosts_spliced: 0,
            hosts_encoded: 0,
            prior_orders,
            next_orders: None,
        };
        let out = pipeline::translate_memo(new, settings, seams, Some(&mut memo));
        self.stats = Stats {
            full,
            routes_built: memo.built,
            routes_reused: memo.reused,
            gateways_reused: memo.gateways_reused,
            hosts_spliced: memo.hosts_spliced,
            hosts_encoded: memo.hosts_encoded,
        };
        let (proxy_trees, tree_stats) = memo.proxies.finish();
        self.proxy_trees = tree_stats;
        self.prev = Some(Prev {
            inputs,
            settings: settings.clone(),
            slots: memo.next,
            ambiguous: memo.ambiguous,
            gateways: memo.next_gateways,
            proxy_trees,
            orders: memo.next_orders,
        });
        out
    }
}

/// The pipeline's side of the memo: the slots to reuse, and every route's
/// slot for the next call.
pub(crate) struct RouteMemo {
    /// Last call's slots of the routes found unchanged, in input order
    /// (found through `order`); replaced in place by this call's.
    prior: Vec<Option<Slot>>,
    /// Keys held by more than one route: never reused nor kept.
    ambiguous: HashSet<RouteKey>,
    /// Per route, in input order: whether its key is in `ambiguous`.
    ambiguous_at: Vec<bool>,
    /// Per route in the pipeline's order: its position in the inputs.
    order: Vec<usize>,
    built: usize,
    reused: usize,
    /// Per route (pipeline order): whether its works were built this call.
    rebuilt: Vec<bool>,
    /// This call's works and bindings (pipeline order), kept for the next.
    works: Vec<Vec<Arc<Work>>>,
    bindings: Vec<Arc<Vec<ParentBinding>>>,
    /// The slots for the next call (input order).
    next: Vec<Option<Slot>>,
    prior_gateways: HashMap<String, GatewayMemo>,
    next_gateways: HashMap<String, GatewayMemo>,
    gateways_reused: usize,
    /// HTTPProxy trees (`httpproxy.rs`).
    pub(crate) proxies: httpproxy::Memo,
    hosts_spliced: usize,
    hosts_encoded: usize,
    /// Last call's orders, offered to the pipeline, and this call's.
    pub(crate) prior_orders: Option<Orders>,
    pub(crate) next_orders: Option<Orders>,
}

impl RouteMemo {
    /// The pipeline's route order: `sorted[i]` is the input position of its
    /// `i`-th route (the slots stay where they are, found through it).
    pub(crate) fn sorted(&mut self, sorted: &[usize]) {
        self.order = sorted.to_vec();
    }

    /// The offered slot of the pipeline's route `ri`, if any.
    fn prior_mut(&mut self, ri: usize) -> Option<&mut Slot> {
        let at = *self.order.get(ri)?;
        self.prior.get_mut(at)?.as_mut()
    }

    /// This call's works (pipeline order), for [`RouteMemo::keep`].
    pub(crate) fn keep_works(&mut self, works: Vec<Vec<Arc<Work>>>) {
        self.works = works;
    }

    /// Keeps every route's slot for the next call, with its tail (`None`
    /// under STRICT, whose tails are never reused), in input order, in
    /// place of the offered ones (`order` is a permutation: every position
    /// is written). Routes of an ambiguous key keep none.
    pub(crate) fn keep(&mut self, tails: Option<Vec<RouteTail>>) {
        let n = self.order.len();
        let mut works = std::mem::take(&mut self.works).into_iter();
        let mut bindings = std::mem::take(&mut self.bindings).into_iter();
        let mut tails = tails.map(Vec::into_iter);
        let mut next = std::mem::take(&mut self.prior);
        next.truncate(n);
        next.resize_with(n, || None);
        for &at in &self.order {
            let (w, b) = (works.next(), bindings.next());
            let tail = tails.as_mut().and_then(Iterator::next);
            let slot = match (w, b) {
                (Some(works), Some(bindings)) if !self.ambiguous_at.get(at).copied().unwrap_or(true) => {
                    Some(Slot {
                        works,
                        bindings,
                        tail,
                    })
                }
                _ => None,
            };
            if let Some(s) = next.get_mut(at) {
                *s = slot;
            }
        }
        self.next = next;
    }
}

/// The pipeline's binding of every route with the memo: an unchanged route
/// (its object the same, unique, and the context the same: the routes whose
/// works are offered for reuse) binds as last time — binding reads only the
/// route, the index, the Gateways' and ListenerSets' states, all context
/// (the attached-route counts it does not read are counted after it).
pub(crate) fn bind_all(
    memo: &mut RouteMemo,
    routes: &[Route<'_>],
    bind: impl Fn(&Route<'_>) -> Vec<ParentBinding>,
) -> Vec<Arc<Vec<ParentBinding>>> {
    let out: Vec<Arc<Vec<ParentBinding>>> = routes
        .iter()
        .enumerate()
        .map(|(ri, r)| match memo.prior_mut(ri) {
            Some(slot) => Arc::clone(&slot.bindings),
            None => Arc::new(bind(r)),
        })
        .collect();
    memo.bindings = out.clone();
    out
}

/// One Gateway's assembly (xDS and the scopes its policies fenced), with
/// the signature of the works it was assembled from.
struct GatewayMemo {
    signature: Signature,
    built: GatewayXds,
    fences: Vec<ScopeFence>,
    /// Its route configurations' virtual hosts, for an assembly that
    /// cannot be reused whole to splice the unchanged ones from.
    configs: Option<ConfigMemos>,
}

/// What a Gateway's assembly reads of its works: per work, in merge order,
/// the work itself (by identity) and the route's age rank *among this
/// Gateway's routes* (assembly only compares ages, so a route added
/// elsewhere, which shifts every absolute rank after it, does not change
/// it). A work is shared, never copied, between the slot that keeps it
/// and every call that reuses it, and a rebuilt work is a new allocation
/// (the signature holds the old one, so its address is not reused
/// meanwhile): the same work means the same route, reused, on the same
/// listener, with the same content.
type Signature = Vec<(Arc<Work>, usize)>;

fn same_signature(a: &Signature, b: &Signature) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((wa, aa), (wb, ab))| aa == ab && Arc::ptr_eq(wa, wb))
}

/// The pipeline's side of the Gateway memo: which Gateways' assembly is
/// reused, and every assembled Gateway kept for the next call.
///
/// A Gateway is reused only when its signature is the same as last time:
/// the very same works (so every one was reused: the route object
/// unchanged, the works' content the same), in the same order, in the same
/// relative age order. Everything else its assembly reads — scopes,
/// policies, ext_auth providers, the bind address — is context, unchanged
/// whenever a memo exists. Not reused: under STRICT (`reuse` false) or
/// hooks (no memo) and the Gateway serving HTTPProxies (its assembly reads
/// the proxies' routes too).
pub(crate) struct Gateways<'m> {
    memo: Option<&'m mut RouteMemo>,
    /// Whether assemblies and tails may be reused (not under STRICT).
    reuse_allowed: bool,
    keys: Vec<String>,
    signatures: Vec<Option<Signature>>,
    reuse: Vec<Reuse>,
}

/// Per Gateway: its whole assembly to reuse, or else (or also, to keep
/// them) the memos of its route configurations to splice from.
pub(crate) type Reuse = (Option<(GatewayXds, Vec<ScopeFence>)>, Option<ConfigMemos>);

impl<'m> Gateways<'m> {
    pub(crate) fn new(
        memo: Option<&'m mut RouteMemo>,
        reuse_allowed: bool,
        gateways: &[GatewayState<'_>],
        per_gateway: &[Vec<(usize, Arc<Work>)>],
        age_rank: &[usize],
        settings: &Settings,
    ) -> Self {
        let n = gateways.len();
        let memo = match memo {
            Some(m) if reuse_allowed => m,
            memo => {
                return Self {
                    memo,
                    reuse_allowed: false,
                    keys: Vec::new(),
                    signatures: vec![None; n],
                    reuse: (0..n).map(|_| (None, None)).collect(),
                };
            }
        };
        let served = settings
            .http_proxy
            .gateway
            .as_ref()
            .map(|(ns, name)| crate::naming::gateway(ns, name));
        let mut keys = Vec::with_capacity(n);
        let mut signatures = Vec::with_capacity(n);
        let mut reuse = Vec::with_capacity(n);
        for (gw, works) in gateways.iter().zip(per_gateway) {
            let key = gw.key();
            let prior = memo.prior_gateways.remove(&key);
            if served.as_deref() == Some(key.as_str()) {
                keys.push(key);
                signatures.push(None);
                reuse.push((None, None));
                continue;
            }
            let mut ages: Vec<usize> = works.iter().map(|(ri, _)| age_rank[*ri]).collect();
            ages.sort_unstable();
            ages.dedup();
            let signature: Signature = works
                .iter()
                .map(|(ri, w)| {
                    let age = ages.binary_search(&age_rank[*ri]).unwrap_or(usize::MAX);
                    (Arc::clone(w), age)
                })
                .collect();
            let (hit, configs) = match prior {
                Some(p) if same_signature(&p.signature, &signature) => (Some((p.built, p.fences)), p.configs),
                Some(p) => (None, p.configs),
                // No memo of this Gateway yet: an empty one asks the
                // assembly to make one.
                None => (None, Some(ConfigMemos::new())),
            };
            if hit.is_some() {
                memo.gateways_reused += 1;
            }
            keys.push(key);
            signatures.push(Some(signature));
            reuse.push((hit, configs));
        }
        Self {
            memo: Some(memo),
            reuse_allowed: true,
            keys,
            signatures,
            reuse,
        }
    }

    /// Per route (pipeline order): last call's status, diagnostics and
    /// replacements, for the routes whose works were reused — the object,
    /// its bindings (see [`bind_all`]) and its report (read from its works,
    /// and from STRICT and hooks, which run with no reuse) are the same.
    pub(crate) fn tails(&mut self, n: usize) -> Vec<Option<RouteTail>> {
        let reuse_allowed = self.reuse_allowed;
        let Some(memo) = self.memo.as_deref_mut().filter(|_| reuse_allowed) else {
            return (0..n).map(|_| None).collect();
        };
        (0..n)
            .map(|ri| {
                let reused = !memo.rebuilt.get(ri).copied().unwrap_or(true);
                memo.prior_mut(ri)
                    .filter(|_| reused)
                    .and_then(|slot| slot.tail.take())
            })
            .collect()
    }

    /// Keeps every route's slot, with its tail, for the next call (see
    /// [`RouteMemo::keep`]); under STRICT without the tail.
    pub(crate) fn keep_tails(&mut self, tails: Vec<RouteTail>) {
        let reuse_allowed = self.reuse_allowed;
        if let Some(memo) = self.memo.as_deref_mut() {
            memo.keep(reuse_allowed.then_some(tails));
        }
    }

    /// Per Gateway: its reused assembly, if any.
    pub(crate) fn take(&mut self) -> Vec<Reuse> {
        std::mem::take(&mut self.reuse)
    }

    /// Keeps Gateway `gi`'s assembly (and its route configurations' memos)
    /// for the next call.
    pub(crate) fn keep(
        &mut self,
        gi: usize,
        built: &GatewayXds,
        fences: &[ScopeFence],
        configs: Option<ConfigMemos>,
        reused: bool,
    ) {
        let (Some(memo), Some(Some(signature)), Some(key)) = (
            self.memo.as_deref_mut(),
            self.signatures.get_mut(gi),
            self.keys.get(gi),
        ) else {
            return;
        };
        if !reused {
            for c in configs.iter().flat_map(|c| c.values()) {
                memo.hosts_spliced += c.spliced;
                memo.hosts_encoded += c.encoded;
            }
        }
        memo.next_gateways.insert(
            key.clone(),
            GatewayMemo {
                signature: std::mem::take(signature),
                built: built.clone(),
                fences: fences.to_vec(),
                configs,
            },
        );
    }
}

/// The pipeline's `build_all` with the memo: reused works are shared as
/// they are (the pipeline supplies the route's position and age rank in
/// this translation beside them); the others are built (on `threads`).
pub(crate) fn build_all<'r>(
    memo: &mut RouteMemo,
    routes: &[Route<'r>],
    threads: usize,
    build: impl Fn(usize) -> Vec<Work> + Sync,
) -> Vec<Vec<Arc<Work>>> {
    let mut out: Vec<Option<Vec<Arc<Work>>>> = (0..routes.len())
        .map(|ri| memo.prior_mut(ri).map(|slot| std::mem::take(&mut slot.works)))
        .collect();
    let todo: Vec<usize> = (0..routes.len()).filter(|&ri| out[ri].is_none()).collect();
    memo.rebuilt = out.iter().map(Option::is_none).collect();
    memo.reused = routes.len() - todo.len();
    memo.built = todo.len();
    let built = parallel::map(todo.clone(), threads, PARALLEL_MIN_ROUTES, build);
    for (ri, works) in todo.into_iter().zip(built) {
        out[ri] = Some(works.into_iter().map(Arc::new).collect());
    }
    out.into_iter().map(Option::unwrap_or_default).collect()
}

fn http_key(r: &api::Sourced<api::gateway_api::experimental::httproutes::HttpRoute>) -> RouteKey {
    key(RouteKind::Http, &r.object.metadata)
}

fn key(kind: RouteKind, meta: &api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> RouteKey {
    // As `route::model::meta_common` derives them.
    (
        kind,
        meta.namespace.clone().unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
    )
}

/// Whether two objects' metadata give the same key (as [`key`], without
/// allocating it).
fn same_key(
    a: &api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    b: &api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    a.namespace.as_deref().unwrap_or("default") == b.namespace.as_deref().unwrap_or("default")
        && a.name.as_deref().unwrap_or_default() == b.name.as_deref().unwrap_or_default()
}

/// Every route's key, in input order (HTTPRoutes, then GRPCRoutes).
fn input_keys(inputs: &Inputs) -> impl Iterator<Item = RouteKey> + '_ {
    inputs.http_routes.iter().map(http_key).chain(
        inputs
            .grpc_routes
            .iter()
            .map(|r| key(RouteKind::Grpc, &r.object.metadata)),
    )
}

/// Keys held by more than one route of `inputs`.
fn duplicate_keys(inputs: &Inputs) -> HashSet<RouteKey> {
    let mut seen = HashSet::with_capacity(inputs.http_routes.len() + inputs.grpc_routes.len());
    let mut dup = HashSet::new();
    for k in input_keys(inputs) {
        if let Some(k) = seen.replace(k) {
            dup.insert(k);
        }
    }
    dup
}

/// Per route of `new` (input order): last call's slot when the route is
/// equal to its previous object (same key, unique in both); and the keys
/// `new` holds several times. Returns the previous inputs too, to retire.
///
/// When `new` has as many routes of each kind as last time and every
/// route has the key of the route last at its position (an edit that
/// adds, removes, renames or moves no route — each object is the same
/// allocation or, for an edited one, compared), the slots are taken by
/// position and the keys held several times are last call's: the keys
/// are the same list. Otherwise they are matched by key.
fn carry(mut prev: Prev, new: &Inputs) -> (Vec<Option<Slot>>, HashSet<RouteKey>, Arc<dyn Held>) {
    let old = prev.inputs.inputs();
    if let Some(same) = same_positions(old, new) {
        let mut slots = std::mem::take(&mut prev.slots);
        slots.resize_with(same.len(), || None);
        let prior = slots
            .into_iter()
            .zip(same)
            .map(|(slot, same)| slot.filter(|_| same))
            .collect();
        return (prior, prev.ambiguous, prev.inputs);
    }
    let ambiguous = duplicate_keys(new);
    let mut by_key: HashMap<RouteKey, usize> = HashMap::with_capacity(prev.slots.len());
    for (i, k) in input_keys(old).enumerate() {
        if !prev.ambiguous.contains(&k) {
            by_key.insert(k, i);
        }
    }
    let old_http = old.http_routes.len();
    let new_http = new.http_routes.len();
    let prior = input_keys(new)
        .enumerate()
        .map(|(j, k)| {
            if ambiguous.contains(&k) {
                return None;
            }
            let i = *by_key.get(&k)?;
            let same = match (i < old_http, j < new_http) {
                (true, true) => same_route(&old.http_routes[i], &new.http_routes[j]),
                (false, false) => same_route(&old.grpc_routes[i - old_http], &new.grpc_routes[j - new_http]),
                _ => false,
            };
            if !same {
                return None;
            }
            prev.slots.get_mut(i).and_then(Option::take)
        })
        .collect();
    (prior, ambiguous, prev.inputs)
}

/// Per route (input order), whether it is unchanged — when every route of
/// `new` has the key of the route of `old` at its position; `None` if not.
fn same_positions(old: &Inputs, new: &Inputs) -> Option<Vec<bool>> {
    fn kind<T: PartialEq>(
        old: &[api::Sourced<T>],
        new: &[api::Sourced<T>],
        meta: impl Fn(&T) -> &api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        out: &mut Vec<bool>,
    ) -> Option<()> {
        if old.len() != new.len() {
            return None;
        }
        for (o, n) in old.iter().zip(new) {
            if Arc::ptr_eq(&o.object, &n.object) {
                out.push(o.unreadable == n.unreadable);
                continue;
            }
            if !same_key(meta(&o.object), meta(&n.object)) {
                return None;
            }
            out.push(same_route(o, n));
        }
        Some(())
    }
    let mut out = Vec::with_capacity(new.http_routes.len() + new.grpc_routes.len());
    kind(&old.http_routes, &new.http_routes, |r| &r.metadata, &mut out)?;
    kind(&old.grpc_routes, &new.grpc_routes, |r| &r.metadata, &mut out)?;
    Some(out)
}

/// Whether a route builds the same works: the object and its unreadable
/// values. Not its source (file and line): works never read it (the
/// route's diagnostics are rendered from the route model after the works,
/// on every call), and an edit to one route moves the lines of the routes
/// after it in its file. The object is shared between snapshots (see
/// `api::Sourced`): an unchanged route is the same allocation, found
/// equal by pointer before any field is compared.
fn same_route<T: PartialEq>(a: &api::Sourced<T>, b: &api::Sourced<T>) -> bool {
    a.same(b)
}

#[cfg(test)]
mod compare_tests;

/// Whether two lists of one context kind are equal entry by entry (source
/// included, as `==` on the lists), each object by pointer first: at
/// 10,000 objects an unchanged kind costs a pointer compare per object.
fn same_kind<T: PartialEq>(a: &[api::Sourced<T>], b: &[api::Sourced<T>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.source == b.source && a.same(b))
}

/// Whether two settings build the same works. `transition_time` is
/// stamped only on status (Gateway, ListenerSet, route, policy and
/// HTTPProxy conditions), which is rendered in full on every call; `serve`
/// sets it to the current time on every translation.
fn same_settings(a: &Settings, b: &Settings) -> bool {
    let mut a = a.clone();
    a.transition_time.clone_from(&b.transition_time);
    a == *b
}

/// Whether every input other than the routes is equal. Destructured
/// exhaustively: a new input kind fails to compile here until it is
/// placed in the context (or shown to be route-local).
fn context_eq(a: &Inputs, b: &Inputs) -> bool {
    let Inputs {
        gateway_classes,
        gateways,
        listener_sets,
        http_routes: _,
        grpc_routes: _,
        reference_grants,
        namespaces,
        services,
        endpoint_slices,
        secrets,
        traffic_policies,
        gateway_extensions,
        // Judged per tree by the HTTPProxy memo (`httpproxy.rs`); nothing
        // else reads them.
        http_proxies: _,
        tls_certificate_delegations,
        extension_resources,
        gateway_parameters,
        provisioned_addresses,
    } = a;
    same_kind(gateway_classes, &b.gateway_classes)
        && same_kind(gateways, &b.gateways)
        && same_kind(listener_sets, &b.listener_sets)
        && same_kind(reference_grants, &b.reference_grants)
        && same_kind(namespaces, &b.namespaces)
        && same_kind(services, &b.services)
        && same_kind(endpoint_slices, &b.endpoint_slices)
        && same_kind(secrets, &b.secrets)
        && same_kind(traffic_policies, &b.traffic_policies)
        && same_kind(gateway_extensions, &b.gateway_extensions)
        && same_kind(tls_certificate_delegations, &b.tls_certificate_delegations)
        && same_kind(extension_resources, &b.extension_resources)
        && same_kind(gateway_parameters, &b.gateway_parameters)
        && *provisioned_addresses == b.provisioned_addresses
}
