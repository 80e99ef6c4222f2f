//! The endpoints every adapter serves besides its scheduler's verbs, and the helpers those
//! verbs share (parsing with the offending field named, timing, error answers).
//!
//! | path | method | what |
//! |---|---|---|
//! | `/v1/profiles` | POST | node profilers post profiles (bearer token) |
//! | `/v1/outcomes` | POST | measured co-location outcomes (bearer token) |
//! | `/v1/predict` | POST | the engine's prediction for a group on a GPU model (bearer token) |
//! | `/v1/knowledge` | GET | what the knowledge base holds (bearer token) |
//! | `/healthz`, `/readyz`, `/metrics` | GET | liveness, readiness, Prometheus |
//!
//! Every body is size-bounded and every request time-bounded ([`router`]). A body that does
//! not parse gets `400` with the offending field named; the process never panics on input.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tandem_api::{Assignment, GpuSpec, Job, Outcome, Profile};
use tower_http::timeout::TimeoutLayer;

use crate::engine::failed;
use crate::identity::is_keyed;
use crate::{Core, Frontend, ObserveError};

/// The whole HTTP surface of an adapter: the core's endpoints and `frontend`'s verbs, under
/// the core's limits.
pub fn router<F: Frontend>(core: Arc<Core>, frontend: Arc<F>) -> Router {
    let limits = core.limits;
    let ready = Arc::clone(&frontend);
    let readiness = Arc::clone(&core);
    Router::new()
        .route("/v1/profiles", post(profiles))
        .route("/v1/outcomes", post(outcomes))
        .route("/v1/predict", post(predict))
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
        .merge(frontend.routes())
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            limits.request_timeout,
        ))
}

/// An answer that is not the verb's normal result.
#[derive(Debug)]
pub struct Failure {
    /// The status to answer with.
    pub status: StatusCode,
    /// What went wrong, for the caller.
    pub message: String,
}

impl Failure {
    /// A failure with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (
            self.status,
            axum::Json(serde_json::json!({ "error": self.message })),
        )
            .into_response()
    }
}

impl From<ObserveError> for Failure {
    fn from(error: ObserveError) -> Self {
        let status = match &error {
            ObserveError::NotLeader(_) | ObserveError::Store(_) | ObserveError::Call(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ObserveError::Engine(e) if e.is_refusal() => StatusCode::BAD_REQUEST,
            ObserveError::Engine(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, error.to_string())
    }
}

/// Parses a JSON body of request `what`, naming the field that is wrong.
pub fn parse<T: DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, Failure> {
    let mut json = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut json).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            String::new()
        } else {
            format!(" at `{path}`")
        };
        Failure::new(
            StatusCode::BAD_REQUEST,
            format!("invalid {what} request{at}: {}", e.into_inner()),
        )
    })
}

/// Times and counts one verb; `Err` answers are counted as `rejected` (4xx) or `error`.
pub async fn timed<T: IntoResponse>(
    core: &Core,
    verb: &str,
    work: impl Future<Output = Result<T, Failure>>,
) -> Response {
    let started = Instant::now();
    let answer = work.await;
    let result = match &answer {
        Ok(_) => "ok",
        Err(f) if f.status.is_client_error() => "rejected",
        Err(_) => "error",
    };
    if let Err(f) = &answer {
        // The message goes to the caller only: a rejected body may quote what it was sent,
        // and logs must never carry names (DESIGN §6).
        tracing::warn!(verb, status = %f.status, "request failed");
    }
    core.metrics
        .record(verb, result, started.elapsed().as_secs_f64());
    match answer {
        Ok(body) => body.into_response(),
        Err(f) => f.into_response(),
    }
}

/// Checks the intake's bearer token.
fn authorize(core: &Core, headers: &HeaderMap) -> Result<(), Failure> {
    let Some(expected) = &core.intake_token else {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "the intake is disabled: start the adapter with --intake-token-file",
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    // Compare without an early exit, so timing does not reveal a matching prefix.
    let same = given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0_u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if same {
        Ok(())
    } else {
        Err(Failure::new(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token",
        ))
    }
}

/// One profile posted by a node profiler.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileRecord {
    /// Keyed job id (32 hex digits; see [`crate::identity`]).
    pub job: String,
    /// The measured profile.
    pub profile: Profile,
}

/// Body of `POST /v1/profiles`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilesRequest {
    /// The profiles.
    pub profiles: Vec<ProfileRecord>,
}

/// Answer of `POST /v1/profiles`: where each profile was filed, in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfilesAnswer {
    /// Cluster and uncertainty per profile.
    pub assignments: Vec<Assignment>,
}

fn check_keyed<'a>(ids: impl IntoIterator<Item = (String, &'a str)>) -> Result<(), Failure> {
    for (field, id) in ids {
        if !is_keyed(id) {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "{field} must be a keyed id (32 lower-case hex digits of HMAC-SHA256 with the cluster's secret), got {} characters; names never reach the engine",
                    id.len()
                ),
            ));
        }
    }
    Ok(())
}

async fn profiles(State(core): State<Arc<Core>>, headers: HeaderMap, body: Bytes) -> Response {
    let core2 = Arc::clone(&core);
    timed(&core, "profiles", async move {
        authorize(&core2, &headers)?;
        let request: ProfilesRequest = parse("profiles", &body)?;
        check_keyed(
            request
                .profiles
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("profiles[{i}].job"), r.job.as_str())),
        )?;
        let assignments = core2
            .observe(move |state| {
                request
                    .profiles
                    .iter()
                    .map(|r| {
                        state
                            .recommender()
                            .observe_profile(&r.job, &r.profile)
                            .map_err(failed("observe-profile"))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .await?;
        Ok(axum::Json(ProfilesAnswer { assignments }))
    })
    .await
}

/// Body of `POST /v1/outcomes`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomesRequest {
    /// The outcomes, with keyed job ids.
    pub outcomes: Vec<Outcome>,
}

async fn outcomes(State(core): State<Arc<Core>>, headers: HeaderMap, body: Bytes) -> Response {
    let core2 = Arc::clone(&core);
    timed(&core, "outcomes", async move {
        authorize(&core2, &headers)?;
        let request: OutcomesRequest = parse("outcomes", &body)?;
        check_keyed(request.outcomes.iter().enumerate().flat_map(|(i, o)| {
            o.jobs
                .iter()
                .enumerate()
                .map(move |(j, id)| (format!("outcomes[{i}].jobs[{j}]"), id.as_str()))
        }))?;
        let count = request.outcomes.len();
        core2
            .observe(move |state| {
                request.outcomes.iter().try_for_each(|o| {
                    state
                        .recommender()
                        .observe_outcome(o)
                        .map_err(failed("observe-outcome"))
                })
            })
            .await?;
        Ok(axum::Json(serde_json::json!({ "observed": count })))
    })
    .await
}

/// Body of `POST /v1/predict`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    /// Keyed ids of the jobs sharing the GPU.
    pub jobs: Vec<String>,
    /// The GPU.
    pub gpu: GpuSpec,
}

async fn predict(State(core): State<Arc<Core>>, headers: HeaderMap, body: Bytes) -> Response {
    let core2 = Arc::clone(&core);
    timed(&core, "predict", async move {
        authorize(&core2, &headers)?;
        let request: PredictRequest = parse("predict", &body)?;
        let group: Vec<Job> = request.jobs.iter().map(Job::new).collect();
        let prediction = core2
            .query("predict", move |state| {
                state
                    .recommender()
                    .predict(&group, &request.gpu)
                    .map_err(failed("predict"))
            })
            .await
            .map_err(|e| Failure::from(ObserveError::from(e)))?
            .map_err(|e| Failure::from(ObserveError::from(e)))?;
        Ok(axum::Json(prediction))
    })
    .await
}

async fn knowledge(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    let core2 = Arc::clone(&core);
    timed(&core, "knowledge", async move {
        authorize(&core2, &headers)?;
        let summary = core2
            .query("describe", |state| {
                state.recommender().describe().map_err(failed("describe"))
            })
            .await
            .map_err(|e| Failure::from(ObserveError::from(e)))?
            .map_err(|e| Failure::from(ObserveError::from(e)))?;
        Ok(axum::Json(summary))
    })
    .await
}

async fn metrics(State(core): State<Arc<Core>>) -> Response {
    core.metrics
        .leader
        .set(i64::from(core.leadership.is_leader()));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        core.metrics.encode(),
    )
        .into_response()
}
