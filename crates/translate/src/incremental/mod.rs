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
//! - **The context** — every input that is not an HTTPRoute, GRPCRoute,
//!   EndpointSlice, Service, Secret, TrafficPolicy, HTTPProxy, Gateway,
//!   ListenerSet, ReferenceGrant, Namespace or GatewayExtension
//!   (GatewayClasses, TLSCertificateDelegations, extension objects) and the
//!   [`Settings`]. A route's works read the context
//!   through the index, the Gateway and listener states, its bindings, its
//!   effective policies and the scopes above it. Any change to the context
//!   — compared exactly (`PartialEq`), kind by kind through an exhaustive
//!   destructuring of [`api::Inputs`], so a new input kind cannot be
//!   forgotten — drops every memo: everything is rebuilt.
//! - **Gateways and ListenerSets** are judged by what names them
//!   ([`gateway_edits`]): one edited in place rebuilds the routes whose
//!   parentRefs name it (or a ListenerSet attached to it), as if they were
//!   edited, and its assembly from nothing; one added, removed, renamed,
//!   moved, given another class, or a default Gateway or the one serving
//!   HTTPProxies drops every memo, as a context change.
//! - **Namespaces** are judged by their labels, read only for the
//!   namespace of the route or ListenerSet asking ([`namespaces`]): the
//!   routes in a relabelled namespace are rebuilt as if edited, and the
//!   ListenerSets in one count as edited in place.
//! - **ReferenceGrants** are judged by who looked into their namespace
//!   ([`reference_grants`]), noted as Service lookups are: an edit of
//!   them rebuilds the routes that looked into a changed grant's
//!   namespace; one looked into outside the routes (a listener's
//!   certificate) drops every memo.
//! - **Services** are judged by who looked them up ([`services`]): every
//!   lookup is noted, per route (its works and report) or unscoped (the
//!   rest of the call). An edit of Services alone rebuilds the routes that
//!   looked a changed one up, as if they were edited, and the
//!   ClusterLoadAssignments of its clusters (as an EndpointSlice edit
//!   does); a changed Service looked up unscoped since the last full
//!   translation (an ext_auth provider's, an HTTPProxy's) drops every
//!   memo, as a context change.
//! - **Secrets** are judged by whether a changed one was looked up since
//!   the last full translation ([`secrets`]): if so, every memo is dropped;
//!   else nothing is rebuilt.
//! - **TrafficPolicies** are judged by what they reach ([`policies`]): an
//!   edit of them rebuilds the routes whose effective policies differ from
//!   those their works were built with (kept in the slot), the routes bound
//!   to a Gateway whose scopes (Gateway and listener policies) changed, and
//!   that Gateway's assembly from nothing. Unchanged (with the
//!   GatewayExtensions), they are not compiled again, and while no route
//!   head changed either, not attached or reported again
//!   ([`standing_policies`]).
//! - **GatewayExtensions** (ext_authz providers) are read by the policies
//!   (an extension a policy cannot use makes its effective policy say so)
//!   and by each Gateway's assembly (the filter config of every provider
//!   it uses: `policy::ext_auth::install`): an edit of them is judged as a
//!   TrafficPolicy edit, and every Gateway is assembled from nothing. The
//!   Services a provider looks up are unscoped reads ([`services`]).
//! - **EndpointSlices** are read only by ClusterLoadAssignments, resolved
//!   when a Gateway is assembled (`crate::endpoints`), and by the endpoint
//!   guard's diagnostics, made again whenever the slices (objects or
//!   sources) changed, and else last call's (they read nothing else but
//!   Services and settings, context): an edit of them alone reuses
//!   routes and Gateways as a route edit does, and a reused Gateway's
//!   assignments of the Services whose slices changed are built again
//!   ([`endpoints`] says why that is sound).
//! - **A route** (HTTPRoute, GRPCRoute) is *unchanged* when the object and
//!   its unreadable values are equal to the previous call's object of the
//!   same kind, namespace and name, and that key is unique in both inputs.
//!   Finding it ([`carry`]): when every route of this call has the key of
//!   the route at its position last call (an edit that adds, removes,
//!   renames or moves no route — each position compared by pointer, a
//!   changed object by its key), the slots are taken by position and the
//!   ambiguous keys are last call's (the key list is the same); otherwise
//!   they are matched by key: per kind, the routes at the start and the
//!   end that are the very same objects as last call's are paired by
//!   position (one object has one key), the others (what the edit added,
//!   removed, moved or replaced) by key, and which keys are held several
//!   times is known from last call's key counts, updated by the keys of
//!   the routes removed and added ([`Keys`]: an added route costs its own
//!   key, not every route's). Either way no slot moves to another key, so
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
//!     are the only things restamped. Such a route's report is made only
//!     if its tail is not taken after all (its HTTPProxy conflicts
//!     changed): nothing else reads it.
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
//!   Where the Gateway has no Gateway or listener policy (and no STRICT,
//!   hooks or HTTPProxies), only the hosts the changed works name are
//!   merged into the IR at all; the others are spliced as they are
//!   ([`dirty_hosts`] says why that is sound).
//! - **The route order and the age order** (the precedence tie-break):
//!   last call's two permutations (kept by input position) are offered
//!   whatever changed, renumbered when routes moved ([`Orders::renumbered`]:
//!   removed routes dropped, added ones inserted by binary search), and
//!   each is taken only when its comparison is strictly increasing along
//!   it on this call's routes (`pipeline::sorted_by`): then it is the only
//!   sorted order, the one a sort would produce. Two neighbours that are
//!   both the very same objects as last call's (same `Arc`, so the same
//!   key and creation time) in an order that was strict last call are not
//!   compared: the renumbered order keeps the relative order of the routes
//!   it kept, and strictness holds on a subsequence. So the check compares
//!   only next to a route added, edited or matched by key
//!   ([`Stats::order_compares`]); a route moved or given another key or
//!   creation time fails it and the routes are sorted again.
//! - **Route models** (`route::model::Route`) borrow the call's inputs, so
//!   none is kept: every call builds every route's *head* (key, creation
//!   time, source, labels: borrowed, nothing allocated), which ordering,
//!   the age tie-break and policy targets read. Its hostnames, parentRefs
//!   and rules are built from the object only when first read: for the
//!   routes whose bindings, works or tails are built (under STRICT every
//!   tail is), the routes a default Gateway may claim, and (rules) the
//!   routes programmed on no listener whose tail is built, whose
//!   references are checked then; policy attachment by rule
//!   `sectionName` and STRICT's mapping of a rejected route to its rule
//!   read rule names from the object. An unchanged route's model is thus neither built nor dropped
//!   beyond its head ([`Stats::models_read`]).
//! - **Everything else** (Gateway and ListenerSet status, HTTPProxy's
//!   cross-tree steps, policy scopes) runs in full on every call: those
//!   steps read all routes at once (attached-route counts, FQDN
//!   conflicts). Policy compilations, attachment and reports are reused
//!   only as [`standing_policies`] says (no policy changed, and no route
//!   head a policy may read).
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

mod dense_ranks;
pub(crate) mod dirty_hosts;
pub(crate) mod endpoints;
pub(crate) mod gateway_edits;
pub mod httpproxy;
pub(crate) mod namespaces;
pub(crate) mod policies;
pub(crate) mod recovery;
pub(crate) mod reference_grants;
pub(crate) mod secrets;
pub(crate) mod services;
pub(crate) mod standing_policies;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use api::Inputs;

use crate::Seams;
use crate::binding::ParentBinding;
use crate::gateway::GatewayState;
use crate::parallel;
use crate::pipeline::{self, GatewayWork, PARALLEL_MIN_ROUTES, RouteTail, Work};
use crate::policy::scope::ScopeFence;
use crate::route::model::{Route, RouteKind};
use crate::service_reads::{self, Reads};
use crate::xds::{self, Clusters, ConfigMemos};
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

/// What the last call reused and rebuilt (for tests, benchmarks, logs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Why nothing was reused, if so.
    pub full: Option<Full>,
    /// Routes whose works were built.
    pub routes_built: usize,
    /// Routes whose works were reused.
    pub routes_reused: usize,
    /// Routes whose model was read beyond its head (hostnames, parentRefs
    /// or rules, built lazily: `route::model::Route`): those whose
    /// bindings, works or tails were built, not every route.
    pub models_read: usize,
    /// How many of the two route orders (by key, by age) were sorted
    /// again rather than taken from last call's (`pipeline::sorted_by`).
    pub route_sorts: usize,
    /// Comparisons made checking last call's orders: those next to a
    /// route that is not the very same object as last call's.
    pub order_compares: usize,
    /// Gateways whose assembled xDS was reused.
    pub gateways_reused: usize,
    /// In the Gateways assembled again: virtual hosts spliced unchanged
    /// from the previous assembly, and those encoded.
    pub hosts_spliced: usize,
    pub hosts_encoded: usize,
    /// In the Gateways assembled again: virtual hosts merged into the IR
    /// (the others, clean, are spliced without being merged:
    /// [`dirty_hosts`]).
    pub hosts_merged: usize,
    /// In the Gateways assembled again: works merged into the IR (a
    /// partial assembly that may leave clean works out merges only those
    /// naming a dirty host: [`dirty_hosts::Partial::clean_skippable`]).
    pub works_merged: usize,
    /// In the Gateways reused after an EndpointSlice edit: the
    /// ClusterLoadAssignments built again (those of the clusters of the
    /// Services whose slices changed: [`endpoints`]).
    pub assignments_rebuilt: usize,
    /// Whether last call's policy attachment was reused (no policy, no
    /// GatewayExtension and no route head changed: [`standing_policies`]).
    pub attachment_reused: bool,
}

/// Why a call reused nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// The first call (or the one after hooks were configured).
    First,
    /// Settings or an input of the context changed, a Service looked up
    /// outside the routes ([`services`]), a ReferenceGrant namespace looked
    /// into outside them ([`reference_grants`]), or Gateways or
    /// ListenerSets in a way only a full translation handles
    /// ([`gateway_edits`]).
    Context,
    /// Extension hooks are configured: always a full translation.
    Hooks,
    /// The incremental call panicked and was made again in full from no
    /// memo ([`recovery`]).
    Recovered,
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
    /// Every route key of `inputs`, with how many routes hold it.
    keys: Keys,
    gateways: HashMap<String, GatewayMemo>,
    proxy_trees: httpproxy::Trees,
    orders: Option<Orders>,
    /// The endpoint guard's diagnostics (`endpoint_guard::diagnostics`).
    endpoint_warnings: Vec<crate::Diagnostic>,
    /// The Services looked up outside any route's recording since the last
    /// full translation ([`services`]).
    unscoped_service_reads: Reads,
    /// Per Gateway (the pipeline's order), its scopes ([`policies`]).
    scopes: Vec<crate::policy::scope::GatewayScopes>,
    /// The Secrets looked up since the last full translation ([`secrets`]).
    secret_reads: Reads,
    /// Per Gateway, what a route bound by sectionName reads of it
    /// ([`gateway_edits::judge_listeners`]).
    listeners: gateway_edits::Listeners,
    /// The policies' compilations, attachment, attachment records and
    /// reports ([`standing_policies`]).
    standing: standing_policies::Standing,
}

/// One route's memo: its works, its bindings and (but under STRICT) its
/// tail. Kept by the route's position in the inputs, so that an edit which
/// adds, removes or renames no route finds every memo where it was — by
/// position and pointer, without hashing a key (at 10,000 routes the maps
/// keyed by (kind, namespace, name) cost a third of an edit).
pub(crate) struct Slot {
    works: Vec<Arc<Work>>,
    /// Taken by the call that reuses them ([`bind_all`]).
    bindings: Option<Arc<Vec<ParentBinding>>>,
    /// Boxed: slots are moved every call, and a tail is read only when
    /// reused.
    tail: Option<Box<RouteTail>>,
    /// The Services building its works and its report looked up
    /// ([`services`]).
    service_reads: Reads,
    /// The effective policies its works were built with ([`policies`]).
    policies: policies::KeptPolicies,
}

/// Last call's route order and age order, both as input positions (the
/// routes as the pipeline reads them: HTTPRoutes, then GRPCRoutes):
/// candidates the pipeline takes only when they still sort this call's
/// routes strictly (`pipeline::sorted_by`), so they are offered whatever
/// changed. When routes moved, [`carry`] renumbers them ([`Orders::renumbered`]:
/// the routes removed dropped, the routes added left for the pipeline to
/// insert).
pub(crate) struct Orders {
    pub(crate) sorted: Vec<usize>,
    pub(crate) by_age: Vec<usize>,
    /// Whether each order was strictly increasing (no two routes equal):
    /// then two routes that are the very same objects as last call's
    /// keep their relative order unchecked (`pipeline::sorted_by`).
    pub(crate) sorted_strict: bool,
    pub(crate) by_age_strict: bool,
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
    /// works of routes unchanged since the previous call. Should reusing
    /// them panic, the call is made again in full from no memo
    /// ([`recovery`]).
    pub fn translate(&mut self, inputs: Arc<dyn Held>, settings: &Settings, seams: Seams<'_>) -> Output {
        if self.prev.is_none() {
            return self.translate_once(inputs, settings, seams);
        }
        let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.translate_once(inputs.clone(), settings, seams)
        }));
        match attempt {
            Ok(out) => out,
            Err(payload) => {
                // Whatever the failed call left half-built is dropped.
                self.prev = None;
                self.retired = None;
                let mut out = self.translate_once(inputs, settings, seams);
                self.stats.full = Some(Full::Recovered);
                out.diagnostics.push(recovery::diagnostic(payload.as_ref()));
                out
            }
        }
    }

    fn translate_once(&mut self, inputs: Arc<dyn Held>, settings: &Settings, seams: Seams<'_>) -> Output {
        let mut prev = self.prev.take();
        // Dropped here only if the caller did not take it after last call.
        self.retired = None;
        if seams.hooks.is_some() {
            let out = pipeline::translate_seams(inputs.inputs(), settings, seams);
            self.stats = Stats {
                full: Some(Full::Hooks),
                routes_built: inputs.inputs().http_routes.len() + inputs.inputs().grpc_routes.len(),
                models_read: inputs.inputs().http_routes.len() + inputs.inputs().grpc_routes.len(),
                ..Default::default()
            };
            self.proxy_trees = httpproxy::TreeStats::default();
            return out;
        }
        let new = inputs.inputs();
        let mut prior_orders = prev.as_mut().and_then(|p| p.orders.take());
        let n = new.http_routes.len() + new.grpc_routes.len();
        // EndpointSlices changed, and nothing else of the context: routes and
        // Gateways are reused as after a route edit ([`endpoints`]).
        let mut endpoints_changed = prev
            .as_ref()
            .filter(|p| !same_kind(&p.inputs.inputs().endpoint_slices, &new.endpoint_slices))
            .map(|p| endpoints::changed_services(&p.inputs.inputs().endpoint_slices, &new.endpoint_slices));
        // TrafficPolicies changed: the routes and Gateways they reach are
        // rebuilt ([`policies`]).
        let policies_changed = prev
            .as_ref()
            .is_some_and(|p| !same_kind(&p.inputs.inputs().traffic_policies, &new.traffic_policies));
        // GatewayExtensions changed: judged as a policy edit, and every
        // Gateway assembled from nothing ([`policies`]).
        let extensions_changed = prev
            .as_ref()
            .is_some_and(|p| !same_kind(&p.inputs.inputs().gateway_extensions, &new.gateway_extensions));
        // Secrets changed: nothing to rebuild unless one was looked up
        // ([`secrets`]).
        let secrets_changed = prev
            .as_ref()
            .filter(|p| !same_kind(&p.inputs.inputs().secrets, &new.secrets))
            .map(|p| secrets::changed(&p.inputs.inputs().secrets, &new.secrets));
        // Services changed: their readers are rebuilt ([`services`]).
        let services_changed = prev
            .as_ref()
            .filter(|p| !same_kind(&p.inputs.inputs().services, &new.services))
            .map(|p| services::changed(&p.inputs.inputs().services, &new.services));
        // ReferenceGrants changed: the routes that looked into a changed
        // grant's namespace are rebuilt ([`reference_grants`]).
        let grants_changed = prev
            .as_ref()
            .filter(|p| !same_kind(&p.inputs.inputs().reference_grants, &new.reference_grants))
            .map(|p| reference_grants::changed(&p.inputs.inputs().reference_grants, &new.reference_grants));
        // Namespaces relabelled: the routes and ListenerSets in them are
        // rebuilt ([`namespaces`]).
        let relabelled = prev
            .as_ref()
            .filter(|p| !same_kind(&p.inputs.inputs().namespaces, &new.namespaces))
            .map(|p| namespaces::relabelled(&p.inputs.inputs().namespaces, &new.namespaces))
            .unwrap_or_default();
        // Gateways changed: the routes naming them are rebuilt, unless
        // only a full translation is sound ([`gateway_edits`]).
        let gateway_edit = prev
            .as_ref()
            .map(|p| gateway_edits::judge(p.inputs.inputs(), new, settings, &relabelled));
        // The endpoint guard's diagnostics read the EndpointSlices (with
        // their sources), their Services and the settings: reused when none
        // of them changed.
        let endpoint_warnings = prev
            .as_mut()
            .filter(|_| endpoints_changed.is_none() && services_changed.is_none())
            .map(|p| std::mem::take(&mut p.endpoint_warnings));
        let Start {
            prior,
            keys,
            gateways: prior_gateways,
            full,
            proxies,
            same_object,
            unscoped_reads,
            scopes: prior_scopes,
            secret_reads,
            listeners: prior_listeners,
            listener_checks,
            standing: prior_standing,
        } = match prev {
            None => Start::full(new, Full::First),
            Some(p)
                if !same_settings(&p.settings, settings)
                    || !context_eq(p.inputs.inputs(), new)
                    || matches!(gateway_edit, Some(gateway_edits::Judgement::Full))
                    || grants_changed
                        .as_ref()
                        .is_some_and(|c| p.unscoped_service_reads.touches(c))
                    || services_changed
                        .as_ref()
                        .is_some_and(|c| c.forces_full(&p.unscoped_service_reads))
                    || secrets_changed
                        .as_ref()
                        .is_some_and(|c| secrets::forces_full(c, &p.secret_reads)) =>
            {
                self.retired = Some(p.inputs);
                Start::full(new, Full::Context)
            }
            Some(mut p) => {
                let unscoped_reads = std::mem::take(&mut p.unscoped_service_reads);
                let scopes = std::mem::take(&mut p.scopes);
                let secret_reads = std::mem::take(&mut p.secret_reads);
                let listeners = std::mem::take(&mut p.listeners);
                // Reused only if what compiles the policies is unchanged.
                let standing = match policies_changed || extensions_changed {
                    true => Default::default(),
                    false => std::mem::take(&mut p.standing),
                };
                let mut gateways = std::mem::take(&mut p.gateways);
                let trees = std::mem::take(&mut p.proxy_trees);
                let proxies = httpproxy::Memo::carry(trees, p.inputs.inputs(), new);
                let Carried {
                    mut prior,
                    keys,
                    old,
                    moved,
                    same_object,
                } = carry(p, new);
                self.retired = Some(old);
                if let Some(moved) = moved {
                    prior_orders = prior_orders.map(|o| o.renumbered(&moved));
                }
                if let Some(changed) = &services_changed {
                    changed.rebuild_readers(&mut prior, &mut endpoints_changed);
                }
                if let Some(changed) = &grants_changed {
                    reference_grants::rebuild_readers(changed, &mut prior);
                }
                namespaces::rebuild_routes(&relabelled, new, &mut prior);
                if extensions_changed {
                    // Each installs the filters of the providers it uses.
                    gateways.clear();
                }
                let mut listener_checks = gateway_edits::ListenerChecks::default();
                if let Some(gateway_edits::Judgement::Scoped(changed)) = &gateway_edit {
                    listener_checks = changed.rebuild_routes(new, &mut prior);
                    // Assembled from nothing.
                    gateways.retain(|key, _| !changed.gateways.contains(key));
                }
                Start {
                    prior,
                    keys,
                    gateways,
                    full: None,
                    proxies,
                    same_object,
                    unscoped_reads,
                    scopes,
                    secret_reads,
                    listeners,
                    listener_checks,
                    standing,
                }
            }
        };
        // Per route (input order): whether its key is held by several
        // (looked up only when some key is).
        let ambiguous_at: Vec<bool> = if keys.several == 0 {
            vec![false; n]
        } else {
            input_metas(new)
                .map(|(kind, m)| keys.count(kind, m) > 1)
                .collect()
        };
        let mut memo = RouteMemo {
            prior,
            keys,
            ambiguous_at,
            order: Vec::new(),
            built: 0,
            reused: 0,
            models_read: 0,
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
            hosts_merged: 0,
            works_merged: 0,
            endpoints_changed,
            assignments_rebuilt: 0,
            endpoint_warnings: endpoint_warnings.filter(|_| full.is_none()),
            prior_orders,
            next_orders: None,
            same_object,
            route_sorts: 0,
            order_compares: 0,
            service_reads: Vec::new(),
            unscoped_service_reads: None,
            secret_reads: None,
            policies_changed: (policies_changed || extensions_changed) && full.is_none(),
            prior_scopes,
            next_scopes: Vec::new(),
            listener_checks,
            prior_listeners,
            next_listeners: Default::default(),
            scopes_changed: Vec::new(),
            policies: Vec::new(),
            prior_standing,
            next_standing: Default::default(),
            attachment_reused: false,
        };
        let out = pipeline::translate_memo(new, settings, seams, Some(&mut memo));
        self.stats = Stats {
            full,
            routes_built: memo.built,
            routes_reused: memo.reused,
            models_read: memo.models_read,
            route_sorts: memo.route_sorts,
            order_compares: memo.order_compares,
            gateways_reused: memo.gateways_reused,
            hosts_spliced: memo.hosts_spliced,
            hosts_encoded: memo.hosts_encoded,
            hosts_merged: memo.hosts_merged,
            works_merged: memo.works_merged,
            assignments_rebuilt: memo.assignments_rebuilt,
            attachment_reused: memo.attachment_reused,
        };
        let (proxy_trees, tree_stats) = memo.proxies.finish();
        self.proxy_trees = tree_stats;
        self.prev = Some(Prev {
            inputs,
            settings: settings.clone(),
            slots: memo.next,
            keys: memo.keys,
            gateways: memo.next_gateways,
            proxy_trees,
            orders: memo.next_orders,
            endpoint_warnings: memo.endpoint_warnings.unwrap_or_default(),
            // Since the last full translation (parts reused from earlier
            // calls did not look theirs up again).
            unscoped_service_reads: unscoped_reads.union(&memo.unscoped_service_reads.unwrap_or_default()),
            scopes: memo.next_scopes,
            secret_reads: secret_reads.union(&memo.secret_reads.unwrap_or_default()),
            listeners: memo.next_listeners,
            standing: memo.next_standing,
        });
        out
    }
}

/// What a call starts from: last call's memos, carried to this call's
/// inputs (none for a full translation).
struct Start {
    prior: Vec<Option<Slot>>,
    keys: Keys,
    gateways: HashMap<String, GatewayMemo>,
    /// Why nothing is reused, if so.
    full: Option<Full>,
    proxies: httpproxy::Memo,
    same_object: Vec<bool>,
    unscoped_reads: Reads,
    scopes: Vec<crate::policy::scope::GatewayScopes>,
    secret_reads: Reads,
    listeners: gateway_edits::Listeners,
    listener_checks: gateway_edits::ListenerChecks,
    standing: standing_policies::Standing,
}

impl Start {
    /// Nothing to reuse.
    fn full(new: &Inputs, why: Full) -> Self {
        Start {
            prior: Vec::new(),
            keys: Keys::of(new),
            gateways: HashMap::new(),
            full: Some(why),
            proxies: Default::default(),
            same_object: Vec::new(),
            unscoped_reads: Reads::default(),
            scopes: Vec::new(),
            secret_reads: Reads::default(),
            listeners: Default::default(),
            listener_checks: Default::default(),
            standing: Default::default(),
        }
    }
}

/// The pipeline's side of the memo: the slots to reuse, and every route's
/// slot for the next call.
pub(crate) struct RouteMemo {
    /// Last call's slots of the routes found unchanged, in input order
    /// (found through `order`); replaced in place by this call's.
    prior: Vec<Option<Slot>>,
    /// This call's route keys (a key held by more than one route is
    /// ambiguous: its routes are never reused nor kept), for the next call.
    keys: Keys,
    /// Per route, in input order: whether its key is ambiguous.
    ambiguous_at: Vec<bool>,
    /// Per route in the pipeline's order: its position in the inputs.
    order: Vec<usize>,
    built: usize,
    reused: usize,
    /// Routes whose model this call read beyond its head
    /// (`pipeline::translate_memo`).
    pub(crate) models_read: usize,
    /// Route orders this call sorted again.
    pub(crate) route_sorts: usize,
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
    hosts_merged: usize,
    works_merged: usize,
    /// The Services whose EndpointSlices changed since last call, when
    /// nothing else of the context did ([`endpoints`]).
    endpoints_changed: Option<endpoints::Services>,
    assignments_rebuilt: usize,
    /// The endpoint guard's diagnostics: last call's when nothing they read
    /// changed (offered), then this call's (kept).
    pub(crate) endpoint_warnings: Option<Vec<crate::Diagnostic>>,
    /// Last call's orders, offered to the pipeline, and this call's.
    pub(crate) prior_orders: Option<Orders>,
    pub(crate) next_orders: Option<Orders>,
    /// Per route (input order): whether it is the very same object as the
    /// route last call's orders placed there (empty: none is).
    pub(crate) same_object: Vec<bool>,
    /// Comparisons the order checks made (`pipeline::sorted_by`).
    pub(crate) order_compares: usize,
    /// Per route (pipeline order): the Services its works and report
    /// looked up (kept from its slot when reused: [`services`]).
    service_reads: Vec<Reads>,
    /// The Services this call looked up outside any route's recording
    /// (the pipeline's, from its index).
    pub(crate) unscoped_service_reads: Option<Reads>,
    /// The Secrets this call looked up (the pipeline's, from its index).
    pub(crate) secret_reads: Option<Reads>,
    /// Whether TrafficPolicies changed (and nothing else of the context):
    /// [`policies::judge`] then drops the slots they reach.
    policies_changed: bool,
    /// Per Gateway: last call's scopes, this call's (for the next), and
    /// whether they changed (only judged when policies changed).
    prior_scopes: Vec<crate::policy::scope::GatewayScopes>,
    next_scopes: Vec<crate::policy::scope::GatewayScopes>,
    scopes_changed: Vec<bool>,
    /// The routes a Gateway edit spared until its listeners are known,
    /// and per Gateway last call's and this call's listeners
    /// ([`gateway_edits::judge_listeners`]).
    listener_checks: gateway_edits::ListenerChecks,
    prior_listeners: gateway_edits::Listeners,
    next_listeners: gateway_edits::Listeners,
    /// Per route (pipeline order): the effective policies its works were
    /// built with (kept from its slot when reused).
    policies: Vec<policies::KeptPolicies>,
    /// Last call's compilations and attachment of the policies, offered
    /// when neither the policies nor the GatewayExtensions changed and the
    /// call is not full, and this call's ([`standing_policies`]).
    prior_standing: standing_policies::Standing,
    next_standing: standing_policies::Standing,
    attachment_reused: bool,
}

impl RouteMemo {
    /// The pipeline's route order: `sorted[i]` is the input position of its
    /// `i`-th route (the slots stay where they are, found through it).
    pub(crate) fn sorted(&mut self, sorted: &[usize]) {
        self.order = sorted.to_vec();
    }

    /// The route order given to [`RouteMemo::sorted`].
    pub(crate) fn route_order(&self) -> &[usize] {
        &self.order
    }

    /// Per route (pipeline order): whether [`Gateways::tails`] will offer
    /// its tail (its works reused and a tail kept), when tails may be
    /// reused at all (the caller's to know: not under STRICT or hooks).
    pub(crate) fn tails_offered(&self, n: usize) -> Vec<bool> {
        (0..n).map(|ri| self.offers_tail(ri)).collect()
    }

    /// Whether the pipeline's route `ri` has last call's tail to reuse: its
    /// works were reused and its slot kept a tail.
    fn offers_tail(&self, ri: usize) -> bool {
        !self.rebuilt.get(ri).copied().unwrap_or(true)
            && self
                .order
                .get(ri)
                .and_then(|&at| self.prior.get(at)?.as_ref())
                .is_some_and(|slot| slot.tail.is_some())
    }

    /// Adds what the report of the pipeline's route `ri` looked up to its
    /// Service reads, when its works were built this call (a reused
    /// route's report looks up what it did when it was built: the same
    /// object, works and context but for Services it did not read —
    /// [`services`]).
    pub(crate) fn report_reads(&mut self, ri: usize, reads: Reads) {
        if self.rebuilt.get(ri).copied().unwrap_or(false)
            && let Some(r) = self.service_reads.get_mut(ri)
        {
            *r = std::mem::take(r).union(&reads);
        }
    }

    /// Withdraws the offer of route `ri`'s slot (what remains of it: its
    /// bindings may already have been taken): its works are built again.
    fn drop_offered(&mut self, ri: usize) {
        if let Some(&at) = self.order.get(ri)
            && let Some(slot) = self.prior.get_mut(at)
        {
            *slot = None;
        }
    }

    /// The offered slot of the pipeline's route `ri`, if any.
    fn prior_mut(&mut self, ri: usize) -> Option<&mut Slot> {
        let at = *self.order.get(ri)?;
        self.prior.get_mut(at)?.as_mut()
    }

    /// This call's works (pipeline order), for [`RouteMemo::keep`].
    fn keep_works(&mut self, works: Vec<Vec<Arc<Work>>>) {
        self.works = works;
    }

    /// Keeps every route's slot for the next call, with its tail (`None`
    /// under STRICT, whose tails are never reused), in input order, in
    /// place of the offered ones (`order` is a permutation: every position
    /// is written). Routes of an ambiguous key keep none.
    #[allow(clippy::vec_box, reason = "boxed as the slots keep them: moved, not copied")]
    pub(crate) fn keep(&mut self, tails: Option<Vec<Box<RouteTail>>>) {
        let n = self.order.len();
        let mut works = std::mem::take(&mut self.works).into_iter();
        let mut bindings = std::mem::take(&mut self.bindings).into_iter();
        let mut reads = std::mem::take(&mut self.service_reads).into_iter();
        let mut policies = std::mem::take(&mut self.policies).into_iter();
        let mut tails = tails.map(Vec::into_iter);
        let mut next = std::mem::take(&mut self.prior);
        next.truncate(n);
        next.resize_with(n, || None);
        for &at in &self.order {
            let (w, b) = (works.next(), bindings.next());
            let tail = tails.as_mut().and_then(Iterator::next);
            let service_reads = reads.next().unwrap_or_default();
            let route_policies = policies.next().unwrap_or_default();
            let slot = match (w, b) {
                (Some(works), Some(bindings)) if !self.ambiguous_at.get(at).copied().unwrap_or(true) => {
                    Some(Slot {
                        works,
                        bindings: Some(bindings),
                        tail,
                        service_reads,
                        policies: route_policies,
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
    // Moved out of the offered slots (handed back with this call's:
    // `Gateways::keep_tails`), not shared: no reference count is touched.
    routes
        .iter()
        .enumerate()
        .map(|(ri, r)| {
            memo.prior_mut(ri)
                .and_then(|slot| slot.bindings.take())
                .unwrap_or_else(|| Arc::new(bind(r)))
        })
        .collect()
}

/// One Gateway's assembly (xDS and the scopes its policies fenced), with
/// the signature of the works it was assembled from.
struct GatewayMemo {
    signature: Signature,
    built: Arc<GatewayXds>,
    fences: Vec<ScopeFence>,
    /// Its route configurations' virtual hosts, for an assembly that
    /// cannot be reused whole to splice the unchanged ones from.
    configs: Option<ConfigMemos>,
    /// The clusters `built` was assembled from, for an EndpointSlice edit
    /// ([`endpoints::refresh`]).
    clusters: Option<Arc<Clusters>>,
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
pub(crate) type Signature = Vec<(Arc<Work>, usize)>;

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
    /// Per Gateway reused whole: the clusters of its memo, kept with it.
    clusters: Vec<Option<Arc<Clusters>>>,
    /// The Services whose EndpointSlices changed since last call, when
    /// nothing else of the context did ([`endpoints`]).
    endpoints_changed: Option<endpoints::Services>,
}

/// Per Gateway, what its assembly may reuse.
#[derive(Default)]
pub(crate) struct Reuse {
    /// Its whole assembly (xDS and fences).
    pub(crate) whole: Option<(Arc<GatewayXds>, Vec<ScopeFence>)>,
    /// Else (or also, to keep them) the memos of its route configurations
    /// to splice from.
    pub(crate) configs: Option<ConfigMemos>,
    /// Last call's works (what an edit changed: [`dirty_hosts`]).
    pub(crate) prior_works: Option<Signature>,
    /// Last call's assembly and the clusters it was built from: a cluster
    /// whose spec is the same and whose Service's slices did not change
    /// keeps its Cluster and ClusterLoadAssignment (`xds::build_memo`).
    pub(crate) prior_clusters: Option<xds::PriorClusters>,
}

impl<'m> Gateways<'m> {
    pub(crate) fn new(
        memo: Option<&'m mut RouteMemo>,
        reuse_allowed: bool,
        gateways: &[GatewayState<'_>],
        per_gateway: &[Vec<(usize, GatewayWork<'_>)>],
        age_rank: &[usize],
        settings: &Settings,
        endpoints: &crate::endpoints::Resolver<'_, '_>,
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
                    reuse: (0..n).map(|_| Reuse::default()).collect(),
                    clusters: vec![None; n],
                    endpoints_changed: None,
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
        let mut clusters = Vec::with_capacity(n);
        let changed = memo.endpoints_changed.take();
        let mut dense = dense_ranks::DenseRanks::default();
        // After an EndpointSlice edit, a Gateway reused whole gets the
        // changed Services' ClusterLoadAssignments built again; if its memo
        // cannot say which those are, it is assembled again.
        let refreshed = |p: &GatewayMemo| match (&changed, &p.clusters) {
            (None, _) => Some((Arc::clone(&p.built), 0)),
            (Some(changed), Some(c)) => endpoints::refresh(&p.built, c, changed, endpoints),
            (Some(_), None) => None,
        };
        for (gi, (gw, works)) in gateways.iter().zip(per_gateway).enumerate() {
            let key = gw.key();
            // A Gateway whose scopes changed is assembled from nothing
            // ([`policies`]).
            let prior = memo
                .prior_gateways
                .remove(&key)
                .filter(|_| !memo.scopes_changed.get(gi).copied().unwrap_or(false));
            if served.as_deref() == Some(key.as_str()) {
                keys.push(key);
                signatures.push(None);
                reuse.push(Reuse::default());
                clusters.push(None);
                continue;
            }
            // A work's age among this Gateway's: the rank of its route's
            // age rank among the distinct ones its works have.
            dense.rank(works.iter().map(|(ri, _)| age_rank[*ri]));
            let age_of = |ri: usize| dense.of(age_rank[ri]);
            // The same works (by identity) in the same relative age order
            // as last call's: compared without taking a reference to any.
            let same = prior.as_ref().is_some_and(|p| {
                p.signature.len() == works.len()
                    && p.signature
                        .iter()
                        .zip(works)
                        .all(|((wa, aa), (ri, wb))| *aa == age_of(*ri) && Arc::ptr_eq(wa, wb))
            });
            let signature_now =
                || -> Signature { works.iter().map(|(ri, w)| (Arc::clone(w), age_of(*ri))).collect() };
            let again = |p: GatewayMemo| Reuse {
                whole: None,
                configs: p.configs,
                prior_works: Some(p.signature),
                prior_clusters: p.clusters.map(|c| xds::PriorClusters {
                    clusters: c,
                    built: p.built,
                }),
            };
            let (next, kept, signature) = match prior {
                Some(p) if same => match refreshed(&p) {
                    // Reused whole: its signature is last call's, kept.
                    Some((built, rebuilt)) => {
                        memo.assignments_rebuilt += rebuilt;
                        let next = Reuse {
                            whole: Some((built, p.fences)),
                            configs: p.configs,
                            ..Reuse::default()
                        };
                        (next, p.clusters, p.signature)
                    }
                    None => {
                        let signature = p.signature.clone();
                        (again(p), None, signature)
                    }
                },
                Some(p) => (again(p), None, signature_now()),
                // No memo of this Gateway yet: an empty one asks the
                // assembly to make one.
                None => (
                    Reuse {
                        configs: Some(ConfigMemos::new()),
                        ..Reuse::default()
                    },
                    None,
                    signature_now(),
                ),
            };
            if next.whole.is_some() {
                memo.gateways_reused += 1;
            }
            keys.push(key);
            signatures.push(Some(signature));
            reuse.push(next);
            clusters.push(kept);
        }
        Self {
            memo: Some(memo),
            reuse_allowed: true,
            keys,
            signatures,
            reuse,
            clusters,
            endpoints_changed: changed,
        }
    }

    /// Per route (pipeline order): last call's status, diagnostics and
    /// replacements, for the routes whose works were reused — the object,
    /// its bindings (see [`bind_all`]) and its report (read from its works,
    /// and from STRICT and hooks, which run with no reuse) are the same.
    pub(crate) fn tails(&mut self, n: usize) -> Vec<Option<Box<RouteTail>>> {
        let reuse_allowed = self.reuse_allowed;
        let Some(memo) = self.memo.as_deref_mut().filter(|_| reuse_allowed) else {
            return (0..n).map(|_| None).collect();
        };
        (0..n)
            .map(|ri| {
                if memo.offers_tail(ri) {
                    memo.prior_mut(ri).and_then(|slot| slot.tail.take())
                } else {
                    None
                }
            })
            .collect()
    }

    /// Keeps every route's slot, with its works and bindings (pipeline
    /// order) and its tail, for the next call (see [`RouteMemo::keep`]); under STRICT
    /// without the tail.
    #[allow(clippy::vec_box, reason = "boxed as the slots keep them: moved, not copied")]
    pub(crate) fn keep_tails(
        &mut self,
        works: Vec<Vec<Arc<Work>>>,
        bindings: Vec<Arc<Vec<ParentBinding>>>,
        tails: Vec<Box<RouteTail>>,
    ) {
        let reuse_allowed = self.reuse_allowed;
        if let Some(memo) = self.memo.as_deref_mut() {
            memo.keep_works(works);
            memo.bindings = bindings;
            memo.keep(reuse_allowed.then_some(tails));
        }
    }

    /// Per Gateway: what its assembly may reuse.
    pub(crate) fn take(&mut self) -> Vec<Reuse> {
        std::mem::take(&mut self.reuse)
    }

    /// Counts the works this call's assemblies merged ([`Stats::works_merged`]).
    pub(crate) fn works_merged(&mut self, n: usize) {
        if let Some(memo) = self.memo.as_deref_mut() {
            memo.works_merged = n;
        }
    }

    /// The Services whose EndpointSlices changed since last call (`None`:
    /// none, or a full translation).
    pub(crate) fn endpoints_changed(&self) -> Option<&endpoints::Services> {
        self.endpoints_changed.as_ref()
    }

    /// Keeps Gateway `gi`'s assembly (and its route configurations' memos,
    /// and the clusters it was assembled from: when reused whole, those of
    /// its memo) for the next call.
    pub(crate) fn keep(
        &mut self,
        gi: usize,
        built: &Arc<GatewayXds>,
        fences: &[ScopeFence],
        configs: Option<ConfigMemos>,
        clusters: Option<Arc<Clusters>>,
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
                memo.hosts_merged += c.merged;
            }
        }
        let clusters = if reused {
            self.clusters.get_mut(gi).and_then(Option::take)
        } else {
            clusters
        };
        memo.next_gateways.insert(
            key.clone(),
            GatewayMemo {
                signature: std::mem::take(signature),
                built: Arc::clone(built),
                fences: fences.to_vec(),
                configs,
                clusters,
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
    effective: &[policies::RoutePolicies],
    threads: usize,
    build: impl Fn(usize) -> Vec<Work> + Sync,
) -> Vec<Vec<Arc<Work>>> {
    let mut reads: Vec<Reads> = Vec::with_capacity(routes.len());
    let mut route_policies: Vec<policies::KeptPolicies> = Vec::with_capacity(routes.len());
    let mut out: Vec<Option<Vec<Arc<Work>>>> = (0..routes.len())
        .map(|ri| {
            // Moved out, as the works are (handed back by `RouteMemo::keep`).
            reads.push(Reads::default());
            route_policies.push(Box::default());
            let slot = memo.prior_mut(ri)?;
            reads[ri] = std::mem::take(&mut slot.service_reads);
            route_policies[ri] = std::mem::take(&mut slot.policies);
            Some(std::mem::take(&mut slot.works))
        })
        .collect();
    let todo: Vec<usize> = (0..routes.len()).filter(|&ri| out[ri].is_none()).collect();
    memo.rebuilt = out.iter().map(Option::is_none).collect();
    memo.reused = routes.len() - todo.len();
    memo.built = todo.len();
    // Each built route's Service lookups recorded on the thread building it.
    let built = parallel::map(todo.clone(), threads, PARALLEL_MIN_ROUTES, |ri| {
        service_reads::scoped(|| build(ri))
    });
    for (ri, (works, r)) in todo.into_iter().zip(built) {
        out[ri] = Some(works.into_iter().map(Arc::new).collect());
        reads[ri] = r;
        route_policies[ri] = effective
            .get(ri)
            .map(|e| e.clone().into_boxed_slice())
            .unwrap_or_default();
    }
    memo.service_reads = reads;
    memo.policies = route_policies;
    out.into_iter().map(Option::unwrap_or_default).collect()
}

type Meta = api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A route's namespace and name, as `route::model` derives them.
fn key(meta: &Meta) -> (&str, &str) {
    crate::route::model::namespace_name(meta)
}

/// Whether two objects' metadata give the same key.
fn same_key(a: &Meta, b: &Meta) -> bool {
    key(a) == key(b)
}

/// Every route's kind and metadata, in input order (HTTPRoutes, then
/// GRPCRoutes).
fn input_metas(inputs: &Inputs) -> impl Iterator<Item = (RouteKind, &Meta)> + '_ {
    inputs
        .http_routes
        .iter()
        .map(|r| (RouteKind::Http, &r.object.metadata))
        .chain(
            inputs
                .grpc_routes
                .iter()
                .map(|r| (RouteKind::Grpc, &r.object.metadata)),
        )
}

/// Every route key (kind, namespace, name) of one call's inputs, with how
/// many routes hold it: a key held by several is ambiguous (its routes
/// are never reused nor kept). Kept between calls and updated by the
/// routes an edit added and removed ([`carry`]), so that an edit adding a
/// route hashes and copies its key, not every route's (rebuilding the key
/// sets of 10,000 routes showed as 8–16% of such an edit). Nested by
/// namespace so that a key is looked up borrowed.
#[derive(Default)]
struct Keys {
    /// Per kind (HTTP, gRPC): namespace → name → routes holding it.
    by_kind: [HashMap<String, HashMap<String, u32>>; 2],
    /// How many keys are held by more than one route.
    several: usize,
}

impl Keys {
    fn of(inputs: &Inputs) -> Self {
        let mut keys = Self::default();
        for (kind, meta) in input_metas(inputs) {
            keys.add(kind, meta);
        }
        keys
    }

    fn kind(kind: RouteKind) -> usize {
        match kind {
            RouteKind::Http => 0,
            RouteKind::Grpc => 1,
        }
    }

    /// How many routes hold this route's key.
    fn count(&self, kind: RouteKind, meta: &Meta) -> u32 {
        let (ns, name) = key(meta);
        self.by_kind[Self::kind(kind)]
            .get(ns)
            .and_then(|names| names.get(name))
            .copied()
            .unwrap_or(0)
    }

    fn add(&mut self, kind: RouteKind, meta: &Meta) {
        let (ns, name) = key(meta);
        let names = match self.by_kind[Self::kind(kind)].get_mut(ns) {
            Some(names) => names,
            None => self.by_kind[Self::kind(kind)].entry(ns.to_string()).or_default(),
        };
        let count = match names.get_mut(name) {
            Some(c) => c,
            None => names.entry(name.to_string()).or_default(),
        };
        *count += 1;
        if *count == 2 {
            self.several += 1;
        }
    }

    fn remove(&mut self, kind: RouteKind, meta: &Meta) {
        let (ns, name) = key(meta);
        let Some(names) = self.by_kind[Self::kind(kind)].get_mut(ns) else {
            return;
        };
        let Some(count) = names.get_mut(name) else {
            return;
        };
        if *count == 2 {
            self.several -= 1;
        }
        *count -= 1;
        if *count == 0 {
            names.remove(name);
            if names.is_empty() {
                self.by_kind[Self::kind(kind)].remove(ns);
            }
        }
    }
}

/// Calls `mark` with each entry of `before` and `after` that may differ
/// from its counterpart: position by position, both sides of each pair not
/// `same`, when nothing was added or removed; else every entry between the
/// common prefix and suffix of the very same objects ([`aligned`]).
fn each_changed<T>(
    before: &[api::Sourced<T>],
    after: &[api::Sourced<T>],
    same: impl Fn(&api::Sourced<T>, &api::Sourced<T>) -> bool,
    mut mark: impl FnMut(&api::Sourced<T>),
) {
    if before.len() == after.len() {
        for (b, a) in before.iter().zip(after) {
            if !same(b, a) {
                mark(b);
                mark(a);
            }
        }
        return;
    }
    let (prefix, suffix) = aligned(before, after);
    for s in before[prefix..before.len() - suffix]
        .iter()
        .chain(&after[prefix..after.len() - suffix])
    {
        mark(s);
    }
}

/// The keys (`service_reads::key` of namespace and name) of the objects
/// [`each_changed`] finds differing (object or unreadable values: the
/// index keeps no Service's or Secret's source, so one that only moved in
/// its file reads the same), each namespace and name also handed to
/// `each`.
fn changed_keys<T: PartialEq>(
    before: &[api::Sourced<T>],
    after: &[api::Sourced<T>],
    meta: impl Fn(&T) -> &Meta,
    mut each: impl FnMut(String, String),
) -> Reads {
    let mut keys = Vec::new();
    each_changed(before, after, api::Sourced::same, |s| {
        let (ns, name) = crate::index::ns_name(meta(&s.object));
        keys.push(service_reads::key(&ns, &name));
        each(ns, name);
    });
    Reads::of(keys)
}

/// How many routes at the start and at the end of `old` and `new` are the
/// very same objects (by pointer), without overlapping: what lies between
/// is what an edit added, removed, moved or replaced.
fn aligned<T>(old: &[api::Sourced<T>], new: &[api::Sourced<T>]) -> (usize, usize) {
    let same = |a: &api::Sourced<T>, b: &api::Sourced<T>| Arc::ptr_eq(&a.object, &b.object);
    let prefix = old.iter().zip(new).take_while(|(a, b)| same(a, b)).count();
    let room = old.len().min(new.len()) - prefix;
    let suffix = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(room)
        .take_while(|(a, b)| same(a, b))
        .count();
    (prefix, suffix)
}

/// Per route of `new` (input order): last call's slot when the route is
/// equal to its previous object (same key, unique in both); and `new`'s
/// keys. Returns the previous inputs too, to retire.
///
/// When `new` has as many routes of each kind as last time and every
/// route has the key of the route last at its position (an edit that
/// adds, removes, renames or moves no route — each object is the same
/// allocation or, for an edited one, compared), the slots are taken by
/// position and the keys are last call's: the key list is the same.
///
/// Otherwise, per kind, the routes at the start and at the end that are
/// the very same objects as last call's ([`aligned`]) are paired by
/// position, and the routes between (what the edit added, removed, moved
/// or replaced: the *middle*) by key. This is the matching by key of
/// every route: a pointer-equal pair has one key; a key unique in both
/// inputs has one route on each side, so it is either such a pair or a
/// key found in both middles (were its old route paired, its new one
/// would be too). The key counts are last call's, less the old middle's
/// keys, plus the new middle's: the paired routes hold the same keys on
/// both sides. So an edit costs pointer compares for the routes it did
/// not touch and key lookups for those it did.
fn carry(mut prev: Prev, new: &Inputs) -> Carried {
    let old = prev.inputs.inputs();
    if let Some(same) = same_positions(old, new) {
        let mut slots = std::mem::take(&mut prev.slots);
        slots.resize_with(same.len(), || None);
        let prior = slots
            .into_iter()
            .zip(same)
            .map(|(slot, same)| slot.filter(|_| same))
            .collect();
        let same_object = old
            .http_routes
            .iter()
            .zip(&new.http_routes)
            .map(|(o, n)| Arc::ptr_eq(&o.object, &n.object))
            .chain(
                old.grpc_routes
                    .iter()
                    .zip(&new.grpc_routes)
                    .map(|(o, n)| Arc::ptr_eq(&o.object, &n.object)),
            )
            .collect();
        return Carried {
            prior,
            keys: prev.keys,
            old: prev.inputs,
            moved: None,
            same_object,
        };
    }
    let mut keys = std::mem::take(&mut prev.keys);
    let (old_http, new_http) = (old.http_routes.len(), new.http_routes.len());
    let http = aligned(&old.http_routes, &new.http_routes);
    let grpc = aligned(&old.grpc_routes, &new.grpc_routes);
    // (kind, offset in the input order, prefix, suffix, old len, new len)
    let kinds = [
        (RouteKind::Http, 0, 0, http, old_http, new_http),
        (
            RouteKind::Grpc,
            old_http,
            new_http,
            grpc,
            old.grpc_routes.len(),
            new.grpc_routes.len(),
        ),
    ];
    let old_meta = |i: usize| -> &Meta {
        if i < old_http {
            &old.http_routes[i].object.metadata
        } else {
            &old.grpc_routes[i - old_http].object.metadata
        }
    };
    let new_meta = |j: usize| -> &Meta {
        if j < new_http {
            &new.http_routes[j].object.metadata
        } else {
            &new.grpc_routes[j - new_http].object.metadata
        }
    };
    // The middles, as input positions.
    let mut old_middle: Vec<(RouteKind, usize)> = Vec::new();
    let mut new_middle: Vec<(RouteKind, usize)> = Vec::new();
    for &(kind, old_at, new_at, (prefix, suffix), old_len, new_len) in &kinds {
        old_middle.extend((old_at + prefix..old_at + old_len - suffix).map(|i| (kind, i)));
        new_middle.extend((new_at + prefix..new_at + new_len - suffix).map(|j| (kind, j)));
    }
    // The old middle's routes by key, those whose key was unique.
    let mut by_key: HashMap<(RouteKind, &str, &str), usize> = HashMap::with_capacity(old_middle.len());
    for &(kind, i) in &old_middle {
        let meta = old_meta(i);
        if keys.count(kind, meta) == 1 {
            let (ns, name) = key(meta);
            by_key.insert((kind, ns, name), i);
        }
    }
    for &(kind, i) in &old_middle {
        keys.remove(kind, old_meta(i));
    }
    for &(kind, j) in &new_middle {
        keys.add(kind, new_meta(j));
    }
    // Keys the middles touched that are now held several times: a paired
    // route holding one is ambiguous now.
    let several: HashSet<(RouteKind, &str, &str)> = new_middle
        .iter()
        .map(|&(kind, j)| (kind, new_meta(j)))
        .filter(|&(kind, meta)| keys.count(kind, meta) > 1)
        .map(|(kind, meta)| {
            let (ns, name) = key(meta);
            (kind, ns, name)
        })
        .collect();
    let same_at = |i: usize, j: usize| match (i < old_http, j < new_http) {
        (true, true) => same_route(&old.http_routes[i], &new.http_routes[j]),
        (false, false) => same_route(&old.grpc_routes[i - old_http], &new.grpc_routes[j - new_http]),
        _ => false,
    };
    let mut prior: Vec<Option<Slot>> = (0..new_http + new.grpc_routes.len()).map(|_| None).collect();
    let mut moved: Vec<Option<usize>> = vec![None; old_http + old.grpc_routes.len()];
    let mut same_object = vec![false; prior.len()];
    for &(kind, old_at, new_at, (prefix, suffix), old_len, new_len) in &kinds {
        let pairs = (0..prefix)
            .map(|k| (old_at + k, new_at + k))
            .chain((1..=suffix).map(|k| (old_at + old_len - k, new_at + new_len - k)));
        for (i, j) in pairs {
            moved[i] = Some(j);
            same_object[j] = true;
            if !several.is_empty() {
                let (ns, name) = key(new_meta(j));
                if several.contains(&(kind, ns, name)) {
                    continue;
                }
            }
            if same_at(i, j) {
                prior[j] = prev.slots.get_mut(i).and_then(Option::take);
            }
        }
    }
    for &(kind, j) in &new_middle {
        let meta = new_meta(j);
        if keys.count(kind, meta) != 1 {
            continue;
        }
        let (ns, name) = key(meta);
        let Some(&i) = by_key.get(&(kind, ns, name)) else {
            continue;
        };
        moved[i] = Some(j);
        same_object[j] = match (i < old_http, j < new_http) {
            (true, true) => Arc::ptr_eq(&old.http_routes[i].object, &new.http_routes[j].object),
            (false, false) => Arc::ptr_eq(
                &old.grpc_routes[i - old_http].object,
                &new.grpc_routes[j - new_http].object,
            ),
            _ => false,
        };
        if same_at(i, j) {
            prior[j] = prev.slots.get_mut(i).and_then(Option::take);
        }
    }
    Carried {
        prior,
        keys,
        old: prev.inputs,
        moved: Some(moved),
        same_object,
    }
}

/// What [`carry`] finds.
struct Carried {
    /// Per route of the new inputs: last call's slot, if unchanged.
    prior: Vec<Option<Slot>>,
    /// The new inputs' keys.
    keys: Keys,
    /// The previous inputs, to retire.
    old: Arc<dyn Held>,
    /// Per route of the previous inputs, its position in the new ones when
    /// it has one (the same object, or the same unique key); `None` when
    /// every route kept its position.
    moved: Option<Vec<Option<usize>>>,
    /// Per route of the new inputs: whether it is the very same object
    /// (`Arc`) as the previous route it was found as.
    same_object: Vec<bool>,
}

impl Orders {
    /// Last call's orders over this call's positions: the routes that
    /// moved renumbered, those removed dropped; those added are missing
    /// (`pipeline::sorted_by` inserts them, then checks the order).
    fn renumbered(self, moved: &[Option<usize>]) -> Self {
        let at = |order: Vec<usize>| {
            order
                .into_iter()
                .filter_map(|i| moved.get(i).copied().flatten())
                .collect()
        };
        Self {
            sorted: at(self.sorted),
            by_age: at(self.by_age),
            ..self
        }
    }
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

/// Whether every input other than the routes, the EndpointSlices, the
/// Services, the Secrets, the TrafficPolicies, the HTTPProxies, the
/// Gateways, the ListenerSets, the ReferenceGrants, the Namespaces and the
/// GatewayExtensions is equal. Destructured exhaustively: a new input kind fails to compile
/// here until it is placed in the context (or shown to be route-local).
fn context_eq(a: &Inputs, b: &Inputs) -> bool {
    let Inputs {
        gateway_classes,
        // Judged per Gateway and ListenerSet by what names them
        // (`gateway_edits.rs`).
        gateways: _,
        listener_sets: _,
        http_routes: _,
        grpc_routes: _,
        // Judged per namespace by who looked into it
        // (`reference_grants.rs`).
        reference_grants: _,
        // Judged per namespace by its labels, the only part read
        // (`namespaces.rs`).
        namespaces: _,
        // Judged per Service by who looked it up (`services.rs`).
        services: _,
        // Read only by the ClusterLoadAssignments (resolved at assembly,
        // `crate::endpoints`) and the endpoint guard's diagnostics (made on
        // every call): an edit of them alone is judged per Service
        // (`endpoints.rs`).
        endpoint_slices: _,
        // Judged by whether any changed one was looked up (`secrets.rs`).
        secrets: _,
        // Judged per route and per Gateway by what they reach
        // (`policies.rs`).
        traffic_policies: _,
        // Judged as a policy edit (`policies.rs`).
        gateway_extensions: _,
        // Judged per tree by the HTTPProxy memo (`httpproxy.rs`); nothing
        // else reads them.
        http_proxies: _,
        tls_certificate_delegations,
        extension_resources,
        gateway_parameters,
        provisioned_addresses,
    } = a;
    same_kind(gateway_classes, &b.gateway_classes)
        && same_kind(tls_certificate_delegations, &b.tls_certificate_delegations)
        && same_kind(extension_resources, &b.extension_resources)
        && same_kind(gateway_parameters, &b.gateway_parameters)
        && *provisioned_addresses == b.provisioned_addresses
}
