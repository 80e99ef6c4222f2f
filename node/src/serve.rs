//! The operations endpoints: `/metrics` (Prometheus), `/healthz` (the process answers) and
//! `/readyz` (registered with the container runtime).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// The endpoints' routes.
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(metrics)
}

/// Serves [`router`] on `listener` until the process ends.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    if let Err(error) = axum::serve(listener, router(metrics)).await {
        tracing::error!(%error, "the operations endpoints stopped");
    }
}

async fn metrics_text(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}

async fn ready(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    if metrics.connected.get() == 1 {
        (StatusCode::OK, "registered with the container runtime")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not registered with the container runtime",
        )
    }
}
