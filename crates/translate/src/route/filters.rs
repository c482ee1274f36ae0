//! Gateway API filters → Envoy route fields: header modifiers, redirects,
//! URL rewrites, mirrors.

use api::gateway_api::experimental::httproutes::{
    HttpRouteRulesFilters, HttpRouteRulesFiltersRequestRedirect,
    HttpRouteRulesFiltersRequestRedirectPathType, HttpRouteRulesFiltersRequestRedirectScheme,
    HttpRouteRulesFiltersUrlRewrite, HttpRouteRulesFiltersUrlRewritePathType,
};
use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption, header_value_option};
use envoy_types::pb::envoy::config::route::v3::{RedirectAction, redirect_action};
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatchAndSubstitute;

use crate::envoy::format::FormatError;
use crate::error::RuleError;
use crate::listener::Protocol;
use crate::route::matches::regex_matcher;

/// RFC 7230 token characters.
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Header mutations of one direction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HeaderMods {
    pub add: Vec<HeaderValueOption>,
    pub remove: Vec<String>,
}

/// Envoy reads header values as format strings; Gateway API values are
/// literal, so `%` must be escaped or Envoy would reject or expand it.
fn literal(value: &str) -> String {
    value.replace('%', "%%")
}

/// Envoy's `HeaderValue` caps key and value at 16 KiB (a longer one is a
/// NACK).
pub const MAX_HEADER_BYTES: usize = 16384;

/// Envoy's limit on `request_headers_to_add` and `response_headers_to_add`
/// of one route or one weighted cluster (`max_items: 1000`; one more is a
/// NACK of the whole route configuration). Removals are not limited.
pub const MAX_HEADER_ADDITIONS: usize = 1000;

/// Fails when one direction's additions exceed [`MAX_HEADER_ADDITIONS`].
pub fn check_additions(mods: &HeaderMods, field: &str, what: &str) -> Result<(), RuleError> {
    if mods.add.len() > MAX_HEADER_ADDITIONS {
        return Err(RuleError::structural(
            field,
            format!(
                "{} {what} header additions (set and add) exceed Envoy's limit of {MAX_HEADER_ADDITIONS} per route",
                mods.add.len()
            ),
        ));
    }
    Ok(())
}

/// Why a header name or value cannot be set. The caller adds the field
/// (`RuleError::structural`, or the extension check's path).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("{name:?} is not a valid header name")]
    InvalidName { name: String },
    #[error("header name of {len} bytes is longer than Envoy's limit of {MAX_HEADER_BYTES}")]
    NameTooLong { len: usize },
    #[error("the Host header cannot be modified by a header filter")]
    Host,
    #[error("header values cannot contain CR, LF or NUL")]
    ControlCharacter,
    #[error(
        "header value of {len} bytes (with `%` escaped) is longer than Envoy's limit of {MAX_HEADER_BYTES}"
    )]
    ValueTooLong { len: usize },
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A format error may quote a piece of the value; a credential's
    /// value never reaches status or diagnostics (`output::redact`), so
    /// this one carries no source.
    #[error("not a valid Envoy format string (the error is not shown: the header carries a credential)")]
    FormatHidden,
}

pub(crate) fn check_name(name: &str) -> Result<(), HeaderError> {
    if !is_header_name(name) {
        return Err(HeaderError::InvalidName { name: name.into() });
    }
    if name.len() > MAX_HEADER_BYTES {
        return Err(HeaderError::NameTooLong { len: name.len() });
    }
    // Envoy refuses any mutation of `host` (and of pseudo-headers, which
    // the name check already excludes), on requests and responses alike.
    if name.eq_ignore_ascii_case("host") {
        return Err(HeaderError::Host);
    }
    Ok(())
}

pub(crate) fn check_value(value: &str) -> Result<(), HeaderError> {
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(HeaderError::ControlCharacter);
    }
    let escaped = literal(value).len();
    if escaped > MAX_HEADER_BYTES {
        return Err(HeaderError::ValueTooLong { len: escaped });
    }
    Ok(())
}

/// Collects one header modifier (set/add/remove lists share a shape in
/// every generated variant, so they come in as (name, value) pairs).
pub fn header_modifier<'a>(
    set: impl IntoIterator<Item = (&'a str, &'a str)>,
    add: impl IntoIterator<Item = (&'a str, &'a str)>,
    remove: &[String],
    field: &str,
    into: &mut HeaderMods,
) -> Result<(), RuleError> {
    modifier(set, add, remove, field, into, false)
}

/// Like [`header_modifier`], but values are Envoy format strings
/// (`%REQ(x)%`), checked and passed through unescaped.
pub fn header_modifier_formatted<'a>(
    set: impl IntoIterator<Item = (&'a str, &'a str)>,
    add: impl IntoIterator<Item = (&'a str, &'a str)>,
    remove: &[String],
    field: &str,
    into: &mut HeaderMods,
) -> Result<(), RuleError> {
    modifier(set, add, remove, field, into, true)
}

fn formatted_option(
    name: &str,
    value: &str,
    action: header_value_option::HeaderAppendAction,
) -> HeaderValueOption {
    let mut o = option(name, "", action);
    if let Some(h) = o.header.as_mut() {
        h.value = value.to_string();
    }
    o
}

fn modifier<'a>(
    set: impl IntoIterator<Item = (&'a str, &'a str)>,
    add: impl IntoIterator<Item = (&'a str, &'a str)>,
    remove: &[String],
    field: &str,
    into: &mut HeaderMods,
    formatted: bool,
) -> Result<(), RuleError> {
    // A format error may quote a piece of the value (`%s3cr3t`); a
    // credential's value never reaches status or diagnostics (see
    // `output::redact`).
    let check_value = |name: &str, v: &str| {
        if formatted {
            check_value(v)?;
            crate::envoy::format::check(v).map_err(|e| {
                if crate::output::redact::is_credential_header(name) {
                    HeaderError::FormatHidden
                } else {
                    HeaderError::Format(e)
                }
            })
        } else {
            check_value(v)
        }
    };
    let option = |name: &str, value: &str, action| {
        if formatted {
            formatted_option(name, value, action)
        } else {
            option(name, value, action)
        }
    };
    for (i, (name, value)) in set.into_iter().enumerate() {
        check_name(name)
            .map_err(|e| RuleError::structural(format!("{field}.set[{i}].name"), e.to_string()))?;
        check_value(name, value)
            .map_err(|e| RuleError::structural(format!("{field}.set[{i}].value"), e.to_string()))?;
        into.add.push(option(
            name,
            value,
            header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd,
        ));
    }
    for (i, (name, value)) in add.into_iter().enumerate() {
        check_name(name)
            .map_err(|e| RuleError::structural(format!("{field}.add[{i}].name"), e.to_string()))?;
        check_value(name, value)
            .map_err(|e| RuleError::structural(format!("{field}.add[{i}].value"), e.to_string()))?;
        into.add.push(option(
            name,
            value,
            header_value_option::HeaderAppendAction::AppendIfExistsOrAdd,
        ));
    }
    for (i, name) in remove.iter().enumerate() {
        check_name(name).map_err(|e| RuleError::structural(format!("{field}.remove[{i}]"), e.to_string()))?;
        into.remove.push(name.to_ascii_lowercase());
    }
    Ok(())
}

fn option(name: &str, value: &str, action: header_value_option::HeaderAppendAction) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: name.to_ascii_lowercase(),
            value: literal(value),
            ..Default::default()
        }),
        append_action: action as i32,
        ..Default::default()
    }
}

/// The path the rule matched on, needed by prefix rewrites.
pub enum MatchedPath<'a> {
    Prefix(&'a str),
    Other,
}

fn well_known_port(scheme: &str) -> i32 {
    if scheme == "https" { 443 } else { 80 }
}

pub fn redirect(
    f: &HttpRouteRulesFiltersRequestRedirect,
    field: &str,
    listener_port: i32,
    listener_protocol: Protocol,
    matched: &MatchedPath<'_>,
) -> Result<RedirectAction, RuleError> {
    let mut r = RedirectAction::default();
    let scheme = f.scheme.as_ref().map(|s| match s {
        HttpRouteRulesFiltersRequestRedirectScheme::Http => "http",
        HttpRouteRulesFiltersRequestRedirectScheme::Https => "https",
    });
    if let Some(s) = scheme {
        r.scheme_rewrite_specifier = Some(redirect_action::SchemeRewriteSpecifier::SchemeRedirect(s.into()));
    }
    if let Some(h) = &f.hostname {
        if !crate::hostname::is_valid(h, false) {
            return Err(RuleError::structural(
                format!("{field}.hostname"),
                format!("{h:?} is not a valid hostname"),
            ));
        }
        r.host_redirect = h.clone();
    }
    // Spec: no port given → the scheme's well-known port when a scheme is
    // given, else the listener's port; a well-known port is left out of
    // the Location header.
    let effective_scheme = scheme.unwrap_or(listener_protocol.scheme());
    let port = f.port.unwrap_or(if scheme.is_some() {
        well_known_port(effective_scheme)
    } else {
        listener_port
    });
    if !(1..=65535).contains(&port) {
        return Err(RuleError::structural(
            format!("{field}.port"),
            format!("{port} is not a valid port"),
        ));
    }
    r.port_redirect = if port == well_known_port(effective_scheme) {
        0
    } else {
        port.unsigned_abs()
    };
    r.response_code = match f.status_code.unwrap_or(302) {
        301 => redirect_action::RedirectResponseCode::MovedPermanently,
        302 => redirect_action::RedirectResponseCode::Found,
        303 => redirect_action::RedirectResponseCode::SeeOther,
        307 => redirect_action::RedirectResponseCode::TemporaryRedirect,
        308 => redirect_action::RedirectResponseCode::PermanentRedirect,
        other => {
            return Err(RuleError::structural(
                format!("{field}.statusCode"),
                format!("{other} is not a redirect status (301, 302, 303, 307, 308)"),
            ));
        }
    } as i32;
    if let Some(p) = &f.path {
        let path_field = format!("{field}.path");
        r.path_rewrite_specifier = Some(match p.r#type {
            HttpRouteRulesFiltersRequestRedirectPathType::ReplaceFullPath => {
                let v = p.replace_full_path.clone().ok_or_else(|| {
                    RuleError::structural(
                        format!("{path_field}.replaceFullPath"),
                        "required for type ReplaceFullPath",
                    )
                })?;
                check_path(&v, &format!("{path_field}.replaceFullPath"))?;
                redirect_action::PathRewriteSpecifier::PathRedirect(v)
            }
            HttpRouteRulesFiltersRequestRedirectPathType::ReplacePrefixMatch => {
                let v = p.replace_prefix_match.clone().ok_or_else(|| {
                    RuleError::structural(
                        format!("{path_field}.replacePrefixMatch"),
                        "required for type ReplacePrefixMatch",
                    )
                })?;
                check_prefix_replacement(&v, &format!("{path_field}.replacePrefixMatch"))?;
                match prefix_rewrite(&v, matched, &path_field)? {
                    PrefixRewrite::Prefix(p) => redirect_action::PathRewriteSpecifier::PrefixRewrite(p),
                    PrefixRewrite::Regex(r) => redirect_action::PathRewriteSpecifier::RegexRewrite(r),
                }
            }
        });
    }
    Ok(r)
}

fn check_path(v: &str, field: &str) -> Result<(), RuleError> {
    if !v.starts_with('/') || v.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(RuleError::structural(field, format!("{v:?} is not a valid path")));
    }
    Ok(())
}

/// Spec: an empty `replacePrefixMatch` is allowed and means `/` (the
/// HTTPPathModifier table: `/foo/bar`, prefix `/foo`, `""` → `/bar`).
fn check_prefix_replacement(v: &str, field: &str) -> Result<(), RuleError> {
    if v.is_empty() {
        Ok(())
    } else {
        check_path(v, field)
    }
}

#[derive(Clone)]
pub enum PrefixRewrite {
    Prefix(String),
    Regex(RegexMatchAndSubstitute),
}

/// ReplacePrefixMatch: replaces the matched prefix and keeps what follows
/// it as its own path segment (`/foo` → `/bar` turns `/foo/x` into
/// `/bar/x`; `/foo` → `/` turns it into `/x`, not `//x`). Trailing slashes
/// of the prefix and the replacement are ignored (the spec's table):
/// `route::matches` programs PathPrefix `/foo/` as Envoy's
/// `path_separated_prefix` `/foo`, the prefix Envoy's `prefix_rewrite`
/// replaces, so `/foo/bar` with `/foo/` → `/xyz` becomes `/xyz/bar`.
pub fn prefix_rewrite(
    replacement: &str,
    matched: &MatchedPath<'_>,
    field: &str,
) -> Result<PrefixRewrite, RuleError> {
    let MatchedPath::Prefix(prefix) = matched else {
        return Err(RuleError::semantic(
            field,
            "ReplacePrefixMatch requires a PathPrefix match",
        ));
    };
    let prefix = prefix.trim_end_matches('/');
    let replacement_trimmed = replacement.trim_end_matches('/');
    if prefix.is_empty() || replacement_trimmed.is_empty() {
        // Prefix `/` or replacement `/`: rewrite with a regex so the
        // segment boundary is kept without doubling slashes.
        let pattern = format!("^{}(/|$)?", crate::route::model::escape_regex(prefix));
        let substitution = if replacement_trimmed.is_empty() {
            "/".to_string()
        } else {
            format!("{replacement_trimmed}/")
        };
        return Ok(PrefixRewrite::Regex(RegexMatchAndSubstitute {
            pattern: Some(regex_matcher(&pattern)),
            substitution,
        }));
    }
    Ok(PrefixRewrite::Prefix(replacement_trimmed.to_string()))
}

/// URLRewrite → (host rewrite, path rewrite).
pub fn url_rewrite(
    f: &HttpRouteRulesFiltersUrlRewrite,
    field: &str,
    matched: &MatchedPath<'_>,
) -> Result<(Option<String>, Option<PrefixRewrite>), RuleError> {
    let host = match &f.hostname {
        Some(h) if !crate::hostname::is_valid(h, false) => {
            return Err(RuleError::structural(
                format!("{field}.hostname"),
                format!("{h:?} is not a valid hostname"),
            ));
        }
        h => h.clone(),
    };
    let path = match &f.path {
        None => None,
        Some(p) => Some(match p.r#type {
            HttpRouteRulesFiltersUrlRewritePathType::ReplaceFullPath => {
                let v = p.replace_full_path.clone().ok_or_else(|| {
                    RuleError::structural(
                        format!("{field}.path.replaceFullPath"),
                        "required for type ReplaceFullPath",
                    )
                })?;
                check_path(&v, &format!("{field}.path.replaceFullPath"))?;
                PrefixRewrite::Regex(RegexMatchAndSubstitute {
                    pattern: Some(regex_matcher("^/.*$")),
                    substitution: v.replace('\\', "\\\\"),
                })
            }
            HttpRouteRulesFiltersUrlRewritePathType::ReplacePrefixMatch => {
                let v = p.replace_prefix_match.clone().ok_or_else(|| {
                    RuleError::structural(
                        format!("{field}.path.replacePrefixMatch"),
                        "required for type ReplacePrefixMatch",
                    )
                })?;
                check_prefix_replacement(&v, &format!("{field}.path.replacePrefixMatch"))?;
                prefix_rewrite(&v, matched, &format!("{field}.path"))?
            }
        }),
    };
    Ok((host, path))
}

/// Spec: a filter type may appear once per rule, except RequestMirror and
/// ExtensionRef; RequestRedirect and URLRewrite exclude each other.
pub fn check_combination(filters: &[HttpRouteRulesFilters], field: &str) -> Result<(), RuleError> {
    use api::gateway_api::experimental::httproutes::HttpRouteRulesFiltersType as T;
    let mut seen: Vec<&T> = Vec::with_capacity(filters.len());
    for (i, f) in filters.iter().enumerate() {
        if matches!(f.r#type, T::RequestMirror | T::ExtensionRef) {
            continue;
        }
        if seen.contains(&&f.r#type) {
            return Err(RuleError::semantic(
                format!("{field}[{i}]"),
                format!("filter type {:?} appears more than once", f.r#type),
            ));
        }
        seen.push(&f.r#type);
    }
    if seen.contains(&&T::RequestRedirect) && seen.contains(&&T::UrlRewrite) {
        return Err(RuleError::semantic(
            field,
            "RequestRedirect and URLRewrite cannot be used together",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod credential_tests {
    use super::*;

    #[test]
    fn header_errors_name_the_variant_and_keep_their_text() {
        assert_eq!(check_name("Host"), Err(HeaderError::Host));
        assert_eq!(
            HeaderError::Host.to_string(),
            "the Host header cannot be modified by a header filter"
        );
        assert_eq!(
            check_name("a b"),
            Err(HeaderError::InvalidName { name: "a b".into() })
        );
        assert_eq!(
            check_name("a b").map_err(|e| e.to_string()),
            Err(r#""a b" is not a valid header name"#.to_string())
        );
        assert_eq!(check_value("a\nb"), Err(HeaderError::ControlCharacter));
        let mut mods = HeaderMods::default();
        let err = header_modifier_formatted([("authorization", "%NOPE%")], [], &[], "f", &mut mods);
        assert_eq!(
            err,
            Err(RuleError::structural(
                "f.set[0].value",
                "not a valid Envoy format string (the error is not shown: the header carries a credential)"
            ))
        );
        let err = header_modifier_formatted([("x-a", "%NOPE%")], [], &[], "f", &mut mods);
        assert_eq!(
            err,
            Err(RuleError::structural(
                "f.set[0].value",
                "unknown format command %NOPE%"
            ))
        );
    }

    #[test]
    fn a_format_error_in_a_credential_header_does_not_quote_the_value() {
        let mut mods = HeaderMods::default();
        let err = header_modifier_formatted(
            [("authorization", "Bearer %S3CR3T%")],
            [],
            &[],
            "spec.transformation.request",
            &mut mods,
        )
        .expect_err("unknown command");
        let shown = format!("{err:?}");
        assert!(!shown.contains("S3CR3T"), "{shown}");
        assert!(shown.contains("set[0].value"), "{shown}");
        // Other headers keep the precise message.
        let err = header_modifier_formatted([("x-env", "%PR0D%")], [], &[], "f", &mut mods)
            .expect_err("unknown command");
        assert!(format!("{err:?}").contains("PR0D"), "{err:?}");
    }
}
