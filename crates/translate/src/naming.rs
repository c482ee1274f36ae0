//! Names of generated Envoy resources (clusters, listeners, route
//! configurations, SDS secrets, filter names) and of files derived from
//! them, composed from user strings (namespaces, names, listener names).
//!
//! Two different objects must never get one name: a cluster name shared by
//! Service `a`/`b/c` and Service `c` of namespace `a/b` (both `a/b/c/80`)
//! would let a route in `a` reach another namespace's endpoints without a
//! ReferenceGrant, a shared SDS name another Gateway's key. The loader
//! refuses names Kubernetes would refuse, but names are made injective here
//! regardless: each component is escaped (`%` as `%25`, `/` as `%2F`) and
//! the components are joined with `/`, so splitting a name on `/` and
//! unescaping gives back exactly the components. Names made of valid
//! Kubernetes names (DNS labels and subdomains, port numbers) contain
//! neither character and read as before (`infra/gw/80`).

use std::borrow::Cow;

/// One component, escaped so that it contains no `/`.
pub fn escape(component: &str) -> Cow<'_, str> {
    if !component.contains(['%', '/']) {
        return Cow::Borrowed(component);
    }
    let mut out = String::with_capacity(component.len() + 8);
    for c in component.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The components, escaped and joined with `/`. Injective over sequences of
/// at least one component.
pub fn compose(components: &[&str]) -> String {
    let mut out = String::with_capacity(components.iter().map(|c| c.len() + 1).sum());
    for (i, component) in components.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(&escape(component));
    }
    out
}

/// The cluster of port `port` of Service `namespace/name` (`/h2c` when
/// spoken to in HTTP/2).
pub fn cluster(namespace: &str, name: &str, port: i32, http2: bool) -> String {
    let port = port.to_string();
    if http2 {
        compose(&[namespace, name, &port, "h2c"])
    } else {
        compose(&[namespace, name, &port])
    }
}

/// A Gateway's key (`namespace/name`): its node id and output key.
pub fn gateway(namespace: &str, name: &str) -> String {
    compose(&[namespace, name])
}

/// The listener of a Gateway's port (shared by the Gateway listeners on
/// that port).
pub fn listener(namespace: &str, gateway: &str, port: i32) -> String {
    compose(&[namespace, gateway, &port.to_string()])
}

/// The route configuration of a Gateway's port, or of one of its HTTPS
/// listeners (`listener`, by name).
pub fn route_config(namespace: &str, gateway: &str, port: i32, listener: Option<&str>) -> String {
    let port = port.to_string();
    match listener {
        Some(l) => compose(&[namespace, gateway, &port, l]),
        None => compose(&[namespace, gateway, &port]),
    }
}

/// The SDS name of Secret `namespace/name`.
pub fn secret(namespace: &str, name: &str) -> String {
    compose(&[namespace, name])
}

/// A file name for `name` (e.g. a Gateway key): no `/`, never `.` or `..`,
/// and injective: `_` stands for `/` (so `infra/gw` stays `infra_gw`), and
/// `%` and `_` themselves are escaped (`%25`, `%5F`), as is a leading `.`
/// (`%2E`, so no file is hidden or a directory link).
pub fn file_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    for (i, c) in name.chars().enumerate() {
        match c {
            '%' => out.push_str("%25"),
            '_' => out.push_str("%5F"),
            '/' => out.push('_'),
            '.' if i == 0 => out.push_str("%2E"),
            // NUL cannot be in a path.
            '\0' => out.push_str("%00"),
            c => out.push(c),
        }
    }
    if out.is_empty() {
        out.push('%');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Inverse of [`compose`], to prove it injective.
    fn decompose(name: &str) -> Vec<String> {
        name.split('/')
            .map(|c| c.replace("%2F", "/").replace("%25", "%"))
            .collect()
    }

    /// Strings built to collide: separators, escapes, partial escapes.
    const TRICKY: &[&str] = &[
        "", "a", "b", "c", "a/b", "b/c", "a/b/c", "/", "//", "%", "%2F", "%25", "%2", "%%2F", "a%2Fb", "_",
        "a_b", "b_c", ".", "..", ".a", "-", "a-b", "h2c", "80", "80/h2c", "\0", "é/ü",
    ];

    #[test]
    fn compose_is_injective_over_tricky_tuples() {
        let mut seen: HashMap<String, Vec<&str>> = HashMap::new();
        for len in 1..=3 {
            let mut tuple = vec![0usize; len];
            loop {
                let parts: Vec<&str> = tuple.iter().map(|&i| TRICKY[i]).collect();
                let name = compose(&parts);
                assert!(
                    decompose(&name) == parts,
                    "{parts:?} -> {name:?} does not decompose back"
                );
                if let Some(other) = seen.insert(name.clone(), parts.clone()) {
                    panic!("{parts:?} and {other:?} both give {name:?}");
                }
                // Next tuple (odometer).
                let mut k = 0;
                while k < len {
                    tuple[k] += 1;
                    if tuple[k] < TRICKY.len() {
                        break;
                    }
                    tuple[k] = 0;
                    k += 1;
                }
                if k == len {
                    break;
                }
            }
        }
    }

    #[test]
    fn the_collision_of_the_issue_is_gone_and_valid_names_read_as_before() {
        assert_ne!(cluster("a", "b/c", 80, false), cluster("a/b", "c", 80, false));
        assert_ne!(secret("a", "b/c"), secret("a/b", "c"));
        assert_ne!(listener("a", "b/c", 80), listener("a/b", "c", 80));
        assert_ne!(
            route_config("a", "b", 80, Some("c/d")),
            route_config("a", "b/80", 80, Some("c"))
        );
        // A Service whose name ends like the HTTP/2 suffix.
        assert_ne!(cluster("a", "b", 80, true), cluster("a", "b/80", 0, false));
        assert_eq!(cluster("app", "web", 80, false), "app/web/80");
        assert_eq!(cluster("app", "web", 80, true), "app/web/80/h2c");
        assert_eq!(
            route_config("infra", "gw", 443, Some("https")),
            "infra/gw/443/https"
        );
        assert_eq!(secret("infra", "tls.example"), "infra/tls.example");
    }

    #[test]
    fn file_names_are_injective_and_stay_in_their_directory() {
        let mut seen: HashMap<String, String> = HashMap::new();
        for a in TRICKY {
            for b in TRICKY {
                let key = format!("{a}/{b}");
                let name = file_name(&gateway(a, b));
                assert!(!name.contains('/') && !name.starts_with('.') && !name.is_empty());
                assert!(!name.contains('\0'));
                if let Some(other) = seen.insert(name.clone(), key.clone()) {
                    panic!("{key:?} and {other:?} both give the file {name:?}");
                }
            }
        }
        assert_eq!(file_name("infra/gw"), "infra_gw");
    }

    /// The collision of issue 16 with the loader's name check bypassed
    /// (objects built directly): the names alone keep the route in `a`
    /// away from namespace `a/b`'s endpoints.
    #[test]
    fn colliding_components_get_distinct_clusters_even_without_the_name_check() {
        use api::{Inputs, Source, Sourced};
        use serde_json::json;

        fn sourced<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Sourced<T> {
            Sourced::new(
                Source::new("t.yaml", 1),
                serde_json::from_value(value).expect("typed object"),
            )
        }
        let route = |ns: &str, name: &str, backend: &str| {
            json!({"metadata": {"namespace": ns, "name": name}, "spec": {
                "parentRefs": [{"name": "gw", "namespace": "infra"}],
                "rules": [{"backendRefs": [{"name": backend, "port": 80}]}]}})
        };
        let service = |ns: &str, name: &str| {
            json!({"metadata": {"namespace": ns, "name": name},
                   "spec": {"ports": [{"name": "http", "port": 80}]}})
        };
        let slice = |ns: &str, service: &str, ip: &str| {
            json!({"metadata": {"namespace": ns, "name": "s",
                                "labels": {"kubernetes.io/service-name": service}},
                   "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
                   "endpoints": [{"addresses": [ip]}]})
        };
        let inputs = Inputs {
            gateway_classes: vec![sourced(json!({"metadata": {"name": "portcullis"},
                "spec": {"controllerName": "portcullis.dev/gateway-controller"}}))],
            gateways: vec![sourced(json!({"metadata": {"namespace": "infra", "name": "gw"},
                "spec": {"gatewayClassName": "portcullis", "listeners": [{"name": "http",
                "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}]}}))],
            http_routes: vec![
                sourced(route("a", "attack", "b/c")),
                sourced(route("a/b", "victim", "c")),
            ],
            services: vec![sourced(service("a", "b/c")), sourced(service("a/b", "c"))],
            endpoint_slices: vec![
                sourced(slice("a", "b/c", "127.0.0.1")),
                sourced(slice("a/b", "c", "127.0.0.2")),
            ],
            ..Default::default()
        };
        let output = crate::translate(&inputs, &crate::Settings::default());
        let gw = output
            .gateways
            .get("infra/gw")
            .expect("the Gateway is translated");
        let mut endpoints: Vec<(String, Vec<String>)> = gw
            .endpoints
            .iter()
            .map(|e| {
                let ips = e
                    .endpoints
                    .iter()
                    .flat_map(|l| &l.lb_endpoints)
                    .filter_map(|l| match &l.host_identifier {
                        Some(envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier::Endpoint(e)) => {
                            e.address.as_ref()
                        }
                        _ => None,
                    })
                    .filter_map(|a| match &a.address {
                        Some(envoy_types::pb::envoy::config::core::v3::address::Address::SocketAddress(s)) => {
                            Some(s.address.clone())
                        }
                        _ => None,
                    })
                    .collect();
                (e.cluster_name.clone(), ips)
            })
            .collect();
        endpoints.sort();
        assert_eq!(
            endpoints,
            vec![
                ("a%2Fb/c/80".to_string(), vec!["127.0.0.2".to_string()]),
                ("a/b%2Fc/80".to_string(), vec!["127.0.0.1".to_string()]),
            ]
        );
    }
}
