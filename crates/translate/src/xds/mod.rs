//! Envoy protos from the IR. Names are deterministic and derived from the
//! Gateway API objects, so that xDS diffs and goldens are stable:
//! listeners `<ns>/<gateway>/<port>`, route configurations
//! `<ns>/<gateway>/<port>` (HTTP) or `<ns>/<gateway>/<port>/<listener>`
//! (HTTPS), clusters `<ns>/<service>/<port>[/h2c]`, secrets `<ns>/<secret>`.

pub mod canonical;
pub mod cluster;
pub mod encoded;
pub mod listener;
pub mod route;
pub(crate) mod wire;

use envoy_types::pb::envoy::config::core::v3::{
    AggregatedConfigSource, ApiVersion, ConfigSource, config_source,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{Secret, TlsCertificate, secret};

use crate::GatewayXds;
use crate::endpoints::Resolver;
use crate::ir;

/// `{ ads: {}, resource_api_version: V3 }`: every dynamic reference goes
/// through the one ADS stream.
pub fn ads() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        ..Default::default()
    }
}

/// Route configuration memos by name (see [`route::ConfigMemo`]).
pub type ConfigMemos = std::collections::HashMap<String, route::ConfigMemo>;

/// A Gateway's clusters by name, in the order of its xDS clusters and
/// ClusterLoadAssignments.
pub type Clusters = std::collections::BTreeMap<String, crate::backend::ClusterSpec>;

/// Last call's assembly of a Gateway and the clusters it was built from
/// (in the order of its xDS clusters and ClusterLoadAssignments).
pub struct PriorClusters {
    pub clusters: std::sync::Arc<Clusters>,
    pub built: std::sync::Arc<GatewayXds>,
}

/// What [`build_memo`] made.
pub struct Built {
    pub xds: GatewayXds,
    /// This assembly's route configuration memos (when `prior` was given).
    pub configs: Option<ConfigMemos>,
    /// The clusters the assembly was built from (kept with the memos, so
    /// that an EndpointSlice edit can rebuild the ClusterLoadAssignments of
    /// the Services it touched: `incremental/endpoints.rs`).
    pub clusters: Option<std::sync::Arc<Clusters>>,
}

/// What the incremental translator offers an assembly from last call
/// (all empty for a full translation).
#[derive(Default)]
pub struct Prior<'a> {
    /// Each route configuration's memo: its unchanged virtual hosts are
    /// spliced (consumed: the memos are updated into this assembly's), and
    /// this assembly's memos and clusters are returned.
    pub configs: Option<ConfigMemos>,
    /// A partial assembly (`incremental::dirty_hosts`): the Gateway's
    /// chains hold only these hosts; the others are spliced from `configs`.
    pub dirty: Option<&'a crate::incremental::dirty_hosts::DirtyHosts>,
    /// Last call's clusters: one whose spec is unchanged and whose Service
    /// is not among `changed_endpoints` keeps last call's Cluster and
    /// ClusterLoadAssignment (its endpoints are not resolved again).
    pub clusters: Option<&'a PriorClusters>,
    /// The Services whose EndpointSlices changed since last call.
    pub changed_endpoints: Option<&'a crate::incremental::endpoints::Services>,
}

/// A Gateway's xDS, its clusters' endpoints resolved by `endpoints`,
/// reusing what `prior` offers.
pub fn build_memo(
    mut gw: ir::Gateway,
    listener_address: &str,
    store: &mut ir::RouteStore,
    endpoints: &Resolver<'_, '_>,
    prior: Prior<'_>,
) -> Built {
    let Prior {
        configs: mut prior,
        dirty,
        clusters: prior_clusters,
        changed_endpoints: changed,
    } = prior;
    let mut out = GatewayXds::default();
    let mut memos = prior.as_ref().map(|_| ConfigMemos::new());
    let ports = std::mem::take(&mut gw.ports);
    let clean = std::collections::BTreeSet::new();
    for (port, p) in ports {
        out.listeners
            .push(listener::build(&gw, port, &p, listener_address));
        for (ci, chain) in p.chains.into_iter().enumerate() {
            let name = chain.route_config.clone();
            let before = prior.as_mut().and_then(|m| m.remove(&name));
            let chain_dirty = dirty.map(|d| d.get(&(port, ci)).unwrap_or(&clean));
            let (config, memo) = route::build_memo(chain, store, before, memos.is_some(), chain_dirty);
            if let (Some(memos), Some(memo)) = (memos.as_mut(), memo) {
                memos.insert(name, memo);
            }
            out.routes.push(config);
        }
    }
    // Last call's clusters, walked beside this call's (both in name order).
    let mut kept = prior_clusters
        .filter(|p| p.clusters.len() == p.built.clusters.len() && p.clusters.len() == p.built.endpoints.len())
        .map(|p| {
            p.clusters
                .values()
                .zip(p.built.clusters.iter().zip(&p.built.endpoints))
                .peekable()
        });
    // Sized once: a Cluster is large, and growing the lists moved every
    // one built so far (a few percent of an edit at 10,000 routes).
    out.clusters.reserve_exact(gw.clusters.len());
    out.endpoints.reserve_exact(gw.clusters.len());
    for c in gw.clusters.values() {
        let same = kept.as_mut().and_then(|walk| {
            while walk.next_if(|(spec, _)| spec.name < c.name).is_some() {}
            let (spec, (cluster, assignment)) = walk.next_if(|(spec, _)| spec.name == c.name)?;
            let unchanged = spec == c
                && assignment.cluster_name == c.name
                && !changed.is_some_and(|changed| crate::incremental::endpoints::touches(changed, c));
            unchanged.then(|| (cluster.clone(), assignment.clone()))
        });
        let (cluster, assignment) = same.unwrap_or_else(|| {
            let (cluster, assignment) = cluster::build(c, &endpoints.of(c));
            (std::sync::Arc::new(cluster), std::sync::Arc::new(assignment))
        });
        out.clusters.push(cluster);
        out.endpoints.push(assignment);
    }
    for c in gw.certificates.values() {
        out.secrets.push(Secret {
            name: c.sds_name.clone(),
            r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
                certificate_chain: Some(inline(&c.cert_pem)),
                private_key: Some(inline(&c.key_pem)),
                ..Default::default()
            })),
        });
    }
    let clusters = memos
        .is_some()
        .then(|| std::sync::Arc::new(std::mem::take(&mut gw.clusters)));
    Built {
        xds: out,
        configs: memos,
        clusters,
    }
}

fn inline(s: &str) -> envoy_types::pb::envoy::config::core::v3::DataSource {
    use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
    DataSource {
        specifier: Some(data_source::Specifier::InlineString(s.into())),
        ..Default::default()
    }
}
