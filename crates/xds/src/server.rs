//! The tonic service.

use std::pin::Pin;
use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::cache::SnapshotCache;
use crate::observer::Observer;

#[derive(Clone)]
pub struct AdsServer {
    cache: SnapshotCache,
    observer: Arc<dyn Observer>,
    require_identity: bool,
}

/// Which node a stream may ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    /// Plaintext xDS (loopback `serve`): any node.
    Any,
    /// The one node the client certificate names (`None`: it names none,
    /// or several); `identity` (its URI SANs) is for the refusal's report.
    Node { node: Option<String>, identity: String },
}

impl Binding {
    /// `Err` (`PermissionDenied`) when `node` may not be served.
    pub(crate) fn check(&self, node: &str, observer: &dyn Observer) -> Result<(), Status> {
        match self {
            Binding::Any => Ok(()),
            Binding::Node { node: Some(n), .. } if n == node => Ok(()),
            Binding::Node { identity, .. } => {
                observer.refused(node, identity);
                tracing::warn!(
                    node,
                    identity = identity.as_str(),
                    "xDS stream refused: the client certificate does not name this node"
                );
                Err(Status::permission_denied(format!(
                    "the client certificate ({identity}) does not entitle node {node:?}"
                )))
            }
        }
    }
}

impl AdsServer {
    pub fn new(cache: SnapshotCache, observer: Arc<dyn Observer>) -> Self {
        Self {
            cache,
            observer,
            require_identity: false,
        }
    }

    /// Serves a stream only the node its connection's client certificate
    /// names ([`crate::tls::PeerIdentity`]); a stream on a connection
    /// without one (not accepted through [`crate::tls::incoming`]) is
    /// refused.
    pub fn require_identity(mut self) -> Self {
        self.require_identity = true;
        self
    }

    fn binding<T>(&self, request: &Request<T>) -> Binding {
        if !self.require_identity {
            return Binding::Any;
        }
        match request.extensions().get::<crate::tls::PeerIdentity>() {
            Some(peer) => Binding::Node {
                node: peer.node().map(str::to_string),
                identity: if peer.uris.is_empty() {
                    "no URI SAN".into()
                } else {
                    peer.uris.join(", ")
                },
            },
            None => Binding::Node {
                node: None,
                identity: "no client certificate".into(),
            },
        }
    }

    pub fn into_service(self) -> AggregatedDiscoveryServiceServer<Self> {
        AggregatedDiscoveryServiceServer::new(self)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for AdsServer {
    type StreamAggregatedResourcesStream = BoxStream<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = BoxStream<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let binding = self.binding(&request);
        let (tx, rx) = mpsc::channel(16);
        let stream = crate::sotw::Stream::new(self.cache.clone(), self.observer.clone(), tx, binding);
        tokio::spawn(stream.run(request.into_inner()));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let binding = self.binding(&request);
        let (tx, rx) = mpsc::channel(16);
        let stream = crate::delta::Stream::new(self.cache.clone(), self.observer.clone(), tx, binding);
        tokio::spawn(stream.run(request.into_inner()));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Refusals(Mutex<Vec<(String, String)>>);
    impl Observer for Refusals {
        fn refused(&self, node: &str, identity: &str) {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((node.into(), identity.into()));
        }
    }

    #[test]
    fn a_stream_is_served_only_the_node_its_certificate_names() {
        let o = Refusals::default();
        assert!(Binding::Any.check("any/node", &o).is_ok());
        let bound = Binding::Node {
            node: Some("infra/gw".into()),
            identity: "spiffe://portcullis/gateway/infra/gw".into(),
        };
        assert!(bound.check("infra/gw", &o).is_ok());
        let e = bound.check("infra/other", &o).expect_err("another node");
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        // No identity (no certificate, no or several URI SANs): nothing.
        let none = Binding::Node {
            node: None,
            identity: "no client certificate".into(),
        };
        assert!(none.check("infra/gw", &o).is_err());
        assert!(none.check("", &o).is_err());
        let seen = o.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(
            seen,
            vec![
                (
                    "infra/other".to_string(),
                    "spiffe://portcullis/gateway/infra/gw".to_string()
                ),
                ("infra/gw".to_string(), "no client certificate".to_string()),
                (String::new(), "no client certificate".to_string()),
            ]
        );
    }

    #[test]
    fn a_certificate_naming_several_nodes_names_none() {
        let peer = crate::tls::PeerIdentity {
            remote: None,
            nodes: vec!["a/b".into(), "c/d".into()],
            uris: vec![],
        };
        assert_eq!(peer.node(), None);
        let one = crate::tls::PeerIdentity {
            nodes: vec!["a/b".into()],
            ..Default::default()
        };
        assert_eq!(one.node(), Some("a/b"));
    }
}
