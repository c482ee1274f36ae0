//! STRICT verdicts on HTTPProxy routes: a route the real Envoy rejected
//! (and STRICT replaced with its 500) is an error on the proxy that holds
//! it, in Contour's status shape, like every other route that cannot be
//! programmed (`routes.rs`, reason `RouteNotProgrammable`). Gateway API
//! routes get theirs in `replacement/strict_report.rs`; the Envoy route
//! names tell the two apart (`httpproxy/<ns>/<name>/routes/<i>`, see
//! `routes::entry_route`).

use super::status::Statuses;
use super::{ProxyError, ProxyId, reason, type_};
use crate::strict::GatewayFindings;

/// Moves the rejected HTTPProxy routes out of `findings` into the holding
/// proxies' status; the rest stays for the Gateway API side.
pub fn absorb(findings: &mut GatewayFindings, statuses: &mut Statuses) {
    findings.rejected_routes.retain(|r| {
        let Some((holder, index)) = parse(&r.route_name) else {
            return true;
        };
        statuses.error(
            &holder,
            ProxyError::structural(
                type_::ROUTE_ERROR,
                reason::ROUTE_NOT_PROGRAMMABLE,
                format!("spec.routes[{index}]"),
                format!(
                    "rejected by Envoy: {}; the route answers 500 for what it matches",
                    r.message
                ),
            ),
        );
        false
    });
}

/// `httpproxy/<ns>/<name>/routes/<index>` → the holder and the index.
/// 502s for missing includes and fences are direct responses Envoy never
/// rejects on their own; they are not parsed.
fn parse(route_name: &str) -> Option<(ProxyId, usize)> {
    let mut parts = route_name.split('/');
    (parts.next()? == "httpproxy").then_some(())?;
    let namespace = parts.next()?;
    let name = parts.next()?;
    (parts.next()? == "routes").then_some(())?;
    let index = parts.next()?.parse().ok()?;
    parts
        .next()
        .is_none()
        .then(|| (ProxyId::new(namespace, name), index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_route_names_only() {
        assert_eq!(
            parse("httpproxy/app/child/routes/3"),
            Some((ProxyId::new("app", "child"), 3))
        );
        assert_eq!(parse("httpproxy/app/child/include/0"), None);
        assert_eq!(parse("httpproxy/app/child/fenced"), None);
        assert_eq!(parse("httproute/app/r/rule/0"), None);
        assert_eq!(parse("httpproxy/app/child/routes/x"), None);
    }
}
