//! Tree-wide duplicate route detection (README "HTTPProxy", after Contour's
//! unmerged design "Reworking HTTPProxy duplicate route detection and
//! reporting").
//!
//! Duplicates are judged at the leaves, on the *full* route: the merged
//! path condition plus the sets of header and query conditions
//! ([`Merged`], whose equality ignores order). Precedence is processing
//! order (depth-first in include order from the root, routes in their
//! order within a proxy): the first route wins and is programmed; every
//! later one with the same conditions is not. The proxy holding a
//! duplicate gets the error `RouteError/DuplicateMatchConditions` (so
//! `Valid=False`); every ancestor up to the root gets the warning
//! `IncludeError/DuplicateMatchConditions` naming that proxy, and stays
//! valid unless something else is wrong with it.
//!
//! A prefix's trailing `/` does not make another route: the seed's second
//! example (`/foo` + `/` against `/` + `/foo`) is a duplicate, so prefixes
//! are compared without it ([`key`]).
//!
//! What stands in for a route (a 502 for a missing include, a 500 fence)
//! never makes a route a duplicate: where its conditions equal a route's,
//! the route is served and the stand-in dropped; two equal stand-ins are
//! programmed once.

use std::collections::HashMap;

use super::conditions::{Merged, PathMatch};
use super::status::Events;
use super::tree::VirtualHostPlan;
use super::{ProxyError, reason, type_};

/// Marks duplicates in `vh` (unprogrammed, `duplicate_of` set) and records
/// the errors and warnings.
pub fn detect(vh: &mut VirtualHostPlan<'_>, statuses: &mut Events) {
    let keys: Vec<Merged> = vh.entries.iter().map(|e| key(&e.conditions)).collect();
    let mut winners: HashMap<&Merged, usize> = HashMap::new();
    let mut duplicates: Vec<(usize, usize)> = Vec::new();
    for (i, e) in vh.entries.iter().enumerate() {
        if !e.action.is_route() {
            continue;
        }
        match winners.get(&keys[i]) {
            Some(&w) => duplicates.push((i, w)),
            None => {
                winners.insert(&keys[i], i);
            }
        }
    }
    let mut stand_ins: HashMap<&Merged, usize> = HashMap::new();
    let mut dropped: Vec<usize> = Vec::new();
    for (i, e) in vh.entries.iter().enumerate() {
        if e.action.is_route() {
            continue;
        }
        if winners.contains_key(&keys[i]) || stand_ins.contains_key(&keys[i]) {
            dropped.push(i);
        } else {
            stand_ins.insert(&keys[i], i);
        }
    }
    for i in dropped {
        vh.entries[i].programmed = false;
    }
    for (i, w) in duplicates {
        let entry = &mut vh.entries[i];
        entry.programmed = false;
        entry.duplicate_of = Some(w);
        let Some((holder, ancestors)) = entry.chain.split_last() else {
            continue;
        };
        let field = match &entry.action {
            super::tree::Action::Route { index, .. } => format!("spec.routes[{index}].conditions"),
            _ => "spec.routes".to_string(),
        };
        statuses.error(
            holder,
            ProxyError::semantic(
                type_::ROUTE_ERROR,
                reason::DUPLICATE_MATCH_CONDITIONS,
                field,
                format!(
                    "duplicate match conditions defined on route matching {}",
                    entry.conditions
                ),
            ),
        );
        for ancestor in ancestors {
            statuses.warning(
                ancestor,
                ProxyError::semantic(
                    type_::INCLUDE_ERROR,
                    reason::DUPLICATE_MATCH_CONDITIONS,
                    "spec.includes",
                    format!("duplicate match conditions defined in included HTTPProxy \"{holder}\""),
                ),
            );
        }
    }
}

/// What duplicates are compared on: the merged conditions with a prefix's
/// trailing `/` dropped (`/` itself stays).
pub fn key(conditions: &Merged) -> Merged {
    let mut key = conditions.clone();
    if let PathMatch::Prefix(p) = &mut key.path {
        let trimmed = p.trim_end_matches('/');
        *p = if trimmed.is_empty() {
            "/".to_string()
        } else {
            trimmed.to_string()
        };
    }
    key
}
