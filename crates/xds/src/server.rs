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
}

impl AdsServer {
    pub fn new(cache: SnapshotCache, observer: Arc<dyn Observer>) -> Self {
        Self { cache, observer }
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
        let (tx, rx) = mpsc::channel(16);
        let stream = crate::sotw::Stream::new(self.cache.clone(), self.observer.clone(), tx);
        tokio::spawn(stream.run(request.into_inner()));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let (tx, rx) = mpsc::channel(16);
        let stream = crate::delta::Stream::new(self.cache.clone(), self.observer.clone(), tx);
        tokio::spawn(stream.run(request.into_inner()));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
