//! Standing TrafficPolicies: when last call's compilations, attachment,
//! attachment records and policy reports are reused.
//!
//! Every call compiles every policy and attaches it (`policy::compile`,
//! `policy::attach`); at 10,000 routes, 1,000 policies that no edit
//! touched cost a route edit ~11 ms: compiling, attaching (merging
//! features into one `Effective` per reached rule), the attachment
//! records and the policies' reports.
//!
//! A policy's compilation is a function of the policy and the
//! GatewayExtensions (with what the providers look up: a Service or
//! Secret they read makes its edit a full translation, `services`,
//! `secrets`). So when neither the TrafficPolicies nor the
//! GatewayExtensions changed and the call is not full ([`Standing`] is
//! then offered), every compilation is last call's
//! (`policy::compile_reusing` takes them in order, for policies of the
//! same namespace/name).
//!
//! What `policy::attach` reads besides the compiled policies: of each
//! route only its head — kind, namespace, name, labels, rule count and
//! rule names — by position in the route order (the pipeline's `routes`).
//! So when, besides, every route has the same head as last call's route
//! of its key ([`Kept::offer`]: the very same object, or an equal head),
//! the attachment is last call's: every rule's effective
//! policies, the routes each policy reaches, what resolving targets and
//! merging added to each policy's errors and warnings, and the attachment
//! records.
//!
//! A policy's report then reads, besides those, only its errors and
//! warnings after scopes and STRICT, and its ancestors (the Gateways its
//! routes attach to, and the scopes it targets), which are compared
//! (`policy::report`). Scopes are attached again on every call (they read
//! Gateways and ListenerSets, and they are cheap).
//!
//! Routes added or removed (a rename is both) keep the attachment when
//! no policy may reach them (`policy::attach::may_reach`: no targetRef
//! names their key, no selector covers their kind in their namespace):
//! then no policy reached a removed route and none reaches an added one,
//! so every other route's effective policies are the same, moved to its
//! position in this call's order, and the policies' errors, warnings and
//! records are unchanged. The same holds for a route whose head changed
//! (labels, rule names) where no policy may reach it. A route added,
//! removed or re-headed that a policy may reach attaches every policy
//! again.

use std::collections::BTreeMap;
use std::sync::Arc;

use api::gateway_api::experimental::grpcroutes::GrpcRoute;
use api::gateway_api::experimental::httproutes::HttpRoute;
use api::policy::TrafficPolicy;
use api::{Inputs, Sourced};

use crate::PolicyAttachment;
use crate::policy::attach::Attachment;
use crate::policy::ext_auth::Provider;
use crate::policy::report::PolicyReport;
use crate::policy::{Compilation, Compiled, PolicyError};
use crate::route::model::{self, Route, RouteKind};

use super::RouteMemo;
use super::policies::RoutePolicies;

/// A route object, shared with the inputs it was read from (kept so that
/// the next call can tell the very same object by address: the memo holds
/// it, so its address is not reused meanwhile).
#[derive(Clone)]
pub(crate) enum Head {
    Http(Arc<HttpRoute>),
    Grpc(Arc<GrpcRoute>),
}

/// The routes' objects in the pipeline's route order (`sorted[i]` is the
/// input position of its `i`-th route: HTTPRoutes, then GRPCRoutes).
pub(crate) fn heads(inputs: &Inputs, sorted: &[usize]) -> Vec<Head> {
    sorted
        .iter()
        .filter_map(|&i| head_at(inputs, i))
        .map(Head::to_owned)
        .collect()
}

/// The object at input position `i`, borrowed.
fn head_at(inputs: &Inputs, i: usize) -> Option<HeadRef<'_>> {
    match i.checked_sub(inputs.http_routes.len()) {
        None => inputs.http_routes.get(i).map(|r| HeadRef::Http(&r.object)),
        Some(g) => inputs.grpc_routes.get(g).map(|r| HeadRef::Grpc(&r.object)),
    }
}

/// A [`Head`] borrowed from the inputs (cloned only where it changed).
#[derive(Clone, Copy)]
enum HeadRef<'i> {
    Http(&'i Arc<HttpRoute>),
    Grpc(&'i Arc<GrpcRoute>),
}

impl Head {
    fn to_owned(r: HeadRef<'_>) -> Head {
        match r {
            HeadRef::Http(a) => Head::Http(a.clone()),
            HeadRef::Grpc(a) => Head::Grpc(a.clone()),
        }
    }
}

/// What a call keeps of its policies for the next.
#[derive(Default)]
pub(crate) struct Standing {
    /// Every policy's compilation (`policy::compile`), in compiled order.
    pub(crate) compilations: Vec<Compilation>,
    pub(crate) attachment: Option<Kept>,
}

/// Last call's attachment with what it read and what was made from it.
pub(crate) struct Kept {
    heads: Vec<Head>,
    attachment: Attachment,
    /// Per policy (compiled order): its errors and warnings once attached.
    lists: Vec<Lists>,
    records: Arc<Vec<PolicyAttachment>>,
    reports: Vec<PolicyReport>,
}

/// A policy's errors and warnings.
type Lists = (Vec<PolicyError>, Vec<PolicyError>);

/// What this call will keep of its attachment once the policies are
/// reported ([`Pending::keep`]).
pub(crate) struct Pending {
    heads: Vec<Head>,
    lists: Vec<Lists>,
    /// Last call's reports when the attachment is reused (else empty),
    /// offered to `policy::report` ([`Pending::prior_reports`]).
    reports: Vec<PolicyReport>,
}

/// The policies compiled (`policy::compile`), taking last call's
/// compilations when the memo offers them, with this call's to keep.
pub(crate) fn compile<'a>(
    memo: &mut RouteMemo,
    policies: &'a [Sourced<TrafficPolicy>],
    providers: &BTreeMap<(String, String), Provider>,
) -> (Vec<Compiled<'a>>, Vec<Compilation>) {
    let prior = std::mem::take(&mut memo.prior_standing.compilations);
    crate::policy::compile_reusing(policies, providers, prior, true)
}

/// The policies attached to `routes` (the pipeline's, at input positions
/// `memo.route_order()`) with the attachment records: last call's when the
/// memo offers them and [`Kept::offer`] takes them, else made
/// (`policy::attach`). With what to keep for the next call, if any
/// policy is.
pub(crate) fn attach(
    memo: &mut RouteMemo,
    inputs: &Inputs,
    routes: &[Route<'_>],
    policies: &mut [Compiled<'_>],
) -> (Attachment, Arc<Vec<PolicyAttachment>>, Option<Pending>) {
    let reused = (memo.prior_standing.attachment.take())
        .and_then(|kept| kept.offer(inputs, memo.route_order(), routes, policies));
    memo.attachment_reused = reused.is_some();
    if let Some(r) = reused {
        let pending = Pending {
            heads: r.heads,
            lists: r.lists,
            reports: r.reports,
        };
        return (r.attachment, r.records, Some(pending));
    }
    let attachment = crate::policy::attach::attach(policies, routes);
    let records = Arc::new(attachment.records(routes));
    // Attaching no policy costs nothing: nothing kept.
    let pending = (!policies.is_empty()).then(|| Pending {
        heads: heads(inputs, memo.route_order()),
        lists: policies
            .iter()
            .map(|p| (p.errors.clone(), p.warnings.clone()))
            .collect(),
        reports: Vec::new(),
    });
    (attachment, records, pending)
}

impl Pending {
    /// Last call's reports to offer `policy::report` (taken).
    pub(crate) fn prior_reports(pending: &mut Option<Pending>) -> Vec<PolicyReport> {
        pending
            .as_mut()
            .map(|p| std::mem::take(&mut p.reports))
            .unwrap_or_default()
    }

    /// Keeps this call's compilations, and its attachment with what was
    /// made from it, for the next call.
    pub(crate) fn keep(
        pending: Option<Pending>,
        memo: &mut RouteMemo,
        compilations: Vec<Compilation>,
        attachment: Attachment,
        records: Arc<Vec<PolicyAttachment>>,
        reports: Vec<PolicyReport>,
    ) {
        memo.next_standing = Standing {
            compilations,
            attachment: pending.map(|p| Kept {
                heads: p.heads,
                attachment,
                lists: p.lists,
                records,
                reports,
            }),
        };
    }
}

impl Kept {
    /// The attachment, when `policies` are compiled from last call's
    /// policies (the caller's to know: see the module doc) and this call's
    /// routes (`routes`, at input positions `sorted`) are last call's with
    /// the same heads, but for routes added, removed or re-headed that no
    /// policy may reach ([`policy::attach::may_reach`]): kept anew for this
    /// call's routes. The policies' errors and warnings are then set to
    /// those attaching gave them.
    ///
    /// Last call's heads and this call's routes are walked side by side,
    /// both in the route order (kind, namespace, name): a route that is the
    /// very same object as last call's, or of the same key with the same
    /// head, keeps its effective policies (moved to its position in this
    /// call's order); one of a key only last call's (removed) or only this
    /// call's (added) had and gets none.
    fn offer(
        self,
        inputs: &Inputs,
        sorted: &[usize],
        routes: &[Route<'_>],
        policies: &mut [Compiled<'_>],
    ) -> Option<Kept> {
        if self.lists.len() != policies.len()
            || self.attachment.reached.len() != policies.len()
            || self.attachment.effective.len() != self.heads.len()
            || sorted.len() != routes.len()
        {
            return None;
        }
        // Per last call's route: its position in this call's order (none:
        // removed).
        let mut moved_to: Vec<Option<usize>> = vec![None; self.heads.len()];
        let mut changed: Vec<(RouteKind, &str, &str)> = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < self.heads.len() || j < routes.len() {
            let new = match (j < routes.len()).then(|| head_at(inputs, sorted[j])) {
                Some(None) => return None,
                Some(Some(new)) => Some(new),
                None => None,
            };
            let Some(new) = new else {
                changed.push(key_of(&self.heads[i]));
                i += 1;
                continue;
            };
            let route = &routes[j];
            let Some(old) = self.heads.get(i) else {
                changed.push((route.kind, route.namespace, route.name));
                j += 1;
                continue;
            };
            if is(old, new) {
                moved_to[i] = Some(j);
                (i, j) = (i + 1, j + 1);
                continue;
            }
            match key_of(old).cmp(&(route.kind, route.namespace, route.name)) {
                std::cmp::Ordering::Equal => {
                    // A head changed: what reaches this route may have,
                    // unless no policy may reach its key at all.
                    if !same_head(old, new, route) {
                        changed.push(key_of(old));
                    }
                    moved_to[i] = Some(j);
                    (i, j) = (i + 1, j + 1);
                }
                std::cmp::Ordering::Less => {
                    changed.push(key_of(old));
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    changed.push((route.kind, route.namespace, route.name));
                    j += 1;
                }
            }
        }
        let reachable = |p: &Compiled<'_>| {
            changed
                .iter()
                .any(|&(kind, namespace, name)| crate::policy::attach::may_reach(p, kind, namespace, name))
        };
        if policies.iter().any(reachable) {
            return None;
        }
        // Nothing added, removed or re-headed: the same routes in the same
        // positions.
        let unmoved = changed.is_empty();
        let Kept {
            mut heads,
            mut attachment,
            lists,
            records,
            reports,
        } = self;
        if unmoved {
            // The same routes: only the objects that changed are kept anew.
            for (old, &i) in heads.iter_mut().zip(sorted) {
                let new = head_at(inputs, i)?;
                if !is(old, new) {
                    *old = Head::to_owned(new);
                }
            }
        } else {
            heads = self::heads(inputs, sorted);
            // No policy reached a removed or re-headed route, none reaches
            // an added or re-headed one.
            let mut effective: Vec<RoutePolicies> = (0..routes.len()).map(|_| Vec::new()).collect();
            for (old, e) in attachment.effective.into_iter().enumerate() {
                match moved_to[old] {
                    Some(new) => effective[new] = e,
                    None if e.is_empty() => {}
                    None => return None,
                }
            }
            attachment.effective = effective;
            for reached in &mut attachment.reached {
                let mut now = std::collections::BTreeSet::new();
                for &old in reached.iter() {
                    now.insert(moved_to.get(old).copied().flatten()?);
                }
                *reached = now;
            }
        }
        for (p, (errors, warnings)) in policies.iter_mut().zip(&lists) {
            p.errors.clone_from(errors);
            p.warnings.clone_from(warnings);
        }
        Some(Kept {
            heads,
            attachment,
            lists,
            records,
            reports,
        })
    }
}

/// Last call's route's key (kind, namespace, name), as `route::model`
/// derives it.
fn key_of(head: &Head) -> (RouteKind, &str, &str) {
    match head {
        Head::Http(r) => {
            let (namespace, name) = model::namespace_name(&r.metadata);
            (RouteKind::Http, namespace, name)
        }
        Head::Grpc(r) => {
            let (namespace, name) = model::namespace_name(&r.metadata);
            (RouteKind::Grpc, namespace, name)
        }
    }
}

/// Whether `old` is the very object `new`.
fn is(old: &Head, new: HeadRef<'_>) -> bool {
    match (old, new) {
        (Head::Http(a), HeadRef::Http(b)) => Arc::ptr_eq(a, b),
        (Head::Grpc(a), HeadRef::Grpc(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

/// Whether last call's route `old` has the head of this call's `route`
/// (whose object is `new`): what `policy::attach` reads of a route.
fn same_head(old: &Head, new: HeadRef<'_>, route: &Route<'_>) -> bool {
    if is(old, new) {
        return true;
    }
    let source = api::Source::default();
    let old = match old {
        Head::Http(a) => model::from_http(a, &source, &[]),
        Head::Grpc(a) => model::from_grpc(a, &source, &[]),
    };
    old.kind == route.kind
        && old.namespace == route.namespace
        && old.name == route.name
        && old.labels == route.labels
        && old.rule_count() == route.rule_count()
        && (0..old.rule_count()).all(|i| old.rule_name(i) == route.rule_name(i))
}
