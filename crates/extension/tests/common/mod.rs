//! An in-process extension server for the client tests: it tags every
//! resource it is sent (appends its tag to the name) so a test sees which
//! server modified what and in which order, and can be told to fail, sleep
//! or reply unset.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use extension::config::{ExtensionConfig, ManagerConfig, ServiceAddress};
use extension::proto;
use extension::proto::envoy_gateway_extension_server::{EnvoyGatewayExtension, EnvoyGatewayExtensionServer};
use extension::{Chain, ChainOptions};
use tonic::{Request, Response, Status};
use translate::extension::Hook;

#[derive(Clone, Debug)]
pub enum Mode {
    /// Append the tag to the resource's name.
    Tag,
    /// Reply with the message unset ("unchanged").
    Unset,
    /// The first `n` calls fail with `code`, then `Tag`.
    FailFirst(u32, tonic::Code),
    /// Sleep, then `Tag`.
    Sleep(Duration),
    /// Reply with a route whose name is this many bytes long.
    Big(usize),
}

/// What one call carried: `(hook, hostnames, resource kinds, policy kinds)`.
pub type Context = (Hook, Vec<String>, Vec<String>, Vec<String>);

#[derive(Debug, Default)]
pub struct Seen {
    pub calls: AtomicU64,
    /// Per call: `(hook, hostnames, resource kinds, policy kinds)`.
    pub contexts: Mutex<Vec<Context>>,
}

#[derive(Clone)]
pub struct Tagger {
    pub tag: String,
    pub mode: Mode,
    pub seen: Arc<Seen>,
    failures: Arc<AtomicU32>,
}

impl Tagger {
    pub fn new(tag: &str, mode: Mode) -> Self {
        Self {
            tag: tag.into(),
            mode,
            seen: Arc::default(),
            failures: Arc::default(),
        }
    }

    pub fn calls(&self) -> u64 {
        self.seen.calls.load(Ordering::SeqCst)
    }

    /// Fails, sleeps or passes, per the mode; `Ok(true)` = tag, `Ok(false)`
    /// = reply unset.
    async fn behave(&self) -> Result<bool, Status> {
        self.seen.calls.fetch_add(1, Ordering::SeqCst);
        match &self.mode {
            Mode::Tag | Mode::Big(_) => Ok(true),
            Mode::Unset => Ok(false),
            Mode::FailFirst(n, code) => {
                if self.failures.fetch_add(1, Ordering::SeqCst) < *n {
                    Err(Status::new(*code, format!("{} fails on purpose", self.tag)))
                } else {
                    Ok(true)
                }
            }
            Mode::Sleep(d) => {
                tokio::time::sleep(*d).await;
                Ok(true)
            }
        }
    }

    fn note(
        &self,
        hook: Hook,
        hostnames: Vec<String>,
        res: &[proto::ExtensionResource],
        pol: &[proto::ExtensionResource],
    ) {
        let kinds = |rs: &[proto::ExtensionResource]| {
            rs.iter()
                .map(|r| {
                    serde_json::from_slice::<serde_json::Value>(&r.unstructured_bytes)
                        .ok()
                        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
                        .unwrap_or_default()
                })
                .collect()
        };
        self.seen
            .contexts
            .lock()
            .expect("lock")
            .push((hook, hostnames, kinds(res), kinds(pol)));
    }
}

#[tonic::async_trait]
impl EnvoyGatewayExtension for Tagger {
    async fn post_route_modify(
        &self,
        request: Request<proto::PostRouteModifyRequest>,
    ) -> Result<Response<proto::PostRouteModifyResponse>, Status> {
        let r = request.into_inner();
        let ctx = r.post_route_context.unwrap_or_default();
        self.note(
            Hook::Route,
            ctx.hostnames,
            &ctx.extension_resources,
            &ctx.extension_policies,
        );
        let tag = self.behave().await?;
        let route = r.route.filter(|_| tag).map(|mut route| {
            match self.mode {
                Mode::Big(n) => route.name = "x".repeat(n),
                _ => route.name.push_str(&self.tag),
            }
            route
        });
        Ok(Response::new(proto::PostRouteModifyResponse { route }))
    }

    async fn post_virtual_host_modify(
        &self,
        request: Request<proto::PostVirtualHostModifyRequest>,
    ) -> Result<Response<proto::PostVirtualHostModifyResponse>, Status> {
        self.note(Hook::VirtualHost, vec![], &[], &[]);
        let tag = self.behave().await?;
        let virtual_host = request.into_inner().virtual_host.filter(|_| tag).map(|mut v| {
            v.name.push_str(&self.tag);
            v
        });
        Ok(Response::new(proto::PostVirtualHostModifyResponse {
            virtual_host,
        }))
    }

    async fn post_http_listener_modify(
        &self,
        request: Request<proto::PostHttpListenerModifyRequest>,
    ) -> Result<Response<proto::PostHttpListenerModifyResponse>, Status> {
        let r = request.into_inner();
        let ctx = r.post_listener_context.unwrap_or_default();
        self.note(Hook::HttpListener, vec![], &ctx.extension_resources, &[]);
        let tag = self.behave().await?;
        let listener = r.listener.filter(|_| tag).map(|mut l| {
            l.name.push_str(&self.tag);
            l
        });
        Ok(Response::new(proto::PostHttpListenerModifyResponse { listener }))
    }

    async fn post_cluster_modify(
        &self,
        request: Request<proto::PostClusterModifyRequest>,
    ) -> Result<Response<proto::PostClusterModifyResponse>, Status> {
        let r = request.into_inner();
        let ctx = r.post_cluster_context.unwrap_or_default();
        self.note(Hook::Cluster, vec![], &ctx.backend_extension_resources, &[]);
        let tag = self.behave().await?;
        let cluster = r.cluster.filter(|_| tag).map(|mut c| {
            c.name.push_str(&self.tag);
            c
        });
        Ok(Response::new(proto::PostClusterModifyResponse { cluster }))
    }

    async fn post_endpoints_modify(
        &self,
        request: Request<proto::PostEndpointsModifyRequest>,
    ) -> Result<Response<proto::PostEndpointsModifyResponse>, Status> {
        self.note(Hook::Endpoints, vec![], &[], &[]);
        let tag = self.behave().await?;
        let load_assignment = request.into_inner().load_assignment.filter(|_| tag).map(|mut c| {
            c.cluster_name.push_str(&self.tag);
            c
        });
        Ok(Response::new(proto::PostEndpointsModifyResponse {
            load_assignment,
        }))
    }

    async fn post_translate_modify(
        &self,
        request: Request<proto::PostTranslateModifyRequest>,
    ) -> Result<Response<proto::PostTranslateModifyResponse>, Status> {
        let r = request.into_inner();
        let ctx = r.post_translate_context.unwrap_or_default();
        self.note(Hook::Translation, vec![], &[], &ctx.extension_resources);
        let tag = self.behave().await?;
        let mut clusters = r.clusters;
        let mut listeners = r.listeners;
        if tag {
            for c in &mut clusters {
                c.name.push_str(&self.tag);
            }
            for l in &mut listeners {
                l.name.push_str(&self.tag);
            }
        }
        Ok(Response::new(proto::PostTranslateModifyResponse {
            clusters,
            secrets: r.secrets,
            listeners,
            routes: r.routes,
        }))
    }
}

/// A server on its own runtime; stops when dropped.
pub struct Server {
    pub address: ServiceAddress,
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Serves `svc` on 127.0.0.1 (any port), optionally with TLS.
pub fn serve_tcp<S: EnvoyGatewayExtension>(svc: S, tls: Option<tonic::transport::ServerTlsConfig>) -> Server {
    let rt = runtime();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    serve_tcp_on(svc, tls, rt, listener, port)
}

/// Serves `svc` on a given (free) port — for "the server comes up later".
pub fn serve_tcp_port<S: EnvoyGatewayExtension>(svc: S, port: u16) -> Server {
    let rt = runtime();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
        .expect("bind");
    serve_tcp_on(svc, None, rt, listener, port)
}

fn serve_tcp_on<S: EnvoyGatewayExtension>(
    svc: S,
    tls: Option<tonic::transport::ServerTlsConfig>,
    rt: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
    port: u16,
) -> Server {
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls).expect("server tls");
    }
    let router = builder.add_service(EnvoyGatewayExtensionServer::new(svc));
    rt.spawn(router.serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)));
    Server {
        address: ServiceAddress::Ip {
            address: "127.0.0.1".parse().expect("ip"),
            port,
        },
        rt: Some(rt),
    }
}

/// Serves `svc` on a unix socket at `path`.
pub fn serve_unix<S: EnvoyGatewayExtension>(svc: S, path: &Path) -> Server {
    let rt = runtime();
    let _ = std::fs::remove_file(path);
    let listener = {
        let _g = rt.enter();
        tokio::net::UnixListener::bind(path).expect("bind unix")
    };
    let router = tonic::transport::Server::builder().add_service(EnvoyGatewayExtensionServer::new(svc));
    rt.spawn(router.serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)));
    Server {
        address: ServiceAddress::Unix {
            path: path.to_path_buf(),
        },
        rt: Some(rt),
    }
}

/// A free TCP port nobody listens on (bound then released).
pub fn free_port() -> u16 {
    testkit::port::free()
}

pub fn all_hooks() -> Vec<Hook> {
    vec![
        Hook::Route,
        Hook::VirtualHost,
        Hook::HttpListener,
        Hook::Cluster,
        Hook::Endpoints,
        Hook::Translation,
    ]
}

/// A manager for `address` with every hook, a short timeout and quick
/// retries.
pub fn manager(name: &str, address: &ServiceAddress) -> ManagerConfig {
    let mut m = ManagerConfig::new(name, address.clone(), all_hooks());
    m.timeout = Duration::from_millis(1500);
    m.retry.initial_backoff = Duration::from_millis(10);
    m.retry.max_backoff = Duration::from_millis(50);
    m
}

pub fn chain(managers: Vec<ManagerConfig>) -> Chain {
    Chain::new(&ExtensionConfig { managers }, ChainOptions::default()).expect("chain")
}

pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("portcullis-ext-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}
