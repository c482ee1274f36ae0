//! The pure builder: what is provisioned for one Gateway, as typed
//! Kubernetes objects (no I/O; [`super::apply`] applies them).
//!
//! For Gateway `ns/gw` (names from [`crate::names`]), all in `ns`, owned by
//! the Gateway (`controller: true`, `blockOwnerDeletion: true`) and
//! labelled with [`crate::names::labels`] plus [`CONTROLLER_LABEL`]:
//!
//! - ConfigMap `portcullis-gw`: key [`crate::names::BOOTSTRAP_KEY`], the
//!   ADS bootstrap (`translate::output::try_ads_bootstrap_tls`): node id
//!   `ns/gw` (the Gateway whose configuration the xDS server sends), the
//!   controller's xDS Service, and — with [`super::Config::xds_tls`] — the
//!   client certificate files under [`crate::names::XDS_CERT_DIR`].
//! - Deployment `portcullis-gw`: Envoy (`envoy -c <bootstrap>`) with the
//!   ConfigMap mounted at [`crate::names::BOOTSTRAP_DIR`] and, with TLS,
//!   Secret [`crate::names::xds_client_secret`] at
//!   [`crate::names::XDS_CERT_DIR`]. The pod template carries
//!   [`CONFIG_HASH_ANNOTATION`], a hash of everything the pods see (the
//!   parameters and the bootstrap), so a change of either rolls the pods
//!   (Envoy reads its bootstrap only at start).
//! - Service `portcullis-gw`: one port per distinct listener port, `port`
//!   = `targetPort` = the listener port. The translator binds each
//!   listener at its own port (it does not remap privileged ports), so the
//!   pods set the namespaced, "safe" sysctl
//!   `net.ipv4.ip_unprivileged_port_start=0` and run as the image's
//!   unprivileged `envoy` user (uid 101) with no capabilities.

use std::collections::{BTreeMap, BTreeSet};

use api::gateway_parameters::GatewayParametersSpec;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, PodSecurityContext, PodSpec,
    PodTemplateSpec, ResourceRequirements, SecretVolumeSource, SecurityContext, Service, ServicePort,
    ServiceSpec, Sysctl, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::names;

/// Label telling which controller (a hash of its `controllerName`) made an
/// object, so two portcullis controllers in one cluster never remove each
/// other's objects.
pub const CONTROLLER_LABEL: &str = "portcullis.dev/controller";
/// Annotation on every provisioned object: a hash of the object as last
/// applied; equal to the desired object's means nothing is written.
pub const APPLIED_HASH_ANNOTATION: &str = "portcullis.dev/applied-hash";
/// Pod-template annotation: a hash of what the pods see (parameters and
/// bootstrap); a change rolls the Deployment.
pub const CONFIG_HASH_ANNOTATION: &str = "portcullis.dev/config-hash";
/// The uid of the official Envoy image's `envoy` user.
const ENVOY_UID: i64 = 101;
/// Envoy's admin interface, on the pod's loopback only (never reachable
/// from the network: it can dump configuration and stop Envoy).
const ADMIN_PORT: u16 = 19000;

/// The Gateway the objects are for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayRef {
    pub namespace: String,
    pub name: String,
    /// `metadata.uid`: the owner reference names it.
    pub uid: String,
}

/// The three objects of one Gateway.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    pub config_map: ConfigMap,
    pub deployment: Deployment,
    pub service: Service,
}

/// Why the objects of a Gateway cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("Gateway {namespace}/{name}: no listener port to expose (spec.listeners)")]
    NoPorts { namespace: String, name: String },
    #[error("Gateway {namespace}/{name}: the bootstrap cannot be rendered: {source}")]
    Bootstrap {
        namespace: String,
        name: String,
        #[source]
        source: translate::output::OutputError,
    },
}

/// FNV-1a 64 (stable across builds and platforms, unlike std's hasher).
pub fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The value of [`CONTROLLER_LABEL`] for a controller name (which itself
/// may hold `/`, not allowed in label values).
pub fn controller_label(controller_name: &str) -> String {
    format!("{:016x}", fnv(controller_name.as_bytes()))
}

/// Every label of the objects of `gw` (the selector uses
/// [`crate::names::labels`] only: it is immutable).
pub fn labels(gw: &GatewayRef, controller_name: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = names::labels(&gw.namespace, &gw.name)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    out.insert(CONTROLLER_LABEL.into(), controller_label(controller_name));
    out
}

fn selector(gw: &GatewayRef) -> BTreeMap<String, String> {
    names::labels(&gw.namespace, &gw.name)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn meta(gw: &GatewayRef, controller_name: &str, annotations: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(names::provisioned(&gw.name)),
        namespace: Some(gw.namespace.clone()),
        labels: Some(labels(gw, controller_name)),
        annotations: (!annotations.is_empty()).then_some(annotations),
        owner_references: Some(vec![OwnerReference {
            api_version: "gateway.networking.k8s.io/v1".into(),
            kind: "Gateway".into(),
            name: gw.name.clone(),
            uid: gw.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..Default::default()
    }
}

/// The bootstrap of the Envoy of `gw` (JSON text).
pub fn bootstrap(gw: &GatewayRef, config: &super::Config) -> Result<String, BuildError> {
    let tls = config
        .xds_tls
        .as_ref()
        .map(|server_name| translate::output::XdsClientTls {
            cert_chain_file: format!("{}/tls.crt", names::XDS_CERT_DIR),
            private_key_file: format!("{}/tls.key", names::XDS_CERT_DIR),
            ca_file: format!("{}/ca.crt", names::XDS_CERT_DIR),
            server_name: server_name.clone(),
        });
    let admin = translate::output::AdminAddress::new("127.0.0.1", ADMIN_PORT);
    let node = translate::naming::gateway(&gw.namespace, &gw.name);
    // With TLS, the client certificate and the server CA come through
    // file-based SDS from the mounted Secret, so a re-issued certificate
    // (the kubelet swaps the volume's files) is used without a restart;
    // Envoy never re-reads files named directly in a static cluster.
    let proto = match &tls {
        Some(tls) => translate::output::bootstrap::ads_bootstrap_tls_sds_proto(
            &node,
            translate::output::bootstrap::DEFAULT_NODE_CLUSTER,
            &config.xds_host,
            config.xds_port,
            Some(&admin),
            tls,
            names::XDS_CERT_DIR,
        ),
        None => translate::output::ads_bootstrap_tls_proto(
            &node,
            translate::output::bootstrap::DEFAULT_NODE_CLUSTER,
            &config.xds_host,
            config.xds_port,
            Some(&admin),
            None,
        ),
    };
    translate::output::json::message_to_json(&proto)
        .map(|v| v.to_string())
        .map_err(|source| BuildError::Bootstrap {
            namespace: gw.namespace.clone(),
            name: gw.name.clone(),
            source,
        })
}

/// Builds the objects of `gw` exposing `ports`, shaped by `params` (the
/// GatewayClass's, already validated: `GatewayParametersSpec::problems`
/// is empty) and `config`.
pub fn build(
    gw: &GatewayRef,
    ports: &BTreeSet<u16>,
    params: &GatewayParametersSpec,
    config: &super::Config,
) -> Result<Desired, BuildError> {
    if ports.is_empty() {
        return Err(BuildError::NoPorts {
            namespace: gw.namespace.clone(),
            name: gw.name.clone(),
        });
    }
    let name = names::provisioned(&gw.name);
    let bootstrap = bootstrap(gw, config)?;
    let image = params.image.clone().unwrap_or_else(|| config.image.clone());

    let config_map = ConfigMap {
        metadata: meta(gw, &config.controller_name, BTreeMap::new()),
        data: Some([(names::BOOTSTRAP_KEY.to_string(), bootstrap.clone())].into()),
        ..Default::default()
    };

    // What the pods see: a change of any of it must restart them.
    let seen = serde_json::json!({
        "params": params,
        "image": image,
        "bootstrap": bootstrap,
        "ports": ports,
    });
    let config_hash = format!("{:016x}", fnv(seen.to_string().as_bytes()));
    let mut pod_annotations = params.pod_annotations.clone();
    pod_annotations.insert(CONFIG_HASH_ANNOTATION.into(), config_hash);

    let mut mounts = vec![VolumeMount {
        name: "bootstrap".into(),
        mount_path: names::BOOTSTRAP_DIR.into(),
        read_only: Some(true),
        ..Default::default()
    }];
    let mut volumes = vec![Volume {
        name: "bootstrap".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: name.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }];
    if config.xds_tls.is_some() {
        mounts.push(VolumeMount {
            name: "xds-client-cert".into(),
            mount_path: names::XDS_CERT_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        });
        volumes.push(Volume {
            name: "xds-client-cert".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(names::xds_client_secret(&gw.name)),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    let quantities = |m: &BTreeMap<String, String>| {
        (!m.is_empty()).then(|| {
            m.iter()
                .map(|(k, v)| (k.clone(), Quantity(v.clone())))
                .collect::<BTreeMap<_, _>>()
        })
    };
    let resources = params.resources.as_ref().map(|r| ResourceRequirements {
        requests: quantities(&r.requests),
        limits: quantities(&r.limits),
        ..Default::default()
    });
    let container = Container {
        name: "envoy".into(),
        image: Some(image),
        command: Some(vec!["envoy".into()]),
        args: Some(vec![
            "-c".into(),
            format!("{}/{}", names::BOOTSTRAP_DIR, names::BOOTSTRAP_KEY),
        ]),
        ports: Some(
            ports
                .iter()
                .map(|p| ContainerPort {
                    container_port: i32::from(*p),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                })
                .collect(),
        ),
        resources,
        volume_mounts: Some(mounts),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let deployment = Deployment {
        metadata: meta(gw, &config.controller_name, BTreeMap::new()),
        spec: Some(DeploymentSpec {
            replicas: Some(params.replicas.unwrap_or(1)),
            selector: LabelSelector {
                match_labels: Some(selector(gw)),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(gw, &config.controller_name)),
                    annotations: Some(pod_annotations),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    volumes: Some(volumes),
                    // The Envoy pod never talks to the apiserver.
                    automount_service_account_token: Some(false),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(ENVOY_UID),
                        run_as_group: Some(ENVOY_UID),
                        // Listener ports below 1024 without any capability.
                        sysctls: Some(vec![Sysctl {
                            name: "net.ipv4.ip_unprivileged_port_start".into(),
                            value: "0".into(),
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    };

    let service = Service {
        metadata: meta(gw, &config.controller_name, params.service_annotations.clone()),
        spec: Some(ServiceSpec {
            type_: Some(
                params
                    .service_type
                    .unwrap_or(config.service_type)
                    .as_str()
                    .to_string(),
            ),
            selector: Some(selector(gw)),
            ports: Some(
                ports
                    .iter()
                    .map(|p| ServicePort {
                        name: Some(format!("port-{p}")),
                        port: i32::from(*p),
                        target_port: Some(IntOrString::Int(i32::from(*p))),
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    };
    Ok(Desired {
        config_map,
        deployment,
        service,
    })
}

#[cfg(test)]
mod tests {
    use api::gateway_parameters::{Resources, ServiceType};
    use serde_json::{Value, json};

    use super::*;
    use crate::provision::Config;

    fn gw() -> GatewayRef {
        GatewayRef {
            namespace: "infra".into(),
            name: "edge".into(),
            uid: "uid-1".into(),
        }
    }

    fn config() -> Config {
        Config {
            xds_host: "portcullis-xds.portcullis-system.svc".into(),
            xds_port: 18000,
            ..Config::new("portcullis.dev/gateway-controller")
        }
    }

    fn json<T: serde::Serialize>(t: &T) -> Value {
        serde_json::to_value(t).expect("json")
    }

    #[test]
    fn defaults_owner_labels_ports_and_bootstrap() {
        let d = build(&gw(), &[80, 443, 8080].into(), &Default::default(), &config()).expect("build");
        for meta in [
            &d.config_map.metadata,
            &d.deployment.metadata,
            &d.service.metadata,
        ] {
            assert_eq!(meta.name.as_deref(), Some("portcullis-edge"));
            assert_eq!(meta.namespace.as_deref(), Some("infra"));
            let owner = &meta.owner_references.as_ref().expect("owner")[0];
            assert_eq!(
                (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
                ("Gateway", "edge", "uid-1")
            );
            assert_eq!(
                (owner.controller, owner.block_owner_deletion),
                (Some(true), Some(true))
            );
            let labels = meta.labels.as_ref().expect("labels");
            assert_eq!(labels["gateway.networking.k8s.io/gateway-name"], "edge");
            assert_eq!(labels["app.kubernetes.io/managed-by"], "portcullis");
            assert_eq!(labels["portcullis.dev/gateway-namespace"], "infra");
        }
        let svc = json(&d.service);
        assert_eq!(svc["spec"]["type"], "LoadBalancer");
        assert_eq!(
            svc["spec"]["ports"],
            json!([
                {"name": "port-80", "port": 80, "targetPort": 80, "protocol": "TCP"},
                {"name": "port-443", "port": 443, "targetPort": 443, "protocol": "TCP"},
                {"name": "port-8080", "port": 8080, "targetPort": 8080, "protocol": "TCP"},
            ])
        );
        let dep = json(&d.deployment);
        assert_eq!(dep["spec"]["replicas"], 1);
        let pod = &dep["spec"]["template"];
        // The selector matches the pods, and the Service selects them.
        for (k, v) in dep["spec"]["selector"]["matchLabels"]
            .as_object()
            .expect("selector")
        {
            assert_eq!(&pod["metadata"]["labels"][k], v);
            assert_eq!(&svc["spec"]["selector"][k], v);
        }
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["image"], "envoyproxy/envoy:v1.40.0");
        assert_eq!(c["args"], json!(["-c", "/etc/envoy/envoy.json"]));
        assert_eq!(c["volumeMounts"].as_array().map(Vec::len), Some(1));
        assert_eq!(pod["spec"]["volumes"][0]["configMap"]["name"], "portcullis-edge");
        assert_eq!(
            pod["spec"]["securityContext"]["sysctls"][0]["name"],
            "net.ipv4.ip_unprivileged_port_start"
        );
        // The bootstrap: node id, plaintext ADS to the xDS Service.
        let b: Value = serde_json::from_str(&d.config_map.data.as_ref().expect("data")["envoy.json"])
            .expect("bootstrap JSON");
        assert_eq!(b["node"]["id"], "infra/edge");
        let text = b.to_string();
        assert!(text.contains("portcullis-xds.portcullis-system.svc"), "{text}");
        assert!(text.contains("18000"), "{text}");
        assert!(!text.contains("transport_socket"), "plaintext: {text}");
    }

    #[test]
    fn parameters_are_applied() {
        let params = GatewayParametersSpec {
            replicas: Some(3),
            image: Some("registry.example/envoy:custom".into()),
            resources: Some(Resources {
                requests: [("cpu".to_string(), "100m".to_string())].into(),
                limits: [("memory".to_string(), "256Mi".to_string())].into(),
            }),
            service_type: Some(ServiceType::ClusterIP),
            service_annotations: [("lb.example/internal".to_string(), "true".to_string())].into(),
            pod_annotations: [("prometheus.io/scrape".to_string(), "true".to_string())].into(),
        };
        let d = build(&gw(), &[80].into(), &params, &config()).expect("build");
        let dep = json(&d.deployment);
        assert_eq!(dep["spec"]["replicas"], 3);
        let pod = &dep["spec"]["template"];
        assert_eq!(pod["metadata"]["annotations"]["prometheus.io/scrape"], "true");
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["image"], "registry.example/envoy:custom");
        assert_eq!(
            c["resources"],
            json!({"requests": {"cpu": "100m"}, "limits": {"memory": "256Mi"}})
        );
        let svc = json(&d.service);
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(svc["metadata"]["annotations"]["lb.example/internal"], "true");
    }

    #[test]
    fn config_hash_follows_what_the_pods_see() {
        let hash = |params: &GatewayParametersSpec, config: &Config| {
            let d = build(&gw(), &[80].into(), params, config).expect("build");
            json(&d.deployment)["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH_ANNOTATION]
                .as_str()
                .expect("hash")
                .to_string()
        };
        let base = hash(&Default::default(), &config());
        assert_eq!(base, hash(&Default::default(), &config()), "stable");
        let more = GatewayParametersSpec {
            replicas: Some(2),
            ..Default::default()
        };
        assert_ne!(base, hash(&more, &config()), "parameters");
        let other_xds = Config {
            xds_port: 18001,
            ..config()
        };
        assert_ne!(base, hash(&Default::default(), &other_xds), "bootstrap");
    }

    #[test]
    fn xds_tls_mounts_the_client_secret_and_names_its_files() {
        let config = Config {
            xds_tls: Some("portcullis-xds.portcullis-system.svc".into()),
            ..config()
        };
        let d = build(&gw(), &[80].into(), &Default::default(), &config).expect("build");
        let pod = &json(&d.deployment)["spec"]["template"]["spec"];
        assert_eq!(pod["volumes"][1]["secret"]["secretName"], "portcullis-edge-xds");
        assert_eq!(
            pod["containers"][0]["volumeMounts"][1]["mountPath"],
            names::XDS_CERT_DIR
        );
        let b = &d.config_map.data.as_ref().expect("data")["envoy.json"];
        // Through file-based SDS from the Secret's own files (the issuer
        // writes these keys), so a re-issued certificate is picked up.
        for file in [
            translate::output::bootstrap::XDS_SDS_CERT_FILE,
            translate::output::bootstrap::XDS_SDS_CA_FILE,
        ] {
            assert!(
                b.contains(&format!("{}/{file}", names::XDS_CERT_DIR)),
                "{file}: {b}"
            );
        }
    }

    #[test]
    fn no_ports_is_an_error_naming_the_gateway() {
        let e = build(&gw(), &BTreeSet::new(), &Default::default(), &config()).expect_err("no ports");
        assert!(e.to_string().contains("infra/edge"), "{e}");
    }
}
