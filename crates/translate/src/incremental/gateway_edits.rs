//! Gateway and ListenerSet edits: which routes and Gateways they rebuild,
//! and when they rebuild all.
//!
//! A Gateway is read, besides its own status and assembly, only through
//! the Gateway states (`gateway::GatewayState`, one per Gateway of ours,
//! in namespace/name order):
//! - binding reads the states of the Gateways a route's parentRefs name
//!   (directly, or through a ListenerSet attached to one), and a route's
//!   works read its bindings and the listeners it is bound to;
//! - ListenerSets are admitted by their parent Gateway (`allowedListeners`)
//!   and merge their listeners into its state (conflicts among them and
//!   with the Gateway's own listeners are settled there);
//! - default Gateways (GEP-3793) claim every route that asks for one;
//! - the Gateway serving HTTPProxies is read by the HTTPProxy trees;
//! - policies' Gateway and listener scopes, judged per Gateway already
//!   ([`super::policies`]), and the Gateway's own assembly.
//!
//! So when Gateways changed in place — the same Gateways (namespace, name)
//! at the same input positions with the same GatewayClass, so the Gateway
//! states keep their order and indices — and none of the changed ones is
//! (or was) a default Gateway or the one serving HTTPProxies, a route
//! whose parentRefs name none of the changed Gateways and none of the
//! ListenerSets whose parentRef names one reads nothing that changed: its
//! works, bindings and tail are reused as after a route edit. The routes
//! that do name one are rebuilt as if edited — but for a route that names
//! the changed Gateways only directly and only by sectionName: binding
//! reads of such a Gateway only whether its class is accepted and its own
//! listeners of that name (`binding::bind_one`), works read the listeners
//! bound and the Gateway's scopes, a tail the Gateway's namespace and
//! name. Such a route is reused when all of that is last call's: the
//! listeners of that name compared by index and computed state (a
//! listener whose spec did not change may be Conflicted by another's
//! edit), once the Gateway states are made ([`judge_listeners`]). Each
//! changed Gateway is assembled from nothing (its listeners, filter chains and virtual hosts
//! read the object directly). A ListenerSet edited in place changes the
//! Gateways its parentRef names before and after: it counts as an edit of
//! them (and of itself, for a parent that is none of ours). Everything
//! else they feed (Gateway, ListenerSet and policy status, attached-route
//! counts) is made on every call. A ListenerSet whose namespace's labels
//! changed counts as edited in place too (`namespaces.rs`). Any other edit of them — one added,
//! removed, renamed or moved, a Gateway given another class, or touching
//! a default or the HTTPProxy Gateway — is a change of the context:
//! everything is rebuilt. So is any edit while two Gateways share one
//! namespace/name (only a caller building `Inputs` itself can hand over
//! such twins; the loader's merge drops duplicates): binding reads the
//! first of them, the per-listener check keys by name.

use std::collections::{HashMap, HashSet};

use api::gateway_api::experimental::gateways::{Gateway, GatewayDefaultScope};
use api::gateway_api::experimental::listenersets::ListenerSet;
use api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use api::{Inputs, Sourced};

use crate::Settings;
use crate::gateway::GatewayState;
use crate::listener::{GATEWAY_GROUP, Listener, Origin};
use crate::policy::scope::GatewayScopes;
use crate::route::model::namespace_name;

/// What the Gateways' edit means for the memo.
pub(crate) enum Judgement {
    /// No Gateway changed.
    Unchanged,
    /// Some changed in place: the routes naming them are rebuilt.
    Scoped(Changed),
    /// Only a full translation is sound.
    Full,
}

/// The Gateways an edit changed in place.
pub(crate) struct Changed {
    /// Their keys (`naming::gateway`): assembled from nothing.
    pub(crate) gateways: HashSet<String>,
    /// What a route's parentRef may name to be rebuilt, as (namespace,
    /// name): the changed Gateways and the ListenerSets whose parentRef
    /// names one (a few: scanned, not hashed).
    parents: Vec<(String, String)>,
}

/// Compares the Gateways and ListenerSets of `before` and `after` (see
/// the module doc); a ListenerSet in a `relabelled` namespace counts as
/// edited in place (its admission read its namespace's labels:
/// `namespaces.rs`).
pub(crate) fn judge(
    before: &Inputs,
    after: &Inputs,
    settings: &Settings,
    relabelled: &HashSet<String>,
) -> Judgement {
    let served = settings.http_proxy.gateway.as_ref();
    // A Gateway that may change: neither default nor serving HTTPProxies,
    // before or after.
    let plain = |gw: &Gateway| {
        !is_default(gw)
            && served.is_none_or(|(ns, name)| (ns.as_str(), name.as_str()) != namespace_name(&gw.metadata))
    };
    let mut changed = Changed {
        gateways: HashSet::new(),
        parents: Vec::new(),
    };
    let Some(gateways) = edited_in_place(&before.gateways, &after.gateways, |g| &g.metadata) else {
        return Judgement::Full;
    };
    for (key, a, b) in gateways {
        if a.object.spec.gateway_class_name != b.object.spec.gateway_class_name
            || !plain(&a.object)
            || !plain(&b.object)
        {
            return Judgement::Full;
        }
        changed.gateway(key);
    }
    // A ListenerSet edited in place changes the listeners of its parent
    // Gateway (before and after): as if that Gateway were edited.
    let Some(mut sets) = edited_in_place(&before.listener_sets, &after.listener_sets, |s| &s.metadata) else {
        return Judgement::Full;
    };
    if !relabelled.is_empty() {
        // Same positions, same keys (`edited_in_place` said so).
        for (a, b) in before.listener_sets.iter().zip(&after.listener_sets) {
            let key = namespace_name(&b.object.metadata);
            if relabelled.contains(key.0) && a.same(b) {
                sets.push((key, a, b));
            }
        }
    }
    for (key, a, b) in sets {
        changed.parent(key);
        for set in [a, b] {
            let parent = listener_set_parent(set);
            if let Some(gw) = after
                .gateways
                .iter()
                .find(|g| namespace_name(&g.object.metadata) == parent)
            {
                if !plain(&gw.object) {
                    return Judgement::Full;
                }
                changed.gateway(parent);
            }
        }
    }
    if changed.gateways.is_empty() && changed.parents.is_empty() {
        return Judgement::Unchanged;
    }
    // Same keys before and after (`edited_in_place`): one check serves both.
    let mut keys = HashSet::with_capacity(after.gateways.len());
    if !after
        .gateways
        .iter()
        .all(|g| keys.insert(namespace_name(&g.object.metadata)))
    {
        return Judgement::Full;
    }
    // The ListenerSets attached to a changed Gateway.
    for set in &after.listener_sets {
        let parent = listener_set_parent(set);
        let key = namespace_name(&set.object.metadata);
        if changed.names(parent) && !changed.names(key) {
            changed.parent(key);
        }
    }
    Judgement::Scoped(changed)
}

/// An object edited in place: its (namespace, name), before and after.
type Edited<'a, T> = ((&'a str, &'a str), &'a Sourced<T>, &'a Sourced<T>);

/// The objects edited in place, with their (namespace, name): each pair
/// at one input position that differs (object or unreadable values: a
/// Gateway's or ListenerSet's source is read only by its own diagnostics,
/// stamped with the current one on every call, so one that only moved in
/// its file is unchanged). `None` when one was added, removed, renamed or
/// moved in the input order.
fn edited_in_place<'a, T: PartialEq>(
    before: &'a [Sourced<T>],
    after: &'a [Sourced<T>],
    meta: impl Fn(&T) -> &ObjectMeta,
) -> Option<Vec<Edited<'a, T>>> {
    if before.len() != after.len() {
        return None;
    }
    let mut edited = Vec::new();
    for (a, b) in before.iter().zip(after) {
        if a.same(b) {
            continue;
        }
        let key = namespace_name(meta(&a.object));
        if key != namespace_name(meta(&b.object)) {
            return None;
        }
        edited.push((key, a, b));
    }
    Some(edited)
}

/// The (namespace, name) a ListenerSet's parentRef names (whatever its
/// kind: naming more is only slower).
fn listener_set_parent(set: &Sourced<ListenerSet>) -> (&str, &str) {
    let (ns, _) = namespace_name(&set.object.metadata);
    let p = &set.object.spec.parent_ref;
    (p.namespace.as_deref().unwrap_or(ns), p.name.as_str())
}

fn is_default(gw: &Gateway) -> bool {
    matches!(gw.spec.default_scope, Some(GatewayDefaultScope::All))
}

impl Changed {
    fn gateway(&mut self, key: (&str, &str)) {
        self.gateways.insert(crate::naming::gateway(key.0, key.1));
        self.parent(key);
    }

    fn parent(&mut self, key: (&str, &str)) {
        if !self.names(key) {
            self.parents.push((key.0.to_string(), key.1.to_string()));
        }
    }

    fn names(&self, (ns, name): (&str, &str)) -> bool {
        self.parents.iter().any(|(n, m)| n == ns && m == name)
    }

    /// Withdraws the slots (input positions of `inputs`) of the routes
    /// whose parentRefs name a changed Gateway or a ListenerSet attached
    /// to one, whatever their kind or group (naming more is only slower):
    /// they are rebuilt as if edited. Spared, for [`judge_listeners`] to
    /// decide once the listeners are known: a route whose every parentRef
    /// naming a changed parent names a changed Gateway (kind Gateway of
    /// the Gateway API group) by sectionName.
    pub(crate) fn rebuild_routes(
        &self,
        inputs: &Inputs,
        prior: &mut [Option<super::Slot>],
    ) -> ListenerChecks {
        let mut checks = ListenerChecks::default();
        // HTTPRoute and GRPCRoute parentRefs are distinct types alike.
        macro_rules! verdicts {
            ($routes:expr) => {
                $routes.iter().map(|r| {
                    let refs = r.object.spec.parent_refs.iter().flatten().map(|p| Ref {
                        group: p.group.as_deref(),
                        kind: p.kind.as_deref(),
                        namespace: p.namespace.as_deref(),
                        name: &p.name,
                        section: p.section_name.as_deref(),
                    });
                    self.checks_for(&r.object.metadata, refs)
                })
            };
        }
        let http = verdicts!(inputs.http_routes);
        let grpc = verdicts!(inputs.grpc_routes);
        for (at, (slot, verdict)) in prior.iter_mut().zip(http.chain(grpc)).enumerate() {
            match verdict {
                Verdict::Untouched => {}
                Verdict::Rebuild => *slot = None,
                Verdict::Check(c) => {
                    checks.0.insert(at, c);
                }
            }
        }
        checks
    }

    /// What a route's parentRefs (an unset namespace is the route's) make
    /// of it.
    fn checks_for<'p>(&self, route: &ObjectMeta, refs: impl Iterator<Item = Ref<'p>>) -> Verdict {
        let (ns, _) = namespace_name(route);
        let mut checks = Vec::new();
        for r in refs {
            let key = (r.namespace.unwrap_or(ns), r.name);
            if !self.names(key) {
                continue;
            }
            let gateway = crate::naming::gateway(key.0, key.1);
            match r.section {
                Some(section)
                    if r.group.is_none_or(|g| g == GATEWAY_GROUP)
                        && r.kind.is_none_or(|k| k == "Gateway")
                        && self.gateways.contains(&gateway) =>
                {
                    checks.push((gateway, section.to_string()));
                }
                _ => return Verdict::Rebuild,
            }
        }
        if checks.is_empty() {
            Verdict::Untouched
        } else {
            Verdict::Check(checks)
        }
    }
}

/// A parentRef as [`Changed::checks_for`] reads it.
struct Ref<'p> {
    group: Option<&'p str>,
    kind: Option<&'p str>,
    namespace: Option<&'p str>,
    name: &'p str,
    section: Option<&'p str>,
}

enum Verdict {
    /// Names no changed parent.
    Untouched,
    Rebuild,
    /// Names changed Gateways only by these (Gateway key, sectionName).
    Check(Vec<(String, String)>),
}

/// The routes whose slots wait for [`judge_listeners`]: by input
/// position, the (Gateway key, sectionName) pairs they name.
#[derive(Default)]
pub(crate) struct ListenerChecks(HashMap<usize, Vec<(String, String)>>);

/// What a route bound by sectionName reads of a Gateway: whether its class
/// is accepted, and its own listeners (their index, computed state: the
/// conflicts with the others settled, ListenerSets' merged in), before
/// any route is counted on them. Per Gateway key.
pub(crate) type Listeners = HashMap<String, GatewayListeners>;

pub(crate) struct GatewayListeners {
    class_accepted: bool,
    own: Vec<(usize, Listener)>,
}

impl GatewayListeners {
    fn of(gw: &GatewayState<'_>) -> Self {
        GatewayListeners {
            class_accepted: gw.class_accepted,
            own: gw
                .listeners
                .iter()
                .enumerate()
                .filter(|(_, l)| l.origin == Origin::Gateway)
                .map(|(i, l)| (i, l.clone()))
                .collect(),
        }
    }

    /// Its own listeners named `section`, as binding finds them.
    fn named<'s>(&'s self, section: &'s str) -> impl Iterator<Item = &'s (usize, Listener)> + 's {
        self.own.iter().filter(move |(_, l)| l.name == section)
    }
}

/// Decides the routes [`Changed::rebuild_routes`] spared: one is reused
/// only if, for each changed Gateway it names by sectionName, the Gateway's
/// class is accepted as before, its scopes (Gateway and listener policies)
/// are last call's, and the listeners of that name are last call's (at
/// least one, the same index, equal computed state): all its binding,
/// works and tail read of that Gateway. Else it is rebuilt as if edited.
/// Keeps this call's listeners for the next. Called by the pipeline once
/// the Gateway states and scopes are made, before binding.
pub(crate) fn judge_listeners(
    memo: &mut super::RouteMemo,
    gateways: &[GatewayState<'_>],
    scopes: &[GatewayScopes],
) {
    let now: Listeners = gateways
        .iter()
        .map(|g| (g.key(), GatewayListeners::of(g)))
        .collect();
    let checks = std::mem::take(&mut memo.listener_checks);
    if !checks.0.is_empty() {
        let prior = &memo.prior_listeners;
        let prior_scopes = &memo.prior_scopes;
        // Judged once per (Gateway, sectionName) pair, not per route: the
        // scopes' comparison is not small, and a Gateway's routes are many.
        let mut verdicts: HashMap<&(String, String), bool> = HashMap::new();
        for pair in checks.0.values().flatten() {
            verdicts.entry(pair).or_insert_with(|| {
                let (key, section) = pair;
                let Some(gi) = gateways.iter().position(|g| g.key() == *key) else {
                    return false;
                };
                let (Some(a), Some(b)) = (prior.get(key), now.get(key)) else {
                    return false;
                };
                prior_scopes.get(gi) == scopes.get(gi)
                    && a.class_accepted == b.class_accepted
                    && a.named(section).next().is_some()
                    && a.named(section).eq(b.named(section))
            });
        }
        let stale: Vec<usize> = memo
            .order
            .iter()
            .enumerate()
            .filter(|&(_, at)| {
                checks
                    .0
                    .get(at)
                    .is_some_and(|c| !c.iter().all(|pair| verdicts.get(pair).copied().unwrap_or(false)))
            })
            .map(|(ri, _)| ri)
            .collect();
        for ri in stale {
            memo.drop_offered(ri);
        }
    }
    memo.next_listeners = now;
}
