//! Incremental translation: a [`Translator`] the caller holds between
//! translations reuses what an edit cannot have changed, and its output is
//! byte-identical to [`crate::translate_seams`] of the same inputs
//! (`tests/incremental.rs` checks this after every step of random edit
//! sequences).
//!
//! Data model. The translator keeps, from its previous call, the inputs it
//! was given (shared, never copied: [`Held`]), the settings, and per route
//! (keyed by kind, namespace, name):
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
//!     are the only things restamped. Tails are kept with their keys in
//!     route order and looked up by position first (the key compared),
//!     then by key from the first route found elsewhere: the lookup, not
//!     the reuse condition, is what the position saves.
//!
//!   Bindings and works are shared (`Arc`) between the memo and the
//!   pipeline, never copied.
//! - **A Gateway's assembly** (merging its works into virtual hosts, scope
//!   projection, xDS) is reused whole when all its works were reused and
//!   they are the same routes on the same listeners in the same relative
//!   order ([`Gateways`] says why that is all it reads besides the
//!   context). Otherwise it is assembled again, and each of its route
//!   configurations splices every virtual host whose bytes would be the
//!   same: the same name, the very same routes in order (shared bytes,
//!   compared by address — the memo holds them, so an address is never
//!   reused by another route meanwhile), the same listener policy and the
//!   same configuration retry policy (`xds::route`). Fenced hosts are
//!   always built.
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

/// Every route's works, by route.
type Works = HashMap<RouteKey, Vec<Arc<Work>>>;

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
/// call's inputs, settings and route works; no globals.
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
    works: HashMap<RouteKey, Vec<Arc<Work>>>,
    gateways: HashMap<String, GatewayMemo>,
    proxy_trees: httpproxy::Trees,
    bindings: HashMap<RouteKey, Arc<Vec<ParentBinding>>>,
    tails: Vec<(RouteKey, RouteTail)>,
    orders: Option<Orders>,
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
        let ambiguous = duplicate_keys(new);
        let prior_orders = prev.as_mut().and_then(|p| p.orders.take());
        let (prior, prior_gateways, prior_bindings, prior_tails, full, proxies) = match prev {
            None => (
                HashMap::new(),
                HashMap::new(),
                HashMap::new(),
                Vec::new(),
                Some(Full::First),
                Default::default(),
            ),
            Some(p) if !same_settings(&p.settings, settings) || !context_eq(p.inputs.inputs(), new) => {
                self.retired = Some(p.inputs);
                (
                    HashMap::new(),
                    HashMap::new(),
                    HashMap::new(),
                    Vec::new(),
                    Some(Full::Context),
                    Default::default(),
                )
            }
            Some(mut p) => {
                let gateways = std::mem::take(&mut p.gateways);
                let bindings = std::mem::take(&mut p.bindings);
                let tails = std::mem::take(&mut p.tails);
                let trees = std::mem::take(&mut p.proxy_trees);
                let proxies = httpproxy::Memo::carry(trees, p.inputs.inputs(), new);
                let (prior, old) = unchanged(p, new, &ambiguous);
                self.retired = Some(old);
                (prior, gateways, bindings, tails, None, proxies)
            }
        };
        let mut memo = RouteMemo {
            prior,
            next: HashMap::new(),
            ambiguous,
            built: 0,
            reused: 0,
            rebuilt: Vec::new(),
            prior_gateways,
            next_gateways: HashMap::new(),
            gateways_reused: 0,
            proxies,
            hosts_spliced: 0,
            hosts_encoded: 0,
            keys: Vec::new(),
            prior_bindings,
            next_bindings: HashMap::new(),
            prior_tails,
            next_tails: Vec::new(),
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
            works: memo.next,
            gateways: memo.next_gateways,
            proxy_trees,
            bindings: memo.next_bindings,
            tails: memo.next_tails,
            orders: memo.next_orders,
        });
        out
    }
}

/// The pipeline's side of the memo: works to reuse, and every route's
/// works for the next call.
pub(crate) struct RouteMemo {
    prior: HashMap<RouteKey, Vec<Arc<Work>>>,
    next: HashMap<RouteKey, Vec<Arc<Work>>>,
    /// Keys held by more than one route: never reused nor kept.
    ambiguous: HashSet<RouteKey>,
    built: usize,
    reused: usize,
    /// Per route (pipeline order): whether its works were built this call.
    rebuilt: Vec<bool>,
    prior_gateways: HashMap<String, GatewayMemo>,
    next_gateways: HashMap<String, GatewayMemo>,
    gateways_reused: usize,
    /// HTTPProxy trees (`httpproxy.rs`).
    pub(crate) proxies: httpproxy::Memo,
    hosts_spliced: usize,
    hosts_encoded: usize,
    /// The pipeline's routes' keys, in its order (set by [`bind_all`]).
    keys: Vec<RouteKey>,
    prior_bindings: HashMap<RouteKey, Arc<Vec<ParentBinding>>>,
    next_bindings: HashMap<RouteKey, Arc<Vec<ParentBinding>>>,
    /// Every route's tail with its key, in last call's route order: looked
    /// up by position first ([`Gateways::tails`]).
    prior_tails: Vec<(RouteKey, RouteTail)>,
    next_tails: Vec<(RouteKey, RouteTail)>,
    /// Last call's orders, offered to the pipeline, and this call's.
    pub(crate) prior_orders: Option<Orders>,
    pub(crate) next_orders: Option<Orders>,
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
    memo.keys = routes
        .iter()
        .map(|r| (r.kind, r.namespace.clone(), r.name.clone()))
        .collect();
    memo.next_bindings.reserve(routes.len());
    let mut out = Vec::with_capacity(routes.len());
    for (r, k) in routes.iter().zip(&memo.keys) {
        let b = match memo.prior_bindings.remove(k) {
            Some(b) if memo.prior.contains_key(k) => b,
            _ => Arc::new(bind(r)),
        };
        if !memo.ambiguous.contains(k) {
            memo.next_bindings.insert(k.clone(), Arc::clone(&b));
        }
        out.push(b);
    }
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

/// What a Gateway's assembly reads of its works besides their content:
/// per work, in merge order, the route's key and the listener, and the
/// route's age rank *among this Gateway's routes* (assembly only compares
/// ages, so a route added elsewhere, which shifts every absolute rank after
/// it, does not change it).
type Signature = Vec<(RouteKey, usize, usize)>;

/// The pipeline's side of the Gateway memo: which Gateways' assembly is
/// reused, and every assembled Gateway kept for the next call.
///
/// A Gateway is reused only when every one of its works was reused (the
/// route object unchanged, so the works' content is the same) and its
/// signature is equal to last time's: the same routes, in the same order,
/// on the same listeners, in the same relative age order. Everything else
/// its assembly reads — scopes, policies, ext_auth providers, the bind
/// address — is context, unchanged whenever a memo exists. Not reused:
/// under STRICT or hooks (not given a memo) and the Gateway serving
/// HTTPProxies (its assembly reads the proxies' routes too).
pub(crate) struct Gateways<'m> {
    memo: Option<&'m mut RouteMemo>,
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
        gateways: &[GatewayState<'_>],
        per_gateway: &[Vec<(usize, Arc<Work>)>],
        routes: &[Route<'_>],
        age_rank: &[usize],
        settings: &Settings,
    ) -> Self {
        let n = gateways.len();
        let Some(memo) = memo else {
            return Self {
                memo: None,
                keys: Vec::new(),
                signatures: vec![None; n],
                reuse: (0..n).map(|_| (None, None)).collect(),
            };
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
                    let r = &routes[*ri];
                    let age = ages.binary_search(&age_rank[*ri]).unwrap_or(usize::MAX);
                    ((r.kind, r.namespace.clone(), r.name.clone()), w.listener, age)
                })
                .collect();
            let all_reused = works
                .iter()
                .all(|(ri, _)| !memo.rebuilt.get(*ri).copied().unwrap_or(true));
            let (hit, configs) = match prior {
                Some(p) if all_reused && p.signature == signature => (Some((p.built, p.fences)), p.configs),
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
            keys,
            signatures,
            reuse,
        }
    }

    /// Per route (pipeline order): last call's status, diagnostics and
    /// replacements, for the routes whose works were reused — the object,
    /// its bindings (see [`bind_all`]) and its report (read from its works,
    /// and from STRICT and hooks, which run with no memo) are the same.
    pub(crate) fn tails(&mut self, n: usize) -> Vec<Option<RouteTail>> {
        let Some(memo) = self.memo.as_deref_mut() else {
            return (0..n).map(|_| None).collect();
        };
        // Last call's tails by position: when the routes are the same keys
        // in the same order (an edit that adds, removes or renames no
        // route), each is found where it was, and the key comparison is
        // all the lookup costs. From the first one not found there, the
        // remaining ones are looked up by key.
        let mut by_position: Vec<Option<(RouteKey, RouteTail)>> = std::mem::take(&mut memo.prior_tails)
            .into_iter()
            .map(Some)
            .collect();
        let mut by_key: Option<HashMap<RouteKey, RouteTail>> = None;
        (0..n)
            .map(|ri| {
                let reused = !memo.rebuilt.get(ri).copied().unwrap_or(true);
                let k = memo.keys.get(ri)?;
                if !reused {
                    return None;
                }
                if by_key.is_none()
                    && let Some(slot) = by_position.get_mut(ri)
                    && slot.as_ref().is_some_and(|(pk, _)| pk == k)
                {
                    return slot.take().map(|(_, t)| t);
                }
                by_key
                    .get_or_insert_with(|| by_position.iter_mut().filter_map(Option::take).collect())
                    .remove(k)
            })
            .collect()
    }

    /// Keeps every route's tail for the next call, with its key, in route
    /// order. The tails of keys held by several routes are kept too but
    /// never taken: a tail is taken only for a route whose works were
    /// reused, and works are never reused for such a key.
    pub(crate) fn keep_tails(&mut self, tails: Vec<RouteTail>) {
        let Some(memo) = self.memo.as_deref_mut() else {
            return;
        };
        memo.next_tails = std::mem::take(&mut memo.keys).into_iter().zip(tails).collect();
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
    let keys: Vec<RouteKey> = routes
        .iter()
        .map(|r| (r.kind, r.namespace.clone(), r.name.clone()))
        .collect();
    let mut out: Vec<Option<Vec<Arc<Work>>>> = keys.iter().map(|k| memo.prior.remove(k)).collect();
    let todo: Vec<usize> = (0..routes.len()).filter(|&ri| out[ri].is_none()).collect();
    memo.rebuilt = out.iter().map(Option::is_none).collect();
    memo.reused = routes.len() - todo.len();
    memo.built = todo.len();
    let built = parallel::map(todo.clone(), threads, PARALLEL_MIN_ROUTES, build);
    for (ri, works) in todo.into_iter().zip(built) {
        out[ri] = Some(works.into_iter().map(Arc::new).collect());
    }
    memo.next.reserve(routes.len());
    for (k, works) in keys.into_iter().zip(&out) {
        if let Some(works) = works
            && !memo.ambiguous.contains(&k)
        {
            memo.next.insert(k, works.clone());
        }
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

/// Keys held by more than one route of `inputs`.
fn duplicate_keys(inputs: &Inputs) -> HashSet<RouteKey> {
    let mut seen = HashSet::with_capacity(inputs.http_routes.len() + inputs.grpc_routes.len());
    let mut dup = HashSet::new();
    let keys = inputs.http_routes.iter().map(http_key).chain(
        inputs
            .grpc_routes
            .iter()
            .map(|r| key(RouteKind::Grpc, &r.object.metadata)),
    );
    for k in keys {
        if let Some(k) = seen.replace(k) {
            dup.insert(k);
        }
    }
    dup
}

/// The previous works of the routes of `new` equal to their previous
/// object (same key, unique in both).
fn unchanged(mut prev: Prev, new: &Inputs, ambiguous: &HashSet<RouteKey>) -> (Works, Arc<dyn Held>) {
    let old = prev.inputs.inputs();
    let old_dup = duplicate_keys(old);
    let mut old_http = HashMap::with_capacity(old.http_routes.len());
    for r in &old.http_routes {
        old_http.insert(http_key(r), r);
    }
    let mut old_grpc = HashMap::with_capacity(old.grpc_routes.len());
    for r in &old.grpc_routes {
        old_grpc.insert(key(RouteKind::Grpc, &r.object.metadata), r);
    }
    let mut prior = HashMap::with_capacity(new.http_routes.len() + new.grpc_routes.len());
    let mut take = |k: RouteKey, same: bool| {
        if same
            && !ambiguous.contains(&k)
            && !old_dup.contains(&k)
            && let Some(w) = prev.works.remove(&k)
        {
            prior.insert(k, w);
        }
    };
    for r in &new.http_routes {
        let k = http_key(r);
        let same = old_http.get(&k).is_some_and(|o| same_route(o, r));
        take(k, same);
    }
    for r in &new.grpc_routes {
        let k = key(RouteKind::Grpc, &r.object.metadata);
        let same = old_grpc.get(&k).is_some_and(|o| same_route(o, r));
        take(k, same);
    }
    (prior, prev.inputs)
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
