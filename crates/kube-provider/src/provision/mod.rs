//! Provisioning (Kubernetes mode, part 2): an Envoy per Gateway.
//!
//! # Data model
//!
//! For every Gateway of our GatewayClasses that the translator **accepted**
//! (its `Accepted` condition in the status the translation published), the
//! provisioner keeps three objects in the Gateway's namespace — a
//! ConfigMap with the Envoy bootstrap, a Deployment of Envoy and a Service
//! exposing the listener ports — built by the pure [`objects::build`] from
//! the Gateway, the listener ports (its own and those of the ListenerSets
//! the translator accepted for it), the GatewayClass's
//! [`api::gateway_parameters::GatewayParameters`] (resolved by
//! `api::gateway_parameters::resolve`, the same decision the class status
//! is made from) and [`Config`]. [`apply`] writes them:
//!
//! - with server-side apply, field manager [`FIELD_MANAGER`], only by the
//!   leader (the election of [`crate::leader`]);
//! - only when changed: each object carries a hash of itself as applied
//!   ([`objects::APPLIED_HASH_ANNOTATION`]); the live objects (own
//!   label-selected watches) are compared with it, so a retranslation that
//!   changes nothing provisioned writes nothing;
//! - all owned by the Gateway (`controller: true`, `blockOwnerDeletion`):
//!   the garbage collector deletes them with the Gateway;
//! - a Gateway that is no longer ours (its class changed or is not ours
//!   any more, or it was deleted) has its objects deleted by the
//!   provisioner. A Gateway still ours but not accepted (a broken
//!   parametersRef, every listener invalid) keeps its objects as last
//!   applied: one mistake must not take a serving proxy away.
//!
//! The Gateway's addresses come back through [`addresses`]: the provider
//! reads them from the provisioned Service into the translator's input
//! (`api::Inputs::provisioned_addresses`), and the translator reports
//! `status.addresses` and `Programmed` (`AddressNotAssigned` until an
//! address is assigned).

pub mod addresses;
pub mod apply;
pub mod objects;
pub mod plan;

pub use apply::Provisioner;

use api::gateway_parameters::ServiceType;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The field manager of every provisioning write.
pub const FIELD_MANAGER: &str = "portcullis-provisioner";

/// The official image of the Envoy version portcullis pins
/// (`scripts/install-envoy.sh`).
pub const DEFAULT_IMAGE: &str = "envoyproxy/envoy:v1.40.0";

/// What every provisioned Gateway shares (the controller's flags);
/// GatewayParameters override `image` and `service_type` per class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The controller's `controllerName` (labels which controller made an
    /// object: see [`objects::CONTROLLER_LABEL`]).
    pub controller_name: String,
    /// Default Envoy image.
    pub image: String,
    /// Default Service type.
    pub service_type: ServiceType,
    /// Where Envoys reach the controller's xDS server (its Service).
    pub xds_host: String,
    pub xds_port: u16,
    /// `Some(server name)`: the bootstrap speaks TLS to the xDS server,
    /// presenting the client certificate of Secret
    /// [`crate::names::xds_client_secret`] (mounted at
    /// [`crate::names::XDS_CERT_DIR`]) and expecting `server name` in the
    /// server's certificate. `None`: plaintext.
    pub xds_tls: Option<String>,
}

impl Config {
    /// The defaults for a controller name.
    pub fn new(controller_name: &str) -> Config {
        Config {
            controller_name: controller_name.into(),
            image: DEFAULT_IMAGE.into(),
            service_type: ServiceType::LoadBalancer,
            xds_host: "portcullis-xds".into(),
            xds_port: 18000,
            xds_tls: None,
        }
    }
}

/// The kind of a provisioned object (`ConfigMap`, `Service`, `Deployment`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

/// What the provisioner did, per kind: a write skipped because the live
/// object already carries the desired hash counts as unchanged.
#[derive(Clone, Debug, Default)]
pub struct ProvisionMetrics {
    pub writes: Family<KindLabel, Counter>,
    pub unchanged: Family<KindLabel, Counter>,
    pub deletes: Family<KindLabel, Counter>,
    pub failures: Family<KindLabel, Counter>,
}

impl ProvisionMetrics {
    /// Registers the families (the registry adds the `portcullis_` prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "provision_writes",
            "Server-side applies of provisioned objects, per kind",
            self.writes.clone(),
        );
        registry.register(
            "provision_unchanged",
            "Provisioned objects left alone because they were as desired, per kind",
            self.unchanged.clone(),
        );
        registry.register(
            "provision_deletes",
            "Provisioned objects removed because their Gateway is no longer ours, per kind",
            self.deletes.clone(),
        );
        registry.register(
            "provision_failures",
            "Provisioning writes or deletes that failed (retried), per kind",
            self.failures.clone(),
        );
    }

    fn of(family: &Family<KindLabel, Counter>, kind: &str) {
        family.get_or_create(&KindLabel { kind: kind.into() }).inc();
    }
}
