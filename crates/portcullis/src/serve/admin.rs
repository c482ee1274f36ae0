//! The admin HTTP API: `/metrics`, `/healthz`, `/readyz`, `/api/status`,
//! `/api/config_dump`, `/api/views`; and the optional metrics listener
//! (`/metrics` and health only). Who may read what: `admin_auth`.
//!
//! Nothing here returns key material: `/api/config_dump` passes every
//! resource through `translate::output::redact` (every field Envoy marks
//! sensitive, as Envoy's own dump), and the other endpoints are built from
//! status, diagnostics and views, which never quote Secret data.

use std::sync::Arc;

use axum::Router;
use axum::extract::State as AxState;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;

use super::admin_auth::AdminToken;
use super::state::State;

/// The admin listener's routes; with `token`, everything but health
/// answers `401` without it.
pub fn router(state: Arc<State>, token: Option<Arc<AdminToken>>) -> Router {
    let views = Router::new()
        .route("/metrics", get(metrics))
        .route("/api/status", get(status))
        .route("/api/config_dump", get(config_dump))
        .route("/api/views", get(views));
    let views = match token {
        // `route_layer`: an unknown path is still a plain 404.
        Some(token) => views.route_layer(axum::middleware::from_fn_with_state(
            token,
            super::admin_auth::require_token,
        )),
        None => views,
    };
    health().merge(views).with_state(state)
}

/// The metrics listener's routes (`--metrics-address`): `/metrics` and
/// health, never a view, never a token.
pub fn metrics_router(state: Arc<State>) -> Router {
    health().route("/metrics", get(metrics)).with_state(state)
}

fn health() -> Router<Arc<State>> {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
}

async fn metrics(AxState(state): AxState<Arc<State>>) -> Response {
    state.refresh_provider_metrics();
    state.refresh_extension_metrics();
    state.metrics.refresh_allocator();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}

async fn readyz(AxState(state): AxState<Arc<State>>) -> Response {
    match state.readiness() {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}\n")).into_response(),
    }
}

async fn status(AxState(state): AxState<Arc<State>>) -> Json<serde_json::Value> {
    Json(state.status_document())
}

async fn config_dump(AxState(state): AxState<Arc<State>>) -> Json<serde_json::Value> {
    // Rendered outside the lock (see `state::Current::output`).
    let (generation, output) = {
        let cur = state.read();
        (cur.generation, cur.output.clone())
    };
    let gateways: serde_json::Map<String, serde_json::Value> = output
        .as_deref()
        .map(|o| {
            o.gateways
                .iter()
                // Key material is redacted as in Envoy's own config dump.
                .map(|(k, g)| {
                    let redacted = translate::output::redact::gateway(g);
                    (k.clone(), translate::output::gateway_xds_to_json(&redacted))
                })
                .collect()
        })
        .unwrap_or_default();
    Json(serde_json::json!({ "generation": generation, "gateways": gateways }))
}

async fn views(AxState(state): AxState<Arc<State>>) -> Json<serde_json::Value> {
    let (inputs, output) = {
        let cur = state.read();
        (cur.inputs.clone(), cur.output.clone())
    };
    let v = match (&inputs, &output) {
        (Some(i), Some(o)) => crate::views::build(&i.loaded.inputs, o),
        _ => Default::default(),
    };
    Json(serde_json::to_value(v).unwrap_or_default())
}
