//! The flags of provisioning in `portcullis controller` (an Envoy
//! Deployment, Service and bootstrap ConfigMap per Gateway; see
//! `kube_provider::provision`).

use api::gateway_parameters::ServiceType;

#[derive(clap::Args, Clone, Debug)]
pub struct ProvisionArgs {
    /// Provision an Envoy (Deployment, Service, bootstrap ConfigMap) per
    /// accepted Gateway and report its Service's address in status
    /// (`--provision=false`: no objects, status reports
    /// `--listener-address`'s Envoys as in part 1).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub provision: bool,
    /// Envoy image of provisioned Gateways (a GatewayParameters `image`
    /// overrides it).
    #[arg(long, default_value = kube_provider::provision::DEFAULT_IMAGE)]
    pub envoy_image: String,
    /// Service type of provisioned Gateways (a GatewayParameters
    /// `serviceType` overrides it).
    #[arg(long, default_value = "LoadBalancer", value_parser = parse_service_type)]
    pub service_type: ServiceType,
    /// Host provisioned Envoys reach the xDS server at (default:
    /// `portcullis-xds.<leader-election namespace>.svc`).
    #[arg(long)]
    pub xds_service_host: Option<String>,
    /// Port of that xDS Service (default: the port of `--xds-address`).
    #[arg(long)]
    pub xds_service_port: Option<u16>,
}

/// A `--service-type` that is not a Service type (clap prints it after
/// the flag).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a Service type: ClusterIP, NodePort or LoadBalancer")]
pub struct ServiceTypeError {
    pub value: String,
}

fn parse_service_type(s: &str) -> Result<ServiceType, ServiceTypeError> {
    match s {
        "ClusterIP" => Ok(ServiceType::ClusterIP),
        "NodePort" => Ok(ServiceType::NodePort),
        "LoadBalancer" => Ok(ServiceType::LoadBalancer),
        other => Err(ServiceTypeError {
            value: other.to_string(),
        }),
    }
}

impl ProvisionArgs {
    /// The provisioner's configuration, `None` when provisioning is off.
    /// `xds_tls`: the DNS name of the xDS server's certificate when xDS is
    /// mutually authenticated (`--xds-ca`): provisioned Envoys then present
    /// the client certificate of Secret `portcullis-<gateway>-xds`.
    pub fn config(
        &self,
        controller_name: &str,
        namespace: &str,
        xds_address: std::net::SocketAddr,
        xds_tls: Option<String>,
    ) -> Option<kube_provider::provision::Config> {
        self.provision.then(|| kube_provider::provision::Config {
            controller_name: controller_name.into(),
            image: self.envoy_image.clone(),
            service_type: self.service_type,
            xds_host: self
                .xds_service_host
                .clone()
                .unwrap_or_else(|| format!("portcullis-xds.{namespace}.svc")),
            xds_port: self.xds_service_port.unwrap_or(xds_address.port()),
            xds_tls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_service_type_is_named() {
        assert_eq!(parse_service_type("NodePort"), Ok(ServiceType::NodePort));
        let err = parse_service_type("Headless").err();
        assert_eq!(
            err,
            Some(ServiceTypeError {
                value: "Headless".into()
            })
        );
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some(r#""Headless" is not a Service type: ClusterIP, NodePort or LoadBalancer"#)
        );
    }
}
