//! `headerModifiers` (literal values) and `transformation` (values are
//! Envoy format strings) → route-level header mutations.

use api::policy::{HeaderEdits, HeaderModifiers, Transformation};

use super::PolicyError;
use crate::error::RuleError;
use crate::route::filters::{self, HeaderMods};

type Both = (HeaderMods, HeaderMods);

fn edits(e: &HeaderEdits, field: &str, formatted: bool, into: &mut HeaderMods) -> Result<(), RuleError> {
    let set = e.set.iter().map(|h| (h.name.as_str(), h.value.as_str()));
    let add = e.add.iter().map(|h| (h.name.as_str(), h.value.as_str()));
    if formatted {
        filters::header_modifier_formatted(set, add, &e.remove, field, into)
    } else {
        filters::header_modifier(set, add, &e.remove, field, into)
    }
}

fn both(
    request: Option<&HeaderEdits>,
    response: Option<&HeaderEdits>,
    field: &str,
    formatted: bool,
) -> Result<Both, PolicyError> {
    let mut out = Both::default();
    let to_policy = |e: RuleError| PolicyError {
        field: e.field,
        message: e.message,
        class: e.class,
    };
    if let Some(r) = request {
        edits(r, &format!("{field}.request"), formatted, &mut out.0).map_err(to_policy)?;
    }
    if let Some(r) = response {
        edits(r, &format!("{field}.response"), formatted, &mut out.1).map_err(to_policy)?;
    }
    // A policy that alone exceeds Envoy's per-route limit can never apply;
    // merged with a rule's own additions it is checked again per route
    // (`route::rule`).
    filters::check_additions(&out.0, &format!("{field}.request"), "request").map_err(to_policy)?;
    filters::check_additions(&out.1, &format!("{field}.response"), "response").map_err(to_policy)?;
    Ok(out)
}

pub fn literal(h: &HeaderModifiers, field: &str) -> Result<Both, PolicyError> {
    both(h.request.as_ref(), h.response.as_ref(), field, false)
}

pub fn formatted(t: &Transformation, field: &str) -> Result<Both, PolicyError> {
    both(t.request.as_ref(), t.response.as_ref(), field, true)
}
