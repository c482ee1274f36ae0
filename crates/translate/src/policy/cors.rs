//! `cors` → Envoy's CORS filter, per route.
//!
//! Origins are exact (`https://app.example`), `*`, or with one leading
//! wildcard label (`https://*.example.com`, matched as a regex that allows
//! any one-or-more labels there, as Envoy Gateway does).

use api::policy::Cors;
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy;
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::BoolValue;

use super::PolicyError;
use crate::route::filters::is_header_name;
use crate::route::matches::regex_matcher;
use crate::route::model::escape_regex;

const METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

pub fn compile(c: &Cors, field: &str) -> Result<CorsPolicy, PolicyError> {
    if c.allow_origins.is_empty() {
        return Err(PolicyError::structural(
            format!("{field}.allowOrigins"),
            "at least one origin is required",
        ));
    }
    let mut matchers = Vec::new();
    for (i, o) in c.allow_origins.iter().enumerate() {
        let f = format!("{field}.allowOrigins[{i}]");
        matchers.push(origin(o).map_err(|e| PolicyError::structural(f, e.to_string()))?);
    }
    for (i, m) in c.allow_methods.iter().enumerate() {
        if m != "*" && !METHODS.contains(&m.as_str()) {
            return Err(PolicyError::structural(
                format!("{field}.allowMethods[{i}]"),
                format!("{m:?} is not an HTTP method (one of {})", METHODS.join(", ")),
            ));
        }
    }
    for (list, name) in [
        (&c.allow_headers, "allowHeaders"),
        (&c.expose_headers, "exposeHeaders"),
    ] {
        for (i, h) in list.iter().enumerate() {
            if h != "*" && !is_header_name(h) {
                return Err(PolicyError::structural(
                    format!("{field}.{name}[{i}]"),
                    format!("{h:?} is not a valid header name"),
                ));
            }
        }
    }
    let max_age = match c.max_age {
        Some(a) if a < 0 => {
            return Err(PolicyError::structural(
                format!("{field}.maxAge"),
                "must not be negative",
            ));
        }
        Some(a) => a.to_string(),
        None => String::new(),
    };
    if c.allow_credentials == Some(true) && c.allow_origins.iter().any(|o| o == "*") {
        return Err(PolicyError::semantic(
            format!("{field}.allowCredentials"),
            "browsers refuse credentials with a wildcard origin; list the origins instead",
        ));
    }
    Ok(CorsPolicy {
        allow_origin_string_match: matchers,
        allow_methods: c.allow_methods.join(","),
        allow_headers: c.allow_headers.join(","),
        expose_headers: c.expose_headers.join(","),
        max_age,
        allow_credentials: c.allow_credentials.map(|value| BoolValue { value }),
        ..Default::default()
    })
}

/// Why an `allowOrigins` entry cannot be matched; `origin` is the entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum OriginError {
    #[error("{origin:?} is not an origin (scheme://host[:port])")]
    NotAnOrigin { origin: String },
    #[error("{origin:?}: the scheme must be http or https")]
    Scheme { origin: String },
    #[error("{origin:?}: invalid port")]
    Port { origin: String },
    #[error("{origin:?}: invalid host")]
    Host { origin: String },
    #[error("{origin:?}: the regex that matches this wildcard origin: {error}")]
    Regex {
        origin: String,
        #[source]
        error: crate::envoy::regex::RegexError,
    },
}

fn origin(o: &str) -> Result<StringMatcher, OriginError> {
    let origin = || o.to_string();
    if o == "*" {
        return Ok(StringMatcher {
            match_pattern: Some(string_matcher::MatchPattern::SafeRegex(regex_matcher(".*"))),
            ..Default::default()
        });
    }
    let (scheme, rest) = o
        .split_once("://")
        .ok_or_else(|| OriginError::NotAnOrigin { origin: origin() })?;
    if !matches!(scheme, "http" | "https") {
        return Err(OriginError::Scheme { origin: origin() });
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) => {
            if p.parse::<u16>().is_err() {
                return Err(OriginError::Port { origin: origin() });
            }
            (h, Some(p))
        }
        None => (rest, None),
    };
    let labels_ok = |h: &str| {
        !h.is_empty()
            && h.split('.')
                .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    if let Some(base) = host.strip_prefix("*.") {
        if !labels_ok(base) {
            return Err(OriginError::Host { origin: origin() });
        }
        let port = port.map(|p| format!(":{p}")).unwrap_or_default();
        let re = format!(
            "{}://[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*\\.{}{}",
            scheme,
            escape_regex(base),
            escape_regex(&port)
        );
        // Each literal character is an RE2 instruction: a long base domain
        // exceeds Envoy's program-size limit (a NACK if not caught here).
        crate::envoy::regex::check(&re).map_err(|error| OriginError::Regex {
            origin: origin(),
            error,
        })?;
        return Ok(StringMatcher {
            match_pattern: Some(string_matcher::MatchPattern::SafeRegex(regex_matcher(&re))),
            ..Default::default()
        });
    }
    if !labels_ok(host) {
        return Err(OriginError::Host { origin: origin() });
    }
    Ok(StringMatcher {
        match_pattern: Some(string_matcher::MatchPattern::Exact(o.to_string())),
        ignore_case: true,
    })
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn origin_errors_name_the_variant_and_the_origin() {
        let err = origin("ftp://a.example").err();
        assert_eq!(
            err,
            Some(OriginError::Scheme {
                origin: "ftp://a.example".into()
            })
        );
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some(r#""ftp://a.example": the scheme must be http or https"#)
        );
        assert_eq!(
            origin("a.example").err(),
            Some(OriginError::NotAnOrigin {
                origin: "a.example".into()
            })
        );
        assert_eq!(
            origin("https://a.example:x").err(),
            Some(OriginError::Port {
                origin: "https://a.example:x".into()
            })
        );
    }
}
