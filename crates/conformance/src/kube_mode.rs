//! Controller mode (`--mode controller`): the cases run against
//! `portcullis controller` and a real kube-apiserver + etcd
//! ([`testkit::kube::Cluster`], no kubelet and no controller-manager)
//! instead of `portcullis serve` and files.
//!
//! What changes against file mode, and only this:
//! - every object (base and per test) is applied through the API with
//!   server-side apply (field manager [`MANAGER`]), Namespaces first, and
//!   deleted through the API after the test; a Namespace is then finalized
//!   by us, as the namespace controller (which does not run here) would do;
//! - status is read back from the API (the objects' `status`, with their
//!   live `metadata.generation`), never from the admin API;
//! - the apiserver refuses loopback addresses in EndpointSlices, so every
//!   endpoint on an echo pod (127.0.2.K:port) is reached through a forwarder
//!   on the host's own address ([`testkit::kube::forward_from_host`]): each
//!   pod gets a slice of its own whose ports are its forwarders' ports (a
//!   slice's ports are shared by its endpoints), matched to the Service by
//!   port name as before. Pods, their names and request logs are unchanged.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::discovery::Scope;
use serde_json::{Value, json};

/// Field manager of everything the runner applies.
pub const MANAGER: &str = "gateway-api-conformance";

/// The kinds whose status the assertions read (all of group
/// `gateway.networking.k8s.io/v1`): kind and plural.
const STATUS_KINDS: [(&str, &str); 4] = [
    ("Gateway", "gateways"),
    ("HTTPRoute", "httproutes"),
    ("GRPCRoute", "grpcroutes"),
    ("ListenerSet", "listenersets"),
];

/// What went wrong in controller mode; each names the object.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// No apiserver on this machine: every case is skipped with this reason.
    #[error("{0}")]
    Unavailable(String),
    #[error("Kubernetes control plane: {0}")]
    Cluster(#[from] testkit::kube::ClusterError),
    #[error("{api_version} {kind} is not served by the apiserver: {source}")]
    Discovery {
        api_version: String,
        kind: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("the apiserver refused {object}: {source}")]
    Refused {
        object: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("delete {object}: {source}")]
    Delete {
        object: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("finalize Namespace {namespace}: {source}")]
    Finalize {
        namespace: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("Namespace {0} still exists 10 s after its delete")]
    NamespaceStays(String),
    #[error("list {plural}: {source}")]
    List {
        plural: &'static str,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("no forwarder on the host's address for echo pod {pod}: {source}")]
    Forward {
        pod: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// An object as `(kind, namespace, name)`; cluster-scoped ones have an
/// empty namespace.
pub type Key = (String, String, String);

/// Live status and generations of the status kinds, read from the API.
pub struct Live {
    /// `{kind, metadata: {namespace, name}, status}` per object: the shape
    /// of the admin API's `/api/status` the assertions read.
    pub status: Vec<Value>,
    pub generations: HashMap<Key, i64>,
}

pub struct Kube {
    // Dropped last: the controller is stopped before (World::stop).
    cluster: testkit::kube::Cluster,
    client: kube::Client,
    resources: HashMap<(String, String), (ApiResource, Scope)>,
    /// Echo pod address -> its forwarder on the host's address (kept for
    /// the whole run: a forwarder cannot be stopped).
    forwards: HashMap<SocketAddr, SocketAddr>,
}

fn kind_of(d: &Value) -> &str {
    d["kind"].as_str().unwrap_or("")
}

fn name_of(d: &Value) -> &str {
    d.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
}

fn namespace_of(d: &Value) -> &str {
    d.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
}

fn describe(d: &Value) -> String {
    format!("{} {}/{}", kind_of(d), namespace_of(d), name_of(d))
}

impl Kube {
    /// Starts etcd + kube-apiserver and applies the repository's CRDs.
    pub async fn start() -> Result<Kube, KubeError> {
        if let Some(reason) = testkit::kube::missing() {
            return Err(KubeError::Unavailable(reason));
        }
        let cluster = testkit::kube::Cluster::try_start().await?;
        cluster.apply_crds(&testkit::kube::Cluster::repo_crds()).await?;
        let client = cluster.client().await?;
        Ok(Kube {
            cluster,
            client,
            resources: HashMap::new(),
            forwards: HashMap::new(),
        })
    }

    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.cluster.kubeconfig
    }

    /// Where the apiserver's and etcd's logs are.
    pub fn dir(&self) -> &std::path::Path {
        self.cluster.dir()
    }

    async fn resource(&mut self, doc: &Value) -> Result<(ApiResource, Scope), KubeError> {
        let api_version = doc["apiVersion"].as_str().unwrap_or("");
        let kind = kind_of(doc);
        let key = (api_version.to_string(), kind.to_string());
        if let Some(r) = self.resources.get(&key) {
            return Ok(r.clone());
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|source| KubeError::Discovery {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                source: Box::new(source),
            })?;
        let r = (ar, caps.scope);
        self.resources.insert(key, r.clone());
        Ok(r)
    }

    async fn api(&mut self, doc: &Value) -> Result<Api<DynamicObject>, KubeError> {
        let (ar, scope) = self.resource(doc).await?;
        Ok(match scope {
            Scope::Namespaced => Api::namespaced_with(self.client.clone(), namespace_of(doc), &ar),
            Scope::Cluster => Api::all_with(self.client.clone(), &ar),
        })
    }

    /// What the API is given for `view` (file mode's cluster view): every
    /// EndpointSlice naming an echo pod's loopback address becomes one
    /// slice per endpoint on that pod's forwarders.
    pub fn api_view(&mut self, view: &[Value]) -> Result<Vec<Value>, KubeError> {
        let mut out = Vec::with_capacity(view.len());
        for d in view {
            if kind_of(d) == "EndpointSlice" && has_loopback_endpoint(d) {
                out.extend(self.forwarded_slices(d)?);
            } else {
                out.push(d.clone());
            }
        }
        // Namespaces first: nothing can be created in a missing one.
        out.sort_by_key(|d| kind_of(d) != "Namespace");
        Ok(out)
    }

    fn forward(&mut self, pod: SocketAddr) -> Result<SocketAddr, KubeError> {
        if let Some(f) = self.forwards.get(&pod) {
            return Ok(*f);
        }
        let f = testkit::kube::forward_from_host(pod).map_err(|source| KubeError::Forward { pod, source })?;
        self.forwards.insert(pod, f);
        Ok(f)
    }

    fn forwarded_slices(&mut self, slice: &Value) -> Result<Vec<Value>, KubeError> {
        let ports: Vec<Value> = slice["ports"].as_array().cloned().unwrap_or_default();
        let mut out = Vec::new();
        let endpoints = slice["endpoints"].as_array().cloned().unwrap_or_default();
        for (i, ep) in endpoints.iter().enumerate() {
            for (j, addr) in ep["addresses"].as_array().into_iter().flatten().enumerate() {
                let Some(ip) = addr.as_str().and_then(|a| a.parse::<IpAddr>().ok()) else {
                    continue;
                };
                let mut own_ports = Vec::new();
                let mut host = None;
                for p in &ports {
                    let Some(port) = p["port"].as_u64().and_then(|n| u16::try_from(n).ok()) else {
                        continue;
                    };
                    let f = self.forward(SocketAddr::new(ip, port))?;
                    host = Some(f.ip());
                    let mut p = p.clone();
                    p["port"] = json!(f.port());
                    own_ports.push(p);
                }
                let Some(host) = host else { continue };
                let mut s = slice.clone();
                s["metadata"]["name"] = json!(format!("{}-{i}-{j}", name_of(slice)));
                s["ports"] = Value::Array(own_ports);
                let mut ep = ep.clone();
                ep["addresses"] = json!([host.to_string()]);
                s["endpoints"] = json!([ep]);
                out.push(s);
            }
        }
        if out.is_empty() {
            out.push(slice.clone());
        }
        Ok(out)
    }

    /// Applies `docs` (an [`Kube::api_view`]) in order; stops at the first
    /// object the apiserver refuses.
    pub async fn apply(&mut self, docs: &[Value]) -> Result<(), KubeError> {
        let params = PatchParams::apply(MANAGER).force();
        for d in docs {
            let api = self.api(d).await?;
            api.patch(name_of(d), &params, &Patch::Apply(d))
                .await
                .map_err(|source| KubeError::Refused {
                    object: describe(d),
                    source: Box::new(source),
                })?;
        }
        Ok(())
    }

    /// Deletes one object (absent is fine).
    pub async fn delete(&mut self, doc: &Value) -> Result<(), KubeError> {
        let api = self.api(doc).await?;
        match api.delete(name_of(doc), &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => Err(KubeError::Delete {
                object: describe(doc),
                source: Box::new(source),
            }),
        }
    }

    /// Deletes `docs` (an [`Kube::api_view`]): the namespaced objects, then
    /// the Namespaces, finalized here (no namespace controller runs) and
    /// waited for, so the next test can create them again.
    pub async fn delete_all(&mut self, docs: &[Value]) -> Result<(), KubeError> {
        let mut first_error = None;
        for d in docs.iter().rev().filter(|d| kind_of(d) != "Namespace") {
            if let Err(e) = self.delete(d).await {
                first_error.get_or_insert(e);
            }
        }
        for ns in docs.iter().filter(|d| kind_of(d) == "Namespace") {
            if let Err(e) = self.delete_namespace(name_of(ns)).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn delete_namespace(&mut self, name: &str) -> Result<(), KubeError> {
        let doc = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        self.delete(&doc).await?;
        // The namespace controller's last step: the `kubernetes` finalizer
        // removed through the finalize subresource; a second delete then
        // removes the Namespace.
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let finalized = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            spec: Some(NamespaceSpec {
                finalizers: Some(Vec::new()),
            }),
            status: None,
        };
        match namespaces
            .replace_subresource("finalize", name, &PostParams::default(), &finalized)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(source) => {
                return Err(KubeError::Finalize {
                    namespace: name.to_string(),
                    source: Box::new(source),
                });
            }
        }
        self.delete(&doc).await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match namespaces.get_opt(name).await {
                Ok(None) => return Ok(()),
                Ok(Some(_)) if Instant::now() > deadline => {
                    return Err(KubeError::NamespaceStays(name.to_string()));
                }
                Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(source) => {
                    return Err(KubeError::Delete {
                        object: format!("Namespace {name}"),
                        source: Box::new(source),
                    });
                }
            }
        }
    }

    /// The status of every Gateway, route and ListenerSet, from the API.
    pub async fn live(&self) -> Result<Live, KubeError> {
        let mut live = Live {
            status: Vec::new(),
            generations: HashMap::new(),
        };
        for (kind, plural) in STATUS_KINDS {
            let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", kind);
            let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|source| KubeError::List {
                    plural,
                    source: Box::new(source),
                })?;
            for o in list.items {
                let ns = o.metadata.namespace.clone().unwrap_or_default();
                let name = o.metadata.name.clone().unwrap_or_default();
                if let Some(g) = o.metadata.generation {
                    live.generations
                        .insert((kind.to_string(), ns.clone(), name.clone()), g);
                }
                live.status.push(json!({
                    "kind": kind,
                    "metadata": {"namespace": ns, "name": name},
                    "status": o.data.get("status").cloned().unwrap_or(Value::Null),
                }));
            }
        }
        Ok(live)
    }
}

fn has_loopback_endpoint(slice: &Value) -> bool {
    slice["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|ep| ep["addresses"].as_array().into_iter().flatten())
        .filter_map(|a| a.as_str()?.parse::<IpAddr>().ok())
        .any(|ip| ip.is_loopback())
}
