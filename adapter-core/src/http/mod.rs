//! The endpoints every adapter serves besides its scheduler's verbs, and the helpers those
//! verbs share (parsing with the offending field named, timing, error answers).
//!
//! | path | method | what |
//! |---|---|---|
//! | `/v1/profiles` | POST | node profilers post profiles (bearer token) |
//! | `/v1/outcomes` | POST | measured co-location outcomes (bearer token) |
//! | `/v1/predict` | POST | the engine's prediction for a group on a GPU model (bearer token) |
//! | `/v1/estimate` | POST | what the engine expects of one job (a keyed id, a declaration) alone on each GPU model (bearer token) |
//! | `/v1/knowledge` | GET | what the knowledge base holds, and per GPU model what the cluster taught (bearer token) |
//! | `/healthz`, `/readyz`, `/metrics` | GET | liveness, readiness, Prometheus |
//!
//! Every body is size-bounded and every request time-bounded ([`router`]). A body that does
//! not parse gets `400` with the offending field named; the process never panics on input.
//! The front-end's scheduler verbs answer only a caller with the scheduler's credential
//! ([`crate::SchedulerAuth`]): `401` without one, `403` with a wrong token.
//!
//! The module's parts: `budget` (the memory bodies in flight may take), `auth` (who may call
//! what), [`answer`] (parsing with the field named, timing, error answers), `checks` (what the
//! intake refuses before the engine sees it) and `intake` (the core's endpoints).

pub mod answer;
mod auth;
mod budget;
mod checks;
mod intake;

pub use answer::{Failure, parse, timed};
pub use tandem_wire::intake::{
    EstimateRequest, MAX_BATCH_ITEMS, OutcomesRequest, PredictRequest, ProfileRecord,
    ProfilesAnswer, ProfilesRequest, TOO_MANY_ITEMS, bounded,
};

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware::{self};
use axum::response::IntoResponse;
use axum::routing::{get, post};

use tower_http::timeout::TimeoutLayer;

use crate::{Core, Frontend};

use auth::authenticate;
use budget::{BodyBudget, KIB, admit};
use intake::{estimate, knowledge, metrics, outcomes, predict, profiles};

/// The whole HTTP surface of an adapter: the core's endpoints and `frontend`'s verbs, under
/// the core's limits.
pub fn router<F: Frontend>(core: Arc<Core>, frontend: Arc<F>) -> Router {
    let limits = core.limits;
    let budget = Arc::new(BodyBudget {
        permits: tokio::sync::Semaphore::new(limits.max_inflight_body_bytes.div_ceil(KIB)),
        max_body_bytes: limits.max_body_bytes,
        metrics: Arc::clone(&core.metrics),
    });
    core.metrics.expect_verbs(F::VERBS);
    let ready = Arc::clone(&frontend);
    let readiness = Arc::clone(&core);
    let auth_core = Arc::clone(&core);
    Router::new()
        .route("/v1/profiles", post(profiles))
        .route("/v1/outcomes", post(outcomes))
        .route("/v1/predict", post(predict))
        .route("/v1/estimate", post(estimate))
        .route("/v1/knowledge", get(knowledge))
        .route("/metrics", get(metrics))
        .with_state(core)
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || async move {
                if ready.is_ready() && readiness.is_ready() {
                    (StatusCode::OK, "ready").into_response()
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the view of the cluster is not synced",
                    )
                        .into_response()
                }
            }),
        )
        .merge(
            frontend
                .routes()
                .layer(middleware::from_fn_with_state(auth_core, authenticate)),
        )
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            limits.request_timeout,
        ))
        .layer(middleware::from_fn_with_state(budget, admit))
}
