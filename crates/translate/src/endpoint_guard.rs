//! Which endpoint addresses a tenant's EndpointSlice may send traffic to.
//!
//! An EndpointSlice is tenant input, and its addresses become the upstream
//! hosts Envoy connects to: without a check, a route could point the data
//! plane at the control plane (`127.0.0.1:<admin port>` serves the admin
//! API, with every Gateway's configuration) or at a cloud metadata service
//! (`169.254.169.254`). Each address is judged here; a refused one is left
//! out of its cluster (a cluster with no endpoint left answers as any
//! backend without endpoints: Envoy's 503 `no healthy upstream`) and is
//! reported as a warning on its EndpointSlice.
//!
//! Refused, always:
//! - unspecified and "this network" addresses (`0.0.0.0/8`, `::`): a
//!   connection to them reaches the local host;
//! - multicast (`224.0.0.0/4`, `ff00::/8`) and broadcast (`255.255.255.255`);
//! - link-local (`169.254.0.0/16`, where cloud metadata services live, and
//!   `fe80::/10`);
//! - the control plane's own listeners ([`EndpointGuard::reserved`]: the
//!   admin API, the xDS server, STRICT's validator xDS server, a managed
//!   Envoy's admin interface), by address and port. A listener bound to a
//!   specific address is reached only through that address; one bound to
//!   an unspecified address (`0.0.0.0`, `::`) is reached through every
//!   loopback address and every address of the host
//!   ([`EndpointGuard::local_addresses`]; when they are unknown, the port
//!   is refused on every address).
//!
//! Refused on request ([`EndpointGuard::refuse_loopback`]): loopback
//! (`127.0.0.0/8`, `::1`), as the Kubernetes API server refuses loopback
//! endpoints. File mode keeps them legal: the quickstart's backend is on
//! loopback.
//!
//! An IPv6 address that embeds an IPv4 one (`::ffff:a.b.c.d` mapped,
//! `::a.b.c.d` compatible, `64:ff9b::a.b.c.d` NAT64) is judged as that
//! IPv4 address, since that is where a connection to it goes.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use api::Diagnostic;
use api::k8s_openapi::api::core::v1::Service;
use api::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::index::Index;

/// A listener of the control plane that the data plane must not reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserved {
    pub address: SocketAddr,
    /// What listens there, for messages (e.g. "portcullis's admin API").
    pub what: String,
}

/// The endpoint policy of one translation (a [`crate::Settings`] field).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointGuard {
    /// Refuse loopback endpoints too (Kubernetes mode).
    pub refuse_loopback: bool,
    pub reserved: Vec<Reserved>,
    /// The host's own addresses, for reserved listeners bound to an
    /// unspecified address; `None` when unknown.
    pub local_addresses: Option<Vec<IpAddr>>,
}

/// Why an endpoint address is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("an unspecified or \"this network\" address (0.0.0.0/8, ::) reaches the local host")]
    Unspecified,
    #[error("multicast addresses (224.0.0.0/4, ff00::/8) are never backends")]
    Multicast,
    #[error("the broadcast address is never a backend")]
    Broadcast,
    #[error(
        "link-local addresses (169.254.0.0/16, fe80::/10; cloud metadata services live there) are never backends"
    )]
    LinkLocal,
    #[error("loopback endpoints are refused in this mode, as the Kubernetes API server refuses them")]
    Loopback,
    #[error("it is {what} ({address}); the data plane must not reach the control plane")]
    Reserved { what: String, address: SocketAddr },
}

/// The address a connection to `ip` actually goes to: an IPv6 address
/// embedding an IPv4 one is that IPv4 address.
pub fn effective(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    // `::a.b.c.d` (IPv4-compatible), but not `::` and `::1` themselves.
    let compatible = s[..6].iter().all(|&x| x == 0) && (s[6] != 0 || s[7] > 1);
    // `64:ff9b::/96`: the well-known NAT64 prefix (RFC 6052).
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    if compatible || nat64 {
        let [a, b] = s[6].to_be_bytes();
        let [c, d] = s[7].to_be_bytes();
        return IpAddr::V4(Ipv4Addr::new(a, b, c, d));
    }
    ip
}

fn is_loopback(ip: IpAddr) -> bool {
    effective(ip).is_loopback()
}

fn is_unspecified(ip: IpAddr) -> bool {
    match effective(ip) {
        IpAddr::V4(v4) => v4.octets()[0] == 0,
        IpAddr::V6(v6) => v6.is_unspecified(),
    }
}

impl EndpointGuard {
    /// Why the endpoint `ip:port` is refused, or `None` if it may be used.
    pub fn judge(&self, ip: IpAddr, port: u16) -> Option<Refusal> {
        let ip = effective(ip);
        let class = match ip {
            IpAddr::V4(v4) => {
                if v4.octets()[0] == 0 {
                    Some(Refusal::Unspecified)
                } else if v4.is_broadcast() {
                    Some(Refusal::Broadcast)
                } else if v4.is_multicast() {
                    Some(Refusal::Multicast)
                } else if v4.is_link_local() {
                    Some(Refusal::LinkLocal)
                } else {
                    None
                }
            }
            IpAddr::V6(v6) => {
                if v6.is_unspecified() {
                    Some(Refusal::Unspecified)
                } else if v6.is_multicast() {
                    Some(Refusal::Multicast)
                } else if v6.is_unicast_link_local() {
                    Some(Refusal::LinkLocal)
                } else {
                    None
                }
            }
        };
        if class.is_some() {
            return class;
        }
        if let Some(r) = self.reserved.iter().find(|r| self.reaches(r.address, ip, port)) {
            return Some(Refusal::Reserved {
                what: r.what.clone(),
                address: r.address,
            });
        }
        if self.refuse_loopback && ip.is_loopback() {
            return Some(Refusal::Loopback);
        }
        None
    }

    /// Whether a connection to `ip:port` reaches a listener bound to `bound`.
    fn reaches(&self, bound: SocketAddr, ip: IpAddr, port: u16) -> bool {
        if bound.port() != port {
            return false;
        }
        let listener = effective(bound.ip());
        if is_unspecified(listener) {
            // Bound to every address of the host.
            return is_loopback(ip)
                || is_unspecified(ip)
                || match &self.local_addresses {
                    Some(local) => local.iter().any(|&l| effective(l) == ip),
                    None => true,
                };
        }
        // A connection to an unspecified address goes to the local host,
        // so it reaches a loopback-bound listener too.
        listener == ip || (is_unspecified(ip) && listener.is_loopback())
    }
}

/// A warning for every refused address of every EndpointSlice, naming the
/// address, port and why. Only ready endpoints are judged (the others are
/// not used anyway), on every port `backend::endpoints` may use them on:
/// the slice's own and its Service's target ports.
pub fn diagnostics(inputs: &api::Inputs, index: &Index<'_>) -> Vec<Diagnostic> {
    let guard = &index.endpoint_guard;
    let mut out = Vec::new();
    for slice in &inputs.endpoint_slices {
        let es = &slice.object;
        let ns = es.metadata.namespace.as_deref().unwrap_or("default");
        // Made only for a diagnostic: at 10,000 slices, formatting one per
        // slice on every translation showed in profiles.
        let label = || format!("EndpointSlice {ns}/{}", es.metadata.name.as_deref().unwrap_or(""));
        let mut ports: Vec<u16> = es
            .ports
            .iter()
            .flatten()
            .filter_map(|p| p.port)
            .filter_map(|p| u16::try_from(p).ok())
            .collect();
        // Untracked: these diagnostics are made again whenever a Service
        // changed (`incremental/services.rs`).
        let service =
            crate::index::service_of_slice(es).and_then(|(ns, svc)| index.service_untracked(ns, svc));
        // A slice port that matches no Service port by name falls back to
        // the target port: judge those too.
        ports.extend(service.map(target_ports).unwrap_or_default());
        ports.sort_unstable();
        ports.dedup();
        for (i, ep) in es.endpoints.iter().flatten().enumerate() {
            if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            for (j, addr) in ep.addresses.iter().enumerate() {
                let Ok(ip) = addr.parse::<IpAddr>() else {
                    // `backend::endpoints` leaves these out too.
                    out.push(Diagnostic::warning(
                        Some(label()),
                        Some(&slice.source),
                        format!(
                            "endpoints[{i}].addresses[{j}]: endpoint {addr:?} is not used: not an IP address (FQDN endpoints are not supported)"
                        ),
                    ));
                    continue;
                };
                let mut refused: Vec<(Option<u16>, Refusal)> = Vec::new();
                for &port in &ports {
                    if let Some(r) = guard.judge(ip, port) {
                        // Class refusals do not depend on the port.
                        let port = matches!(r, Refusal::Reserved { .. }).then_some(port);
                        if !refused.iter().any(|(p, x)| *p == port && *x == r) {
                            refused.push((port, r));
                        }
                    }
                }
                for (port, why) in refused {
                    let at = match port {
                        Some(p) => format!("{addr} port {p}"),
                        None => addr.clone(),
                    };
                    out.push(Diagnostic::warning(
                        Some(label()),
                        Some(&slice.source),
                        format!("endpoints[{i}].addresses[{j}]: endpoint {at} is not used: {why}"),
                    ));
                }
            }
        }
    }
    out
}

/// The ports a slice without its own port numbers is used on.
fn target_ports(svc: &Service) -> Vec<u16> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|p| match &p.target_port {
            Some(IntOrString::Int(t)) => u16::try_from(*t).ok(),
            None => u16::try_from(p.port).ok(),
            Some(IntOrString::String(_)) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn guard() -> EndpointGuard {
        EndpointGuard {
            refuse_loopback: false,
            reserved: vec![
                Reserved {
                    address: "127.0.0.1:19000".parse().expect("addr"),
                    what: "portcullis's admin API".into(),
                },
                Reserved {
                    address: "0.0.0.0:18000".parse().expect("addr"),
                    what: "portcullis's xDS server".into(),
                },
            ],
            local_addresses: Some(vec![ip("10.1.2.3"), ip("fd00::5")]),
        }
    }

    #[test]
    fn unspecified_multicast_broadcast_and_link_local_are_refused() {
        let g = EndpointGuard::default();
        for (addr, why) in [
            ("0.0.0.0", Refusal::Unspecified),
            ("0.1.2.3", Refusal::Unspecified),
            ("::", Refusal::Unspecified),
            ("224.0.0.1", Refusal::Multicast),
            ("239.255.255.250", Refusal::Multicast),
            ("ff02::1", Refusal::Multicast),
            ("255.255.255.255", Refusal::Broadcast),
            ("169.254.169.254", Refusal::LinkLocal),
            ("169.254.0.1", Refusal::LinkLocal),
            ("fe80::1", Refusal::LinkLocal),
            ("febf::1", Refusal::LinkLocal),
        ] {
            assert_eq!(g.judge(ip(addr), 80), Some(why), "{addr}");
        }
        for addr in [
            "10.0.0.1",
            "192.168.1.1",
            "8.8.8.8",
            "127.0.0.1",
            "::1",
            "fd00::1",
            "2001:db8::1",
            "fec0::1",
        ] {
            assert_eq!(g.judge(ip(addr), 80), None, "{addr}");
        }
    }

    #[test]
    fn ipv4_embedded_in_ipv6_is_judged_as_the_ipv4() {
        let g = EndpointGuard::default();
        for addr in [
            "::ffff:169.254.169.254",
            "::169.254.169.254",
            "64:ff9b::169.254.169.254",
        ] {
            assert_eq!(g.judge(ip(addr), 80), Some(Refusal::LinkLocal), "{addr}");
        }
        assert_eq!(g.judge(ip("::ffff:0.0.0.0"), 80), Some(Refusal::Unspecified));
        assert_eq!(g.judge(ip("::ffff:224.0.0.1"), 80), Some(Refusal::Multicast));
        assert_eq!(
            g.judge(ip("::ffff:255.255.255.255"), 80),
            Some(Refusal::Broadcast)
        );
        let strict = EndpointGuard {
            refuse_loopback: true,
            ..EndpointGuard::default()
        };
        assert_eq!(strict.judge(ip("::ffff:127.0.0.1"), 80), Some(Refusal::Loopback));
        assert_eq!(strict.judge(ip("::127.0.0.1"), 80), Some(Refusal::Loopback));
        // The admin API through a mapped address.
        assert!(matches!(
            guard().judge(ip("::ffff:127.0.0.1"), 19000),
            Some(Refusal::Reserved { .. })
        ));
    }

    #[test]
    fn loopback_is_refused_only_when_asked() {
        assert_eq!(EndpointGuard::default().judge(ip("127.0.0.1"), 8080), None);
        let strict = EndpointGuard {
            refuse_loopback: true,
            ..EndpointGuard::default()
        };
        for addr in ["127.0.0.1", "127.1.2.3", "::1"] {
            assert_eq!(strict.judge(ip(addr), 8080), Some(Refusal::Loopback), "{addr}");
        }
        assert_eq!(strict.judge(ip("10.0.0.1"), 8080), None);
    }

    #[test]
    fn reserved_listeners_by_address_and_port() {
        let g = guard();
        let reserved = |addr: &str, port| matches!(g.judge(ip(addr), port), Some(Refusal::Reserved { .. }));
        // Bound to 127.0.0.1:19000: only that address reaches it.
        assert!(reserved("127.0.0.1", 19000));
        assert!(!reserved("127.0.0.2", 19000));
        assert!(!reserved("::1", 19000));
        assert!(!reserved("127.0.0.1", 19001));
        assert!(!reserved("10.1.2.3", 19000));
        // Bound to 0.0.0.0:18000: every loopback and local address.
        for addr in [
            "127.0.0.1",
            "127.0.0.2",
            "::1",
            "10.1.2.3",
            "fd00::5",
            "::ffff:10.1.2.3",
        ] {
            assert!(reserved(addr, 18000), "{addr}");
        }
        assert!(!reserved("10.9.9.9", 18000));
        assert!(!reserved("127.0.0.1", 18001));
        // Unknown local addresses: the port is refused everywhere.
        let unknown = EndpointGuard {
            local_addresses: None,
            ..guard()
        };
        assert!(matches!(
            unknown.judge(ip("10.9.9.9"), 18000),
            Some(Refusal::Reserved { .. })
        ));
        assert_eq!(unknown.judge(ip("10.9.9.9"), 18001), None);
        // The message names what listens there.
        assert_eq!(
            g.judge(ip("127.0.0.1"), 19000).map(|r| r.to_string()),
            Some(
                "it is portcullis's admin API (127.0.0.1:19000); the data plane must not reach the control plane"
                    .to_string()
            )
        );
    }
}
