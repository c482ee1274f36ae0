//! Names of what Kubernetes mode provisions for a Gateway (part 2: Envoy
//! per Gateway, mutually authenticated xDS). One place, because the
//! provisioner (Deployment, Service, ConfigMap), the xDS certificate issuer
//! (the client-certificate Secret) and the xDS server (the identity a
//! certificate carries) must agree on them.
//!
//! Everything provisioned for Gateway `ns/gw` lives in `ns` (owner
//! references cannot cross namespaces) and is owned by the Gateway, so the
//! garbage collector deletes it with the Gateway.

/// Kubernetes object names are DNS labels here (Services need that): at
/// most 63 characters.
const MAX_NAME: usize = 63;

/// `portcullis-<gateway>`: the Deployment, Service and ConfigMap of a
/// Gateway's Envoy. Names too long for a DNS label keep a prefix and end
/// in a hash of the whole Gateway name, so two long names never collide.
pub fn provisioned(gateway_name: &str) -> String {
    bounded(&format!("portcullis-{gateway_name}"), gateway_name)
}

/// `portcullis-<gateway>-xds`: the Secret (`kubernetes.io/tls`, keys
/// `tls.crt`, `tls.key`, `ca.crt`) holding the client certificate that
/// Gateway's Envoy presents to the xDS server.
pub fn xds_client_secret(gateway_name: &str) -> String {
    bounded(&format!("portcullis-{gateway_name}-xds"), gateway_name)
}

/// The ConfigMap key holding the Envoy bootstrap (JSON).
pub const BOOTSTRAP_KEY: &str = "envoy.json";
/// Where the provisioned Deployment mounts the bootstrap ConfigMap.
pub const BOOTSTRAP_DIR: &str = "/etc/envoy";
/// Where the provisioned Deployment mounts [`xds_client_secret`].
pub const XDS_CERT_DIR: &str = "/etc/portcullis/xds";

/// The identity a Gateway's xDS client certificate carries, as a URI SAN.
/// The xDS server serves a connection only the node whose id
/// (`namespace/name`, as every portcullis bootstrap sets it) matches it.
pub fn xds_identity(namespace: &str, gateway_name: &str) -> String {
    format!("spiffe://portcullis/gateway/{namespace}/{gateway_name}")
}

/// The node id an identity from [`xds_identity`] may use (`None` for a URI
/// that is not one).
pub fn node_of_identity(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("spiffe://portcullis/gateway/")?;
    let (namespace, name) = rest.split_once('/')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains('/')).then(|| format!("{namespace}/{name}"))
}

/// Labels on everything provisioned for a Gateway (the second is the label
/// Gateway API implementations put on a Gateway's proxy objects).
pub fn labels(namespace: &str, gateway_name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("app.kubernetes.io/managed-by", "portcullis".into()),
        (
            "gateway.networking.k8s.io/gateway-name",
            bounded(gateway_name, gateway_name),
        ),
        ("portcullis.dev/gateway-namespace", namespace.into()),
    ]
}

fn bounded(name: &str, hashed: &str) -> String {
    if name.len() <= MAX_NAME {
        return name.to_string();
    }
    // FNV-1a: stable across builds and platforms (std's hasher is not).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in hashed.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let suffix = format!("-{:08x}", h as u32);
    let mut prefix = name[..MAX_NAME - suffix.len()].to_string();
    while prefix.ends_with('-') || prefix.ends_with('.') {
        prefix.pop();
    }
    prefix + &suffix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_kept() {
        assert_eq!(provisioned("gw"), "portcullis-gw");
        assert_eq!(xds_client_secret("gw"), "portcullis-gw-xds");
    }

    #[test]
    fn long_names_are_bounded_and_distinct() {
        let a = "a".repeat(60) + "x";
        let b = "a".repeat(60) + "y";
        for f in [provisioned, xds_client_secret] {
            let (na, nb) = (f(&a), f(&b));
            assert!(na.len() <= MAX_NAME && nb.len() <= MAX_NAME, "{na} {nb}");
            assert_ne!(na, nb);
            assert!(na.starts_with("portcullis-aaa"));
        }
    }

    #[test]
    fn identity_round_trips_and_rejects_others() {
        assert_eq!(
            node_of_identity(&xds_identity("infra", "shared")).as_deref(),
            Some("infra/shared")
        );
        assert_eq!(node_of_identity("spiffe://portcullis/gateway/infra"), None);
        assert_eq!(node_of_identity("spiffe://portcullis/gateway/a/b/c"), None);
        assert_eq!(node_of_identity("spiffe://other/gateway/a/b"), None);
    }
}
