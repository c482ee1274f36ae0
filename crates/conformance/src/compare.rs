//! The upstream `CompareRoundTrip` (conformance/utils/http/http.go), as the
//! cases' README states it: the first mismatch is returned as text.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::cases::{BackendRequest, Expected, Redirect, Request};
use crate::client::Response;

/// What echo-basic returns as JSON.
#[derive(Debug, Deserialize)]
pub struct Echoed {
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub method: String,
    #[serde(default)]
    pub headers: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub pod: String,
}

fn is_timeout(code: u16) -> bool {
    code == 408 || code == 504
}

fn status_ok(expected: &[u16], actual: u16) -> bool {
    expected.contains(&actual) || (is_timeout(actual) && expected.iter().any(|c| is_timeout(*c)))
}

/// `scheme` is the scheme the request used; `path` the path as sent.
pub fn compare(
    request: &Request,
    sent_path: &str,
    scheme: &str,
    expected: &Expected,
    actual: &Response,
) -> Result<(), String> {
    if !status_ok(&expected.status, actual.status) {
        let body = String::from_utf8_lossy(&actual.body);
        let body: String = body.chars().take(200).collect();
        return Err(format!(
            "expected status {:?}, got {} (body: {body:?})",
            expected.status, actual.status
        ));
    }
    if actual.status == 200 || actual.status == 204 {
        backend(request, sent_path, expected, actual)?;
        for (name, want) in &expected.response_headers {
            match actual.header(name) {
                Some(got) if &got == want => {}
                Some(got) => return Err(format!("response header {name}: expected {want:?}, got {got:?}")),
                None => return Err(format!("response header {name}: expected {want:?}, absent")),
            }
        }
        for name in &expected.response_absent_headers {
            if let Some(got) = actual.header(name) {
                return Err(format!("response header {name} should be absent, got {got:?}"));
            }
        }
    }
    if (300..=308).contains(&actual.status)
        && let Some(redirect) = &expected.redirect
    {
        location(redirect, sent_path, scheme, actual)?;
    }
    Ok(())
}

fn backend(request: &Request, sent_path: &str, expected: &Expected, actual: &Response) -> Result<(), String> {
    let echoed: Echoed = serde_json::from_slice(&actual.body).map_err(|e| {
        format!(
            "response is not the echo backend's JSON ({e}): {:?}",
            String::from_utf8_lossy(&actual.body)
                .chars()
                .take(200)
                .collect::<String>()
        )
    })?;
    let want = match &expected.backend_request {
        Some(b) => b.clone(),
        None => BackendRequest {
            host: request.host.clone(),
            path: sent_path.to_string(),
            method: request.method.clone(),
            headers: Some(request.headers.clone()),
            absent_headers: Vec::new(),
        },
    };
    let want_method = if want.method.is_empty() {
        "GET"
    } else {
        want.method.as_str()
    };
    if !want.host.is_empty() && want.host != echoed.host {
        return Err(format!(
            "backend host: expected {:?}, got {:?}",
            want.host, echoed.host
        ));
    }
    if want.path != echoed.path {
        return Err(format!(
            "backend path: expected {:?}, got {:?}",
            want.path, echoed.path
        ));
    }
    if want_method != echoed.method {
        return Err(format!(
            "backend method: expected {want_method:?}, got {:?}",
            echoed.method
        ));
    }
    if echoed.namespace != expected.namespace {
        return Err(format!(
            "backend namespace: expected {:?}, got {:?}",
            expected.namespace, echoed.namespace
        ));
    }
    let pod_prefix = expected.backend.as_deref().unwrap_or("");
    if !echoed.pod.starts_with(pod_prefix) {
        return Err(format!(
            "backend pod: expected {pod_prefix}-*, got {:?}",
            echoed.pod
        ));
    }
    let lower: BTreeMap<String, String> = echoed
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.join(",")))
        .collect();
    for (name, value) in want.headers.iter().flatten() {
        match lower.get(&name.to_ascii_lowercase()) {
            Some(got) if got == value => {}
            Some(got) => return Err(format!("backend header {name}: expected {value:?}, got {got:?}")),
            None => return Err(format!("backend header {name}: expected {value:?}, absent")),
        }
    }
    for name in &want.absent_headers {
        if let Some(got) = lower.get(&name.to_ascii_lowercase()) {
            return Err(format!("backend header {name} should be absent, got {got:?}"));
        }
    }
    Ok(())
}

/// Splits an absolute `Location` into (scheme, host, port, path).
fn parse_location(location: &str) -> Option<(String, String, String, String)> {
    let (scheme, rest) = location.split_once("://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (h, p),
        _ => (authority, ""),
    };
    // Go's url.Parse keeps only the path in URL.Path.
    let path = path.split(['?', '#']).next().unwrap_or("");
    Some((
        scheme.to_string(),
        host.to_string(),
        port.to_string(),
        path.to_string(),
    ))
}

fn location(want: &Redirect, sent_path: &str, scheme: &str, actual: &Response) -> Result<(), String> {
    let loc = actual
        .header("location")
        .ok_or_else(|| format!("status {} without a Location header", actual.status))?;
    let (got_scheme, got_host, got_port, got_path) =
        parse_location(&loc).ok_or_else(|| format!("Location {loc:?} is not an absolute URL"))?;
    let want_scheme = if want.scheme.is_empty() {
        scheme
    } else {
        want.scheme.as_str()
    };
    if got_scheme != want_scheme {
        return Err(format!(
            "redirect scheme: expected {want_scheme:?}, got {got_scheme:?} ({loc})"
        ));
    }
    if !want.host.is_empty() && got_host != want.host {
        return Err(format!(
            "redirect host: expected {:?}, got {got_host:?} ({loc})",
            want.host
        ));
    }
    let request_path = sent_path.split('?').next().unwrap_or(sent_path);
    let want_path = if want.path.is_empty() {
        request_path
    } else {
        want.path.as_str()
    };
    if got_path != want_path {
        return Err(format!(
            "redirect path: expected {want_path:?}, got {got_path:?} ({loc})"
        ));
    }
    if want.port.is_empty() {
        let default = if want_scheme == "https" { "443" } else { "80" };
        if !got_port.is_empty() && got_port != default {
            return Err(format!(
                "redirect port: expected none or {default}, got {got_port:?} ({loc})"
            ));
        }
    } else if got_port != want.port {
        return Err(format!(
            "redirect port: expected {:?}, got {got_port:?} ({loc})",
            want.port
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_location;

    #[test]
    fn locations() {
        assert_eq!(
            parse_location("https://example.org:8443/a?b=c"),
            Some(("https".into(), "example.org".into(), "8443".into(), "/a".into()))
        );
        assert_eq!(
            parse_location("http://example.org"),
            Some(("http".into(), "example.org".into(), "".into(), "".into()))
        );
        assert_eq!(parse_location("/relative"), None);
    }
}
