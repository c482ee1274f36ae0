//! Match conditions of an HTTPProxy tree: their validity (as Contour's
//! `internal/dag/conditions.go` checks them), their merge from root to
//! leaf, and the order-insensitive key duplicates are detected on.
//!
//! Merging (as Contour): path conditions concatenate along the include
//! chain (`//` collapsed to `/`); the result is a regex when any part is
//! one, otherwise prefix or exact as the last path condition says; no path
//! at all is prefix `/`. Header and query conditions accumulate.
//!
//! Where Contour silently ignores a condition (a header condition that sets
//! no match, so the route matches more than written), portcullis reports
//! it as invalid instead: a dropped condition would widen the route.

use std::collections::BTreeSet;
use std::fmt;

use api::httpproxy::{HeaderMatchCondition, MatchCondition, QueryParameterMatchCondition};

use super::{ProxyError, reason, type_};
use crate::envoy::regex;

/// A merged path condition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathMatch {
    Prefix(String),
    Exact(String),
    Regex(String),
}

impl PathMatch {
    pub fn value(&self) -> &str {
        match self {
            PathMatch::Prefix(v) | PathMatch::Exact(v) | PathMatch::Regex(v) => v,
        }
    }
}

/// What one header condition asks; values as written.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HeaderMatch {
    Present,
    NotPresent,
    Exact(String),
    NotExact(String),
    Contains(String),
    NotContains(String),
    Regex(String),
}

/// One header condition, normalised: the name lower-cased (header names are
/// case-insensitive), `ignoreCase` and `treatMissingAsEmpty` kept only
/// where they change the match.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HeaderCond {
    pub name: String,
    pub matcher: HeaderMatch,
    pub ignore_case: bool,
    pub treat_missing_as_empty: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueryMatch {
    Present,
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    Regex(String),
}

/// One query parameter condition; the name as written (query parameter
/// names are case-sensitive in Envoy).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueryCond {
    pub name: String,
    pub matcher: QueryMatch,
    pub ignore_case: bool,
}

/// The full conditions of one route after the merge: what Envoy matches
/// and what duplicates are compared on. Header and query conditions are
/// sets: their order never changes which requests match, and a condition
/// written twice asks nothing more.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Merged {
    pub path: PathMatch,
    pub headers: BTreeSet<HeaderCond>,
    pub queries: BTreeSet<QueryCond>,
}

impl Merged {
    /// The conditions of the root (matches everything).
    pub fn root() -> Self {
        Self {
            path: PathMatch::Prefix("/".into()),
            headers: BTreeSet::new(),
            queries: BTreeSet::new(),
        }
    }
}

/// Renders the conditions for status messages, in a fixed order so that
/// the same conditions always read the same:
/// `path prefix: "/foo", header "x-a" exact: "b", query parameter "q" present`.
impl fmt::Display for Merged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            PathMatch::Prefix(v) => write!(f, "path prefix: {v:?}")?,
            PathMatch::Exact(v) => write!(f, "path exact: {v:?}")?,
            PathMatch::Regex(v) => write!(f, "path regex: {v:?}")?,
        }
        for h in &self.headers {
            write!(f, ", header {:?} ", h.name)?;
            match &h.matcher {
                HeaderMatch::Present => f.write_str("present")?,
                HeaderMatch::NotPresent => f.write_str("notpresent")?,
                HeaderMatch::Exact(v) => write!(f, "exact: {v:?}")?,
                HeaderMatch::NotExact(v) => write!(f, "notexact: {v:?}")?,
                HeaderMatch::Contains(v) => write!(f, "contains: {v:?}")?,
                HeaderMatch::NotContains(v) => write!(f, "notcontains: {v:?}")?,
                HeaderMatch::Regex(v) => write!(f, "regex: {v:?}")?,
            }
            if h.ignore_case {
                f.write_str(" (ignoreCase)")?;
            }
            if h.treat_missing_as_empty {
                f.write_str(" (treatMissingAsEmpty)")?;
            }
        }
        for q in &self.queries {
            write!(f, ", query parameter {:?} ", q.name)?;
            match &q.matcher {
                QueryMatch::Present => f.write_str("present")?,
                QueryMatch::Exact(v) => write!(f, "exact: {v:?}")?,
                QueryMatch::Prefix(v) => write!(f, "prefix: {v:?}")?,
                QueryMatch::Suffix(v) => write!(f, "suffix: {v:?}")?,
                QueryMatch::Contains(v) => write!(f, "contains: {v:?}")?,
                QueryMatch::Regex(v) => write!(f, "regex: {v:?}")?,
            }
            if q.ignore_case {
                f.write_str(" (ignoreCase)")?;
            }
        }
        Ok(())
    }
}

/// Contour's `includeMatchConditionsValid` and `pathMatchConditionsValid`
/// for an include's conditions: only (at most one) prefix.
pub fn include_valid(conds: &[MatchCondition], field: &str) -> Result<(), ProxyError> {
    let invalid = |message: String| {
        ProxyError::semantic(
            type_::INCLUDE_ERROR,
            reason::PATH_MATCH_CONDITIONS_NOT_VALID,
            field,
            format!("include: {message}"),
        )
    };
    if conds.iter().any(|c| !c.exact.is_empty()) {
        return Err(invalid(
            "exact conditions are not allowed in includes block".into(),
        ));
    }
    if conds.iter().any(|c| !c.regex.is_empty()) {
        return Err(invalid(
            "regex conditions are not allowed in includes block".into(),
        ));
    }
    path_valid(conds).map_err(|e| invalid(e.to_string()))
}

/// Contour's `pathMatchConditionsValid` for a route's own conditions.
pub fn route_path_valid(conds: &[MatchCondition], field: &str) -> Result<(), ProxyError> {
    path_valid(conds).map_err(|message| {
        ProxyError::structural(
            type_::ROUTE_ERROR,
            reason::PATH_MATCH_CONDITIONS_NOT_VALID,
            field,
            format!("route: {message}"),
        )
    })
}

/// Why path conditions are not valid, in Contour's words (the caller
/// adds the field, `route: `/`include: ` and the reason).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathConditionError {
    #[error("{kind} conditions must start with /, {value} was supplied")]
    NotAbsolute { kind: &'static str, value: String },
    #[error("supplied regex: {value} invalid. error: {error}")]
    Regex {
        value: String,
        #[source]
        error: regex::RegexError,
    },
    #[error("more than one prefix, exact or regex is not allowed in a condition block")]
    Several,
}

/// A header condition that asks nothing or more than one thing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "header condition for {name:?} must set exactly one of present, notpresent, contains, notcontains, exact, notexact or regex"
)]
pub struct HeaderConditionError {
    pub name: String,
}

/// A query parameter condition that asks nothing or more than one thing
/// (Contour's words).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryConditionError {
    #[error("must specify at least one query parameter condition")]
    Empty,
    #[error("cannot specify more than one condition in the same match condition branch")]
    Several,
}

fn path_valid(conds: &[MatchCondition]) -> Result<(), PathConditionError> {
    let mut count = 0;
    for c in conds {
        for (kind, value) in [("prefix", &c.prefix), ("exact", &c.exact), ("regex", &c.regex)] {
            if value.is_empty() {
                continue;
            }
            count += 1;
            if !value.starts_with('/') {
                return Err(PathConditionError::NotAbsolute {
                    kind,
                    value: value.clone(),
                });
            }
            if kind == "regex"
                && let Err(error) = regex::check(value)
            {
                return Err(PathConditionError::Regex {
                    value: value.clone(),
                    error,
                });
            }
        }
    }
    if count > 1 {
        return Err(PathConditionError::Several);
    }
    Ok(())
}

/// Contour's `headerMatchConditionsValid` over merged conditions, plus a
/// header condition that asks nothing or more than one thing (Contour reads
/// the first of them, or none).
pub fn headers_valid(conds: &[&MatchCondition], field: &str) -> Result<(), ProxyError> {
    let invalid = |message: &str| {
        ProxyError::structural(
            type_::ROUTE_ERROR,
            reason::HEADER_MATCH_CONDITIONS_NOT_VALID,
            field,
            message.to_string(),
        )
    };
    let mut seen: BTreeSet<HeaderCond> = BTreeSet::new();
    let mut exact_names: BTreeSet<String> = BTreeSet::new();
    for h in conds.iter().filter_map(|c| c.header.as_ref()) {
        let cond = header(h).map_err(|e| invalid(&e.to_string()))?;
        let has = |m: HeaderMatch| seen.iter().any(|s| s.name == cond.name && s.matcher == m);
        match &cond.matcher {
            HeaderMatch::Present | HeaderMatch::NotPresent => {
                let other = if cond.matcher == HeaderMatch::Present {
                    HeaderMatch::NotPresent
                } else {
                    HeaderMatch::Present
                };
                if has(other) {
                    return Err(invalid(
                        "cannot specify contradictory 'present' and 'notpresent' conditions for the same route and header",
                    ));
                }
            }
            HeaderMatch::Exact(v) => {
                if !exact_names.insert(cond.name.clone()) {
                    return Err(invalid(
                        "cannot specify duplicate header 'exact match' conditions in the same route",
                    ));
                }
                if has(HeaderMatch::NotExact(v.clone())) {
                    return Err(invalid(
                        "cannot specify contradictory 'exact' and 'notexact' conditions for the same route and header",
                    ));
                }
            }
            HeaderMatch::NotExact(v) => {
                if has(HeaderMatch::Exact(v.clone())) {
                    return Err(invalid(
                        "cannot specify contradictory 'exact' and 'notexact' conditions for the same route and header",
                    ));
                }
            }
            HeaderMatch::Contains(v) => {
                if has(HeaderMatch::NotContains(v.clone())) {
                    return Err(invalid(
                        "cannot specify contradictory 'contains' and 'notcontains' conditions for the same route and header",
                    ));
                }
            }
            HeaderMatch::NotContains(v) => {
                if has(HeaderMatch::Contains(v.clone())) {
                    return Err(invalid(
                        "cannot specify contradictory 'contains' and 'notcontains' conditions for the same route and header",
                    ));
                }
            }
            HeaderMatch::Regex(v) => {
                if regex::check(v).is_err() {
                    return Err(invalid(
                        "invalid regular expression specified for 'regex' condition",
                    ));
                }
            }
        }
        seen.insert(cond);
    }
    Ok(())
}

/// Contour's `queryParameterMatchConditionsValid` over merged conditions.
pub fn queries_valid(conds: &[&MatchCondition], field: &str) -> Result<(), ProxyError> {
    let invalid = |message: String| {
        ProxyError::structural(
            type_::ROUTE_ERROR,
            reason::QUERY_PARAMETER_MATCH_CONDITIONS_NOT_VALID,
            field,
            message,
        )
    };
    let mut exact_names: BTreeSet<String> = BTreeSet::new();
    for q in conds.iter().filter_map(|c| c.query_parameter.as_ref()) {
        let cond = query(q).map_err(|e| invalid(e.to_string()))?;
        match &cond.matcher {
            QueryMatch::Exact(_) if !exact_names.insert(cond.name.to_ascii_lowercase()) => {
                return Err(invalid(
                    "cannot specify duplicate query parameter 'exact match' conditions in the same route"
                        .into(),
                ));
            }
            QueryMatch::Regex(v) if regex::check(v).is_err() => {
                return Err(invalid(
                    "invalid regular expression specified for 'regex' condition".into(),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// One header condition, or why it asks nothing or more than one thing.
pub fn header(h: &HeaderMatchCondition) -> Result<HeaderCond, HeaderConditionError> {
    let mut set = Vec::new();
    if h.present {
        set.push(HeaderMatch::Present);
    }
    if h.not_present {
        set.push(HeaderMatch::NotPresent);
    }
    for (value, make) in [
        (&h.contains, HeaderMatch::Contains as fn(String) -> HeaderMatch),
        (&h.not_contains, HeaderMatch::NotContains),
        (&h.exact, HeaderMatch::Exact),
        (&h.not_exact, HeaderMatch::NotExact),
        (&h.regex, HeaderMatch::Regex),
    ] {
        if !value.is_empty() {
            set.push(make(value.clone()));
        }
    }
    if set.len() != 1 {
        return Err(HeaderConditionError { name: h.name.clone() });
    }
    let matcher = set.remove(0);
    let ignore_case = h.ignore_case
        && matches!(
            matcher,
            HeaderMatch::Exact(_)
                | HeaderMatch::NotExact(_)
                | HeaderMatch::Contains(_)
                | HeaderMatch::NotContains(_)
        );
    let treat_missing_as_empty =
        h.treat_missing_as_empty && matches!(matcher, HeaderMatch::NotExact(_) | HeaderMatch::NotContains(_));
    Ok(HeaderCond {
        name: h.name.to_ascii_lowercase(),
        matcher,
        ignore_case,
        treat_missing_as_empty,
    })
}

/// One query parameter condition, or Contour's message for why not.
pub fn query(q: &QueryParameterMatchCondition) -> Result<QueryCond, QueryConditionError> {
    let mut set = Vec::new();
    for (value, make) in [
        (&q.exact, QueryMatch::Exact as fn(String) -> QueryMatch),
        (&q.prefix, QueryMatch::Prefix),
        (&q.suffix, QueryMatch::Suffix),
        (&q.regex, QueryMatch::Regex),
        (&q.contains, QueryMatch::Contains),
    ] {
        if !value.is_empty() {
            set.push(make(value.clone()));
        }
    }
    if q.present {
        set.push(QueryMatch::Present);
    }
    match set.len() {
        0 => return Err(QueryConditionError::Empty),
        1 => {}
        _ => return Err(QueryConditionError::Several),
    }
    let matcher = set.remove(0);
    let ignore_case = q.ignore_case
        && matches!(
            matcher,
            QueryMatch::Exact(_) | QueryMatch::Prefix(_) | QueryMatch::Suffix(_) | QueryMatch::Contains(_)
        );
    Ok(QueryCond {
        name: q.name.clone(),
        matcher,
        ignore_case,
    })
}

/// Merges conditions root to leaf (Contour's `mergePathMatchConditions`,
/// `mergeHeaderMatchConditions`, `mergeQueryParamMatchConditions`).
/// Header or query conditions that do not read are left out: callers
/// validate first and fence what did not validate.
pub fn merge(conds: &[&MatchCondition]) -> Merged {
    let mut path = String::new();
    let mut is_regex = false;
    let mut last: Option<&str> = None;
    for c in conds {
        if !c.prefix.is_empty() {
            path.push_str(&c.prefix);
            last = Some("prefix");
        } else if !c.exact.is_empty() {
            path.push_str(&c.exact);
            last = Some("exact");
        } else if !c.regex.is_empty() {
            path.push_str(&c.regex);
            is_regex = true;
            last = Some("regex");
        }
    }
    let path = collapse_slashes(&path);
    let path = if path.is_empty() {
        PathMatch::Prefix("/".into())
    } else if is_regex {
        PathMatch::Regex(path)
    } else if last == Some("exact") {
        PathMatch::Exact(path)
    } else {
        PathMatch::Prefix(path)
    };
    Merged {
        path,
        headers: conds
            .iter()
            .filter_map(|c| c.header.as_ref())
            .filter_map(|h| header(h).ok())
            .collect(),
        queries: conds
            .iter()
            .filter_map(|c| c.query_parameter.as_ref())
            .filter_map(|q| query(q).ok())
            .collect(),
    }
}

/// `//+` → `/`, as Contour does after concatenating prefixes.
fn collapse_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c == '/' && out.ends_with('/') {
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_errors_name_the_variant_and_keep_contours_text() {
        let err = path_valid(&[prefix("foo")]).err();
        assert_eq!(
            err,
            Some(PathConditionError::NotAbsolute {
                kind: "prefix",
                value: "foo".into()
            })
        );
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("prefix conditions must start with /, foo was supplied")
        );
        let err = path_valid(&[prefix("/a"), prefix("/b")]).err();
        assert_eq!(err, Some(PathConditionError::Several));
        let h = HeaderMatchCondition {
            name: "x-a".into(),
            ..Default::default()
        };
        let err = header(&h).err();
        assert_eq!(err, Some(HeaderConditionError { name: "x-a".into() }));
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some(
                r#"header condition for "x-a" must set exactly one of present, notpresent, contains, notcontains, exact, notexact or regex"#
            )
        );
        let q = QueryParameterMatchCondition {
            name: "q".into(),
            ..Default::default()
        };
        let err = query(&q).err();
        assert_eq!(err, Some(QueryConditionError::Empty));
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("must specify at least one query parameter condition")
        );
    }

    fn prefix(p: &str) -> MatchCondition {
        MatchCondition {
            prefix: p.into(),
            ..Default::default()
        }
    }

    #[test]
    fn prefixes_concatenate_and_slashes_collapse() {
        let a = prefix("/foo/");
        let b = prefix("/bar");
        assert_eq!(merge(&[&a, &b]).path, PathMatch::Prefix("/foo/bar".into()));
        assert_eq!(merge(&[]).path, PathMatch::Prefix("/".into()));
    }

    #[test]
    fn last_path_condition_decides_exact() {
        let a = prefix("/foo");
        let b = MatchCondition {
            exact: "/bar".into(),
            ..Default::default()
        };
        assert_eq!(merge(&[&a, &b]).path, PathMatch::Exact("/foo/bar".into()));
    }
}
