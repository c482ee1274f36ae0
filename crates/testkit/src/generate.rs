//! Generated inputs for benchmarks and load tests: many Gateways,
//! listeners, routes and Services, as one multi-document YAML text.

use std::fmt::Write;

/// Shape of a generated configuration.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub routes: usize,
    pub gateways: usize,
    /// HTTP listeners per Gateway (distinct hostnames on one port).
    pub listeners_per_gateway: usize,
    pub rules_per_route: usize,
    pub namespaces: usize,
    pub services: usize,
}

impl Shape {
    pub fn with_routes(routes: usize) -> Self {
        Self {
            routes,
            gateways: 4,
            listeners_per_gateway: 4,
            rules_per_route: 4,
            namespaces: 20,
            services: (routes / 4).max(1),
        }
    }
}

pub fn manifests(shape: Shape) -> String {
    let mut s = String::with_capacity(shape.routes * 1200);
    s.push_str(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: portcullis\nspec:\n  controllerName: portcullis.dev/gateway-controller\n",
    );
    for g in 0..shape.gateways {
        let _ = write!(
            s,
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: gw-{g}\n  namespace: infra\nspec:\n  gatewayClassName: portcullis\n  listeners:\n"
        );
        for l in 0..shape.listeners_per_gateway {
            let _ = write!(
                s,
                "  - name: l{l}\n    protocol: HTTP\n    port: 80\n    hostname: \"*.l{l}.example.com\"\n    allowedRoutes:\n      namespaces:\n        from: All\n"
            );
        }
    }
    for i in 0..shape.services {
        let ns = i % shape.namespaces;
        let _ = write!(
            s,
            "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{i}\n  namespace: ns-{ns}\nspec:\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-{i}-a\n  namespace: ns-{ns}\n  labels:\n    kubernetes.io/service-name: svc-{i}\naddressType: IPv4\nports:\n- name: http\n  port: 8080\nendpoints:\n- addresses: [\"127.0.{}.{}\"]\n",
            (i / 250) % 250,
            i % 250 + 1
        );
    }
    for r in 0..shape.routes {
        let ns = r % shape.namespaces;
        let g = r % shape.gateways;
        let l = (r / shape.gateways) % shape.listeners_per_gateway;
        let _ = write!(
            s,
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: route-{r}\n  namespace: ns-{ns}\nspec:\n  parentRefs:\n  - name: gw-{g}\n    namespace: infra\n    sectionName: l{l}\n  hostnames: [\"app-{r}.l{l}.example.com\"]\n  rules:\n"
        );
        for k in 0..shape.rules_per_route {
            // Services in the route's own namespace.
            let svc = {
                let per_ns = shape.services.div_ceil(shape.namespaces).max(1);
                let idx = ns + shape.namespaces * ((r + k) % per_ns);
                if idx < shape.services {
                    idx
                } else {
                    ns.min(shape.services - 1)
                }
            };
            match k % 4 {
                0 => {
                    let _ = write!(
                        s,
                        "  - matches:\n    - path: {{type: PathPrefix, value: /api/v{k}}}\n      headers:\n      - {{name: x-tenant, value: t{r}}}\n    backendRefs:\n    - {{name: svc-{svc}, port: 80}}\n"
                    );
                }
                1 => {
                    let _ = write!(
                        s,
                        "  - matches:\n    - path: {{type: Exact, value: /exact/{k}}}\n    filters:\n    - type: RequestHeaderModifier\n      requestHeaderModifier:\n        set: [{{name: x-route, value: r{r}}}]\n    backendRefs:\n    - {{name: svc-{svc}, port: 80, weight: 3}}\n    - {{name: svc-{svc}, port: 80, weight: 1}}\n"
                    );
                }
                2 => {
                    let _ = write!(
                        s,
                        "  - matches:\n    - path: {{type: RegularExpression, value: \"/items/[0-9]+/{k}\"}}\n      method: GET\n    backendRefs:\n    - {{name: svc-{svc}, port: 80}}\n"
                    );
                }
                _ => {
                    let _ = write!(
                        s,
                        "  - matches:\n    - path: {{type: PathPrefix, value: /old/{k}}}\n    filters:\n    - type: RequestRedirect\n      requestRedirect: {{path: {{type: ReplacePrefixMatch, replacePrefixMatch: /new/{k}}}, statusCode: 301}}\n"
                    );
                }
            }
        }
    }
    s
}

/// Sets the first path match of HTTPRoute `index` of `inputs` to `value`,
/// copy on write (`Arc::make_mut`): a snapshot that holds the old inputs
/// keeps the old route, and every other route stays shared between the
/// two, as in `serve`'s snapshots. Every route [`manifests`] generates has
/// a path match; a route without one is a bug of the caller and panics.
pub fn set_first_path(inputs: &mut api::Inputs, index: usize, value: &str) {
    let route = std::sync::Arc::make_mut(&mut inputs.http_routes[index].object);
    let path = route
        .spec
        .rules
        .as_mut()
        .and_then(|r| r.first_mut())
        .and_then(|r| r.matches.as_mut())
        .and_then(|m| m.first_mut())
        .and_then(|m| m.path.as_mut())
        .expect("generated routes match on a path");
    path.value = Some(value.to_string());
}

/// How many HTTPRoutes have a backendRef naming Service `ns/name` (what an
/// edit of that Service rebuilds), read from the objects.
pub fn routes_naming(inputs: &api::Inputs, ns: &str, name: &str) -> usize {
    inputs
        .http_routes
        .iter()
        .filter(|r| {
            let route_ns = r.object.metadata.namespace.as_deref().unwrap_or("default");
            r.object.spec.rules.iter().flatten().any(|rule| {
                rule.backend_refs
                    .iter()
                    .flatten()
                    .any(|b| b.name == name && b.namespace.as_deref().unwrap_or(route_ns) == ns)
            })
        })
        .count()
}
