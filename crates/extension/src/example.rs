//! The example extension server (README "Writing an extension"), built on
//! the generated server trait. `examples/extension_server.rs` runs it from
//! the command line; tests run it in-process with [`serve_tcp`] or [`serve_unix`].
//!
//! What it does:
//! - `PostRouteModify`: adds the response header
//!   `x-extension-route: <route name>` to every route it is sent.
//! - `PostHTTPListenerModify`: when the listener's context carries an
//!   extension resource of kind `BasicAuth` (any group) with
//!   `spec.users` = htpasswd lines (`user:{SHA}base64(sha1(password))`, the
//!   format Envoy's filter accepts), inserts Envoy's
//!   `envoy.filters.http.basic_auth` filter with those users before the
//!   router of every HTTP connection manager of the listener.
//! - every other hook: replies "unchanged" (`PostTranslateModify` returns
//!   the lists it was given, which the protocol makes the final lists).
//!
//! Test behaviours ([`Behaviour`]): sleep on routes whose name contains a
//! pattern (to run past the caller's deadline), or reply to such routes
//! with a route Envoy would refuse (NACK): its path regex `(` is not RE2.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption, header_value_option};
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{Route, route_match};
use envoy_types::pb::envoy::extensions::filters::http::basic_auth::v3::BasicAuth;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_filter,
};
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use tonic::{Request, Response, Status};

use crate::proto;
use crate::proto::envoy_gateway_extension_server::{EnvoyGatewayExtension, EnvoyGatewayExtensionServer};

/// The header the example adds to routes.
pub const ROUTE_HEADER: &str = "x-extension-route";
/// The name of the basic-auth filter it inserts.
pub const BASIC_AUTH_FILTER: &str = "envoy.filters.http.basic_auth";
const HCM_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

/// Test behaviours of the example server.
#[derive(Clone, Debug, Default)]
pub struct Behaviour {
    /// Routes whose name contains this are answered after `sleep`.
    pub sleep_route: Option<String>,
    pub sleep: Duration,
    /// Routes whose name contains this get a reply Envoy would NACK.
    pub nack_route: Option<String>,
}

/// Calls received, per rpc (tests count them).
#[derive(Debug, Default)]
pub struct Received {
    pub route: AtomicU64,
    pub virtual_host: AtomicU64,
    pub listener: AtomicU64,
    pub cluster: AtomicU64,
    pub endpoints: AtomicU64,
    pub translate: AtomicU64,
}

/// The example extension.
#[derive(Clone, Debug, Default)]
pub struct ExampleExtension {
    pub behaviour: Behaviour,
    pub received: Arc<Received>,
}

impl ExampleExtension {
    pub fn new(behaviour: Behaviour) -> Self {
        Self {
            behaviour,
            received: Arc::default(),
        }
    }

    /// The tonic service, for a `tonic::transport::Server`.
    pub fn into_service(self) -> EnvoyGatewayExtensionServer<Self> {
        EnvoyGatewayExtensionServer::new(self)
    }
}

/// `route` with the example's header added.
pub fn add_route_header(mut route: Route) -> Route {
    let value = route.name.clone();
    route.response_headers_to_add.push(HeaderValueOption {
        header: Some(HeaderValue {
            key: ROUTE_HEADER.to_string(),
            value,
            ..Default::default()
        }),
        append_action: header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        ..Default::default()
    });
    route
}

/// The htpasswd lines of the first `BasicAuth` resource, if any.
fn basic_auth_users(resources: &[proto::ExtensionResource]) -> Result<Option<String>, Status> {
    for r in resources {
        let v: serde_json::Value = serde_json::from_slice(&r.unstructured_bytes)
            .map_err(|e| Status::invalid_argument(format!("extension resource is not JSON: {e}")))?;
        if v.get("kind").and_then(|k| k.as_str()) != Some("BasicAuth") {
            continue;
        }
        let users = v
            .pointer("/spec/users")
            .and_then(|u| u.as_array())
            .ok_or_else(|| {
                Status::invalid_argument("BasicAuth: spec.users must be a list of htpasswd lines")
            })?;
        let mut lines = Vec::new();
        for u in users {
            let line = u
                .as_str()
                .ok_or_else(|| Status::invalid_argument("BasicAuth: spec.users entries must be strings"))?;
            lines.push(line.to_string());
        }
        return Ok(Some(lines.join("\n")));
    }
    Ok(None)
}

/// Inserts the basic-auth filter before the router of every HTTP
/// connection manager of `listener`; `false` when there was none.
pub fn add_basic_auth(listener: &mut Listener, users: &str) -> Result<bool, Status> {
    let config = BasicAuth {
        users: Some(DataSource {
            specifier: Some(data_source::Specifier::InlineString(users.to_string())),
            ..Default::default()
        }),
        ..Default::default()
    };
    let filter = HttpFilter {
        name: BASIC_AUTH_FILTER.to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(Any {
            type_url: BasicAuth::type_url(),
            value: config.encode_to_vec(),
        })),
        ..Default::default()
    };
    let mut changed = false;
    let chains = listener
        .filter_chains
        .iter_mut()
        .chain(listener.default_filter_chain.as_mut());
    for chain in chains {
        for f in &mut chain.filters {
            let Some(filter::ConfigType::TypedConfig(any)) = &mut f.config_type else {
                continue;
            };
            if any.type_url != HCM_TYPE {
                continue;
            }
            let mut hcm = HttpConnectionManager::decode(any.value.as_slice())
                .map_err(|e| Status::invalid_argument(format!("listener {}: {e}", listener.name)))?;
            if hcm.http_filters.iter().any(|h| h.name == BASIC_AUTH_FILTER) {
                continue;
            }
            // The router is last; the filter goes right before it.
            let at = hcm.http_filters.len().saturating_sub(1);
            hcm.http_filters.insert(at, filter.clone());
            any.value = hcm.encode_to_vec();
            changed = true;
        }
    }
    Ok(changed)
}

#[tonic::async_trait]
impl EnvoyGatewayExtension for ExampleExtension {
    async fn post_route_modify(
        &self,
        request: Request<proto::PostRouteModifyRequest>,
    ) -> Result<Response<proto::PostRouteModifyResponse>, Status> {
        self.received.route.fetch_add(1, Ordering::Relaxed);
        let Some(route) = request.into_inner().route else {
            return Ok(Response::new(proto::PostRouteModifyResponse { route: None }));
        };
        let b = &self.behaviour;
        if let Some(p) = &b.sleep_route
            && route.name.contains(p.as_str())
        {
            tokio::time::sleep(b.sleep).await;
        }
        let mut route = add_route_header(route);
        if let Some(p) = &b.nack_route
            && route.name.contains(p.as_str())
            && let Some(m) = route.r#match.as_mut()
        {
            m.path_specifier = Some(route_match::PathSpecifier::SafeRegex(RegexMatcher {
                regex: "(".to_string(),
                ..Default::default()
            }));
        }
        Ok(Response::new(proto::PostRouteModifyResponse {
            route: Some(route),
        }))
    }

    async fn post_virtual_host_modify(
        &self,
        _request: Request<proto::PostVirtualHostModifyRequest>,
    ) -> Result<Response<proto::PostVirtualHostModifyResponse>, Status> {
        self.received.virtual_host.fetch_add(1, Ordering::Relaxed);
        Ok(Response::new(proto::PostVirtualHostModifyResponse {
            virtual_host: None,
        }))
    }

    async fn post_http_listener_modify(
        &self,
        request: Request<proto::PostHttpListenerModifyRequest>,
    ) -> Result<Response<proto::PostHttpListenerModifyResponse>, Status> {
        self.received.listener.fetch_add(1, Ordering::Relaxed);
        let req = request.into_inner();
        let resources = req
            .post_listener_context
            .map(|c| c.extension_resources)
            .unwrap_or_default();
        let (Some(mut listener), Some(users)) = (req.listener, basic_auth_users(&resources)?) else {
            return Ok(Response::new(proto::PostHttpListenerModifyResponse {
                listener: None,
            }));
        };
        let changed = add_basic_auth(&mut listener, &users)?;
        Ok(Response::new(proto::PostHttpListenerModifyResponse {
            listener: changed.then_some(listener),
        }))
    }

    async fn post_cluster_modify(
        &self,
        _request: Request<proto::PostClusterModifyRequest>,
    ) -> Result<Response<proto::PostClusterModifyResponse>, Status> {
        self.received.cluster.fetch_add(1, Ordering::Relaxed);
        Ok(Response::new(proto::PostClusterModifyResponse { cluster: None }))
    }

    async fn post_endpoints_modify(
        &self,
        _request: Request<proto::PostEndpointsModifyRequest>,
    ) -> Result<Response<proto::PostEndpointsModifyResponse>, Status> {
        self.received.endpoints.fetch_add(1, Ordering::Relaxed);
        Ok(Response::new(proto::PostEndpointsModifyResponse {
            load_assignment: None,
        }))
    }

    async fn post_translate_modify(
        &self,
        request: Request<proto::PostTranslateModifyRequest>,
    ) -> Result<Response<proto::PostTranslateModifyResponse>, Status> {
        self.received.translate.fetch_add(1, Ordering::Relaxed);
        let r = request.into_inner();
        Ok(Response::new(proto::PostTranslateModifyResponse {
            clusters: r.clusters,
            secrets: r.secrets,
            listeners: r.listeners,
            routes: r.routes,
        }))
    }
}

/// Serves `ext` on a bound TCP listener until `shutdown` resolves.
pub async fn serve_tcp(
    ext: ExampleExtension,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .add_service(ext.into_service())
        // TCP_NODELAY: tonic sets it only on listeners it binds itself;
        // without it Nagle and delayed ACKs add ~40 ms to small replies.
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await
}

/// Serves `ext` on a unix socket at `path` (replacing a stale socket file)
/// until `shutdown` resolves.
pub async fn serve_unix(
    ext: ExampleExtension,
    path: &Path,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let _ = std::fs::remove_file(path);
    let listener = tokio::net::UnixListener::bind(path).map_err(|source| ServeError::Bind {
        address: path.display().to_string(),
        source,
    })?;
    tonic::transport::Server::builder()
        .add_service(ext.into_service())
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::UnixListenerStream::new(listener),
            shutdown,
        )
        .await
        .map_err(ServeError::Serve)
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {address}: {source}")]
    Bind { address: String, source: std::io::Error },
    #[error("extension server: {0}")]
    Serve(#[from] tonic::transport::Error),
}
