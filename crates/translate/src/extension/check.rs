//! Hook replies checked with the same in-process checks as portcullis's own
//! output (STANDARD), before they replace anything: an extension's reply
//! that Envoy would NACK must not reach Envoy (a NACK freezes the whole
//! listener, every tenant's routes with it), so it counts as a failed hook
//! for its scope.
//!
//! The reply is walked as a dynamic message over envoy-types' descriptors
//! (`output::descriptor_pool`), so every nested message is reached,
//! including what hides in `Any` (typed configs):
//! - an `Any` whose type Envoy's API does not define (or whose bytes do not
//!   decode as that type) is refused — Envoy refuses a typed config it has
//!   no factory for;
//! - every `RegexMatcher` regex goes through `envoy::regex` (RE2 with
//!   Envoy's program-size limit);
//! - every `HeaderValue` key and value goes through the header checks route
//!   filters use (names, CR/LF/NUL, 16 KiB, format strings);
//! - a connection manager's HTTP filters end with the router, and only
//!   there (Envoy refuses a terminal filter elsewhere, or none last);
//! - a listener's filter chains have distinct matches;
//! - every message meets Envoy's protoc-gen-validate rules ([`super::pgv`]:
//!   required fields, lengths, bounds);
//! - an Envoy route needs its match (with a path specifier) and an action;
//!   a virtual host a name and domains; a route configuration unique
//!   virtual host names and domains.
//!
//! What these checks cannot reach, STRICT's real Envoy does, and its
//! verdict is attributed to the hook (`replacement::strict_report::absorb`).

use std::collections::BTreeSet;

use prost::{Message, Name};
use prost_reflect::{DynamicMessage, ReflectMessage, Value};

/// Deeper nesting than Envoy's own configurations have: refused rather
/// than walked (a reply is untrusted input).
const MAX_DEPTH: usize = 64;

/// Why a reply cannot be used. Its hook turns it into
/// `HookFailure::InvalidReply` (class `extension`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ReplyError {
    #[error("{type_name} is not a known message type")]
    UnknownType { type_name: String },
    #[error("cannot be decoded: {0}")]
    Decode(#[source] prost::DecodeError),
    /// A check failed at `path` (dotted field names from the reply's
    /// root, empty at the root itself). Boxed: the walk returns it
    /// through every level.
    #[error("{}", at(path, problem))]
    Invalid {
        path: String,
        #[source]
        problem: Box<Problem>,
    },
}

fn at(path: &str, problem: &Problem) -> String {
    if path.is_empty() {
        problem.to_string()
    } else {
        format!("{path}: {problem}")
    }
}

/// What Envoy would refuse in one message of a reply.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Problem {
    #[error("nested more than {MAX_DEPTH} levels deep")]
    TooDeep,
    #[error(transparent)]
    Pgv(#[from] super::pgv::PgvError),
    #[error("regex {regex:?}: {error}")]
    Regex {
        regex: String,
        #[source]
        error: crate::envoy::regex::RegexError,
    },
    #[error(transparent)]
    HeaderName(crate::route::filters::HeaderError),
    #[error("header {key:?}: {error}")]
    HeaderValue {
        key: String,
        #[source]
        error: crate::route::filters::HeaderError,
    },
    #[error("a route needs a match")]
    RouteMatch,
    #[error("a route needs an action")]
    RouteAction,
    #[error("a route match needs a path specifier")]
    PathSpecifier,
    #[error("a virtual host needs a name")]
    VirtualHostName,
    #[error("a virtual host needs at least one domain")]
    VirtualHostDomains,
    #[error("unknown type URL {url:?}")]
    UnknownTypeUrl { url: String },
    #[error("{url}: cannot be decoded: {error}")]
    AnyDecode {
        url: String,
        #[source]
        error: prost::DecodeError,
    },
    #[error("virtual host name {name:?} is used twice")]
    DuplicateHostName { name: String },
    #[error("domain {domain:?} is used by two virtual hosts")]
    DuplicateDomain { domain: String },
    #[error("http_filters[{index}]: the router is terminal and must be the last HTTP filter")]
    RouterNotLast { index: usize },
    #[error("http_filters[{index}]: the last HTTP filter must be the router")]
    LastNotRouter { index: usize },
    #[error("filter_chains[{index}]: another filter chain has the same filter_chain_match")]
    DuplicateChainMatch { index: usize },
}

/// Checks a reply of type `M`; the error names the field path.
pub fn check<M: Message + Name>(message: &M) -> Result<(), ReplyError> {
    let pool = crate::output::descriptor_pool();
    let Some(desc) = pool.get_message_by_name(&M::full_name()) else {
        return Err(ReplyError::UnknownType {
            type_name: M::full_name(),
        });
    };
    let dynamic =
        DynamicMessage::decode(desc, message.encode_to_vec().as_slice()).map_err(ReplyError::Decode)?;
    let mut path = Vec::new();
    walk(&dynamic, &mut path, 0)
}

type Failure = ReplyError;

fn fail(path: &[String], problem: impl Into<Problem>) -> Failure {
    ReplyError::Invalid {
        path: path.join("."),
        problem: Box::new(problem.into()),
    }
}

fn string_field(m: &DynamicMessage, name: &str) -> String {
    match m.get_field_by_name(name).as_deref() {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

fn walk(m: &DynamicMessage, path: &mut Vec<String>, depth: usize) -> Result<(), Failure> {
    if depth > MAX_DEPTH {
        return Err(fail(path, Problem::TooDeep));
    }
    let desc = m.descriptor();
    super::pgv::check(m).map_err(|e| fail(path, e))?;
    match desc.full_name() {
        "google.protobuf.Any" => return walk_any(m, path, depth),
        "envoy.type.matcher.v3.RegexMatcher" => {
            let regex = string_field(m, "regex");
            if let Err(error) = crate::envoy::regex::check(&regex) {
                return Err(fail(path, Problem::Regex { regex, error }));
            }
        }
        "envoy.config.core.v3.HeaderValue" => {
            let key = string_field(m, "key");
            crate::route::filters::check_name(&key).map_err(|e| fail(path, Problem::HeaderName(e)))?;
            let value = string_field(m, "value");
            let checked = crate::route::filters::check_value(&value)
                .and_then(|()| crate::envoy::format::check(&value).map_err(Into::into));
            if let Err(error) = checked {
                return Err(fail(path, Problem::HeaderValue { key, error }));
            }
        }
        "envoy.config.route.v3.Route" => {
            if !m.has_field_by_name("match") {
                return Err(fail(path, Problem::RouteMatch));
            }
            let actions = [
                "route",
                "redirect",
                "direct_response",
                "filter_action",
                "non_forwarding_action",
            ];
            if !actions.iter().any(|a| m.has_field_by_name(a)) {
                return Err(fail(path, Problem::RouteAction));
            }
        }
        "envoy.config.route.v3.RouteMatch" => {
            let specifiers = [
                "prefix",
                "path",
                "safe_regex",
                "connect_matcher",
                "path_separated_prefix",
                "path_match_policy",
            ];
            if !specifiers.iter().any(|a| m.has_field_by_name(a)) {
                return Err(fail(path, Problem::PathSpecifier));
            }
        }
        "envoy.config.route.v3.VirtualHost" => {
            if string_field(m, "name").is_empty() {
                return Err(fail(path, Problem::VirtualHostName));
            }
            let domains = match m.get_field_by_name("domains").as_deref() {
                Some(Value::List(l)) => l.len(),
                _ => 0,
            };
            if domains == 0 {
                return Err(fail(path, Problem::VirtualHostDomains));
            }
        }
        "envoy.config.route.v3.RouteConfiguration" => unique_hosts(m, path)?,
        "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager" => {
            router_last(m, path)?
        }
        "envoy.config.listener.v3.Listener" => unique_chain_matches(m, path)?,
        _ => {}
    }
    for (field, value) in m.fields() {
        path.push(field.name().to_string());
        let r = walk_value(value, path, depth);
        path.pop();
        r?;
    }
    Ok(())
}

fn walk_value(value: &Value, path: &mut Vec<String>, depth: usize) -> Result<(), Failure> {
    match value {
        Value::Message(m) => walk(m, path, depth + 1),
        Value::List(items) => {
            for (i, v) in items.iter().enumerate() {
                if let Some(last) = path.last_mut() {
                    last.push_str(&format!("[{i}]"));
                }
                let r = walk_value(v, path, depth);
                if let Some(last) = path.last_mut()
                    && let Some(at) = last.rfind('[')
                {
                    last.truncate(at);
                }
                r?;
            }
            Ok(())
        }
        Value::Map(entries) => {
            for v in entries.values() {
                walk_value(v, path, depth)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Envoy resolves a typed config by the type named after the last `/` of
/// its URL; one its API does not define has no factory (a NACK).
fn walk_any(m: &DynamicMessage, path: &mut Vec<String>, depth: usize) -> Result<(), Failure> {
    let url = string_field(m, "type_url");
    let name = url.rsplit_once('/').map_or(url.as_str(), |(_, n)| n);
    let Some(desc) = crate::output::descriptor_pool().get_message_by_name(name) else {
        return Err(fail(path, Problem::UnknownTypeUrl { url }));
    };
    let bytes = match m.get_field_by_name("value").as_deref() {
        Some(Value::Bytes(b)) => b.clone(),
        _ => Default::default(),
    };
    let inner =
        DynamicMessage::decode(desc, bytes).map_err(|error| fail(path, Problem::AnyDecode { url, error }))?;
    walk(&inner, path, depth + 1)
}

/// Envoy refuses a route configuration whose virtual hosts share a name or
/// a domain.
fn unique_hosts(m: &DynamicMessage, path: &[String]) -> Result<(), Failure> {
    let Some(Value::List(hosts)) = m.get_field_by_name("virtual_hosts").as_deref().cloned() else {
        return Ok(());
    };
    let mut names = BTreeSet::new();
    let mut domains = BTreeSet::new();
    for h in &hosts {
        let Value::Message(h) = h else { continue };
        let name = string_field(h, "name");
        if !names.insert(name.clone()) {
            return Err(fail(path, Problem::DuplicateHostName { name }));
        }
        if let Some(Value::List(ds)) = h.get_field_by_name("domains").as_deref() {
            for d in ds {
                if let Value::String(d) = d
                    && !domains.insert(d.to_ascii_lowercase())
                {
                    return Err(fail(path, Problem::DuplicateDomain { domain: d.clone() }));
                }
            }
        }
    }
    Ok(())
}

const ROUTER: &str = "envoy.extensions.filters.http.router.v3.Router";

/// The type a filter's `typed_config` names (`None`: not a typed config,
/// e.g. a config discovery source).
fn typed_config_type(filter: &DynamicMessage) -> Option<String> {
    match filter.get_field_by_name("typed_config").as_deref() {
        Some(Value::Message(any)) if filter.has_field_by_name("typed_config") => {
            let url = string_field(any, "type_url");
            Some(url.rsplit_once('/').map_or(url.clone(), |(_, n)| n.to_string()))
        }
        _ => None,
    }
}

/// Envoy: the router is terminal and must be the last HTTP filter; a chain
/// ending in a non-terminal filter is refused.
fn router_last(hcm: &DynamicMessage, path: &[String]) -> Result<(), Failure> {
    let Some(Value::List(filters)) = hcm.get_field_by_name("http_filters").as_deref().cloned() else {
        return Ok(());
    };
    let n = filters.len();
    for (i, f) in filters.iter().enumerate() {
        let Value::Message(f) = f else { continue };
        let is_router = typed_config_type(f).as_deref() == Some(ROUTER);
        let last = i + 1 == n;
        if is_router && !last {
            return Err(fail(path, Problem::RouterNotLast { index: i }));
        }
        if last && !is_router && typed_config_type(f).is_some() {
            return Err(fail(path, Problem::LastNotRouter { index: i }));
        }
    }
    Ok(())
}

/// Envoy refuses a listener with two filter chains of the same match.
fn unique_chain_matches(listener: &DynamicMessage, path: &[String]) -> Result<(), Failure> {
    let Some(Value::List(chains)) = listener.get_field_by_name("filter_chains").as_deref().cloned() else {
        return Ok(());
    };
    let mut seen = BTreeSet::new();
    for (i, c) in chains.iter().enumerate() {
        let Value::Message(c) = c else { continue };
        let key = match c.get_field_by_name("filter_chain_match").as_deref() {
            Some(Value::Message(m)) if c.has_field_by_name("filter_chain_match") => m.encode_to_vec(),
            _ => Vec::new(),
        };
        if !seen.insert(key) {
            return Err(fail(path, Problem::DuplicateChainMatch { index: i }));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::route::v3::{
        Route, RouteAction, RouteMatch, route, route_action, route_match,
    };

    use super::*;

    /// A failed check is `Invalid` at the dotted path of the field, with
    /// the rule's own text after it.
    #[test]
    fn a_reply_error_names_the_path() {
        let r = Route {
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                ..Default::default()
            }),
            action: Some(route::Action::Route(RouteAction {
                cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(String::new())),
                ..Default::default()
            })),
            ..Default::default()
        };
        let err = check(&r).err();
        assert_eq!(
            err,
            Some(ReplyError::Invalid {
                path: "route".into(),
                problem: Box::new(Problem::Pgv(super::super::pgv::PgvError::Field {
                    field: "cluster".into(),
                    violation: super::super::pgv::Violation::TooShort {
                        value: String::new(),
                        min: 1
                    },
                })),
            })
        );
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some(r#"route: cluster: "" is shorter than 1 characters"#)
        );
    }
}
