//! Hostname rules: validity and the intersection of listener and route
//! hostnames (Gateway API: a route attaches to a listener only where their
//! hostnames overlap; the overlap is what the virtual host serves).

/// `*.example.com` matches any name with one or more labels before
/// `.example.com`, never `example.com` itself.
fn wildcard_covers(wildcard_suffix: &str, name: &str) -> bool {
    name.len() > wildcard_suffix.len() + 1
        && name.ends_with(wildcard_suffix)
        && name.as_bytes()[name.len() - wildcard_suffix.len() - 1] == b'.'
}

/// The hostname that a route hostname and a listener hostname have in
/// common, or `None` when they are disjoint. `listener = None` accepts all.
pub fn intersect(listener: Option<&str>, route: &str) -> Option<String> {
    let Some(listener) = listener else {
        return Some(route.to_string());
    };
    if listener == route {
        return Some(route.to_string());
    }
    match (listener.strip_prefix("*."), route.strip_prefix("*.")) {
        (None, None) => None,
        // Listener exact, route wildcard: the listener's name if covered.
        (None, Some(rs)) => wildcard_covers(rs, listener).then(|| listener.to_string()),
        // Listener wildcard, route exact.
        (Some(ls), None) => wildcard_covers(ls, route).then(|| route.to_string()),
        // Both wildcards: the narrower one.
        (Some(ls), Some(rs)) => {
            if wildcard_covers(ls, rs) {
                Some(route.to_string())
            } else if wildcard_covers(rs, ls) {
                Some(listener.to_string())
            } else {
                None
            }
        }
    }
}

/// The hostnames a route serves on a listener: the intersections of each of
/// its hostnames with the listener's, or the listener's own (or `*`) when the
/// route names none. Empty means the route does not attach.
pub fn effective(listener: Option<&str>, route_hostnames: &[String]) -> Vec<String> {
    if route_hostnames.is_empty() {
        return vec![listener.unwrap_or("*").to_string()];
    }
    let mut out: Vec<String> = route_hostnames
        .iter()
        .filter_map(|h| intersect(listener, h))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// RFC 1123 DNS subdomain, optionally with a leading `*.` label; no IPs.
pub fn is_valid(hostname: &str, allow_wildcard: bool) -> bool {
    let name = match hostname.strip_prefix("*.") {
        Some(rest) if allow_wildcard => rest,
        _ => hostname,
    };
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
        && !name.split('.').all(|l| l.bytes().all(|b| b.is_ascii_digit()))
}

/// The problems of a route's `spec.hostnames`, each naming its field: a
/// hostname the CRD's pattern refuses (a control character such as LF, CR
/// or NUL among them, which Envoy refuses in a virtual host's domains,
/// rejecting the whole route configuration of the listener).
pub fn route_hostname_problems(hostnames: &[String]) -> Vec<String> {
    hostnames
        .iter()
        .enumerate()
        .filter(|(_, h)| !is_valid(h, true))
        .map(|(i, h)| {
            format!(
                "spec.hostnames[{i}]: {h:?} is not a valid hostname (RFC 1123 DNS subdomain in lower case, an optional leading \"*.\" label, no IP address); not programmed"
            )
        })
        .collect()
}

/// A route's valid hostnames, the only ones programmed.
pub fn valid_route_hostnames(hostnames: &[String]) -> Vec<String> {
    hostnames.iter().filter(|h| is_valid(h, true)).cloned().collect()
}

/// Envoy `domains` for one virtual host. Route configurations set
/// `ignore_port_in_host_matching`, so `Host: foo.com:8080` matches too.
pub fn envoy_domains(hostname: &str) -> Vec<String> {
    vec![hostname.to_string()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersections_follow_the_spec_table() {
        // (listener, route, expected)
        let rows: &[(Option<&str>, &str, Option<&str>)] = &[
            (None, "foo.com", Some("foo.com")),
            (Some("foo.com"), "foo.com", Some("foo.com")),
            (Some("foo.com"), "bar.com", None),
            (Some("*.example.com"), "foo.example.com", Some("foo.example.com")),
            (Some("*.example.com"), "a.b.example.com", Some("a.b.example.com")),
            (Some("*.example.com"), "example.com", None),
            (Some("foo.example.com"), "*.example.com", Some("foo.example.com")),
            (Some("example.com"), "*.example.com", None),
            (
                Some("*.example.com"),
                "*.foo.example.com",
                Some("*.foo.example.com"),
            ),
            (
                Some("*.foo.example.com"),
                "*.example.com",
                Some("*.foo.example.com"),
            ),
            (Some("*.example.com"), "*.example.org", None),
            (Some("*.example.com"), "*.example.com", Some("*.example.com")),
            (Some("*.com"), "xexample.com", Some("xexample.com")),
            (Some("*.ample.com"), "example.com", None),
        ];
        for (listener, route, expected) in rows {
            assert_eq!(
                intersect(*listener, route).as_deref(),
                *expected,
                "{listener:?} ∩ {route}"
            );
        }
    }

    #[test]
    fn effective_defaults() {
        assert_eq!(effective(None, &[]), vec!["*"]);
        assert_eq!(effective(Some("a.com"), &[]), vec!["a.com"]);
        assert!(effective(Some("a.com"), &["b.com".into()]).is_empty());
    }

    #[test]
    fn validity() {
        assert!(is_valid("foo.example.com", false));
        assert!(is_valid("*.example.com", true));
        assert!(!is_valid("*.example.com", false));
        assert!(!is_valid("Foo.com", false));
        assert!(!is_valid("1.2.3.4", false));
        assert!(!is_valid("a..b", false));
        assert!(!is_valid("-a.com", false));
        for bad in [
            "a\nb.example.com",
            "a\rb.com",
            "a\0b.com",
            "a b.com",
            "*",
            "*.*.com",
            "a.*.com",
            "",
            "a.com.",
        ] {
            assert!(!is_valid(bad, true), "{bad:?}");
        }
        assert!(!is_valid(&format!("{}.com", "a.".repeat(126)), true), "over 253");
    }

    #[test]
    fn route_hostnames_keep_the_valid_ones_and_name_the_others() {
        let hs: Vec<String> = vec!["a.example.com".into(), "x\ny.example.com".into()];
        assert_eq!(valid_route_hostnames(&hs), vec!["a.example.com".to_string()]);
        let problems = route_hostname_problems(&hs);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("spec.hostnames[1]: "), "{problems:?}");
    }
}
