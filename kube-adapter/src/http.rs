//! The HTTP surface: extender verbs, the observation intake and the operations endpoints.
//!
//! | path | method | what |
//! |---|---|---|
//! | `/filter`, `/prioritize`, `/bind` | POST | kube-scheduler extender verbs |
//! | `/v1/profiles` | POST | node profilers post profiles (bearer token) |
//! | `/v1/outcomes` | POST | measured co-location outcomes (bearer token) |
//! | `/v1/predict` | POST | the engine's prediction for a group on a GPU model (bearer token) |
//! | `/v1/knowledge` | GET | what the knowledge base holds (bearer token) |
//! | `/healthz`, `/readyz`, `/metrics` | GET | liveness, readiness, Prometheus |
//!
//! Every body is size-bounded and every request time-bounded by layers set up in
//! [`router`]. A body that does not parse gets `400` with the offending field named; the
//! process never panics on input.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tandem_api::{Assignment, GpuSpec, Job, Outcome, Profile};
use tower_http::timeout::TimeoutLayer;

use crate::app::{App, ObserveError};
use crate::cluster::GPU_ANNOTATION;
use crate::extender::{
    self, BindingArgs, BindingResult, ExtenderArgs, FilterResult, HostPriority, NodeList,
};
use crate::identity::is_keyed;

/// Limits on requests.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Longest a request may take.
    pub timeout: Duration,
}

/// The router, with its limits.
pub fn router(app: Arc<App>, limits: Limits) -> Router {
    Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize))
        .route("/bind", post(bind))
        .route("/v1/profiles", post(profiles))
        .route("/v1/outcomes", post(outcomes))
        .route("/v1/predict", post(predict))
        .route("/v1/knowledge", get(knowledge))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            limits.timeout,
        ))
        .with_state(app)
}

/// An answer that is not the verb's normal result.
#[derive(Debug)]
struct Failure {
    status: StatusCode,
    message: String,
}

impl Failure {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
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
            ObserveError::NotLeader(_) | ObserveError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            ObserveError::Engine(e) if matches!(e.source, tandem_host::Error::Engine(_)) => {
                StatusCode::BAD_REQUEST
            }
            ObserveError::Engine(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, error.to_string())
    }
}

/// Parses a JSON body, naming the field that is wrong.
fn parse<T: DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, Failure> {
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
async fn timed<T: IntoResponse>(
    app: &App,
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
    app.metrics
        .record(verb, result, started.elapsed().as_secs_f64());
    match answer {
        Ok(body) => body.into_response(),
        Err(f) => f.into_response(),
    }
}

async fn filter(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let app2 = Arc::clone(&app);
    timed(&app, "filter", async move {
        let args: ExtenderArgs = parse("filter", &body)?;
        let candidates = args.candidates();
        let Some(pod) = app2.gpu_pod(&args.pod) else {
            // Not a pod Tandem manages: every node passes.
            return Ok(axum::Json(pass_all(&args, candidates)));
        };
        if !app2.is_ready() {
            app2.metrics.fail_open("filter");
            return Ok(axum::Json(FilterResult {
                error: "Tandem is starting: its view of the cluster is not synced yet".into(),
                ..FilterResult::default()
            }));
        }
        let view = app2.view();
        let judged = if pod.gpus == 1 {
            app2.scores(&pod, &view, &candidates)
        } else {
            Ok(Default::default())
        }
        .and_then(|scores| extender::filter(&app2.engine, &view, &pod, &candidates, &scores));
        match judged {
            Ok(extender::Filtered {
                passed,
                failed,
                unresolvable,
            }) => {
                tracing::debug!(pod = %pod.job, passed = passed.len(), failed = failed.len() + unresolvable.len(), "filter");
                let mut result = FilterResult {
                    failed_nodes: failed,
                    failed_and_unresolvable_nodes: unresolvable,
                    ..FilterResult::default()
                };
                answer_nodes(&mut result, &args, passed);
                Ok(axum::Json(result))
            }
            Err(error) => {
                // The scheduler skips an ignorable extender that reports an error, and retries
                // the pod otherwise: either way nothing is placed on a guess.
                app2.metrics.engine_errors.inc();
                app2.metrics.fail_open("filter");
                tracing::error!(%error, "filter: engine failed");
                Ok(axum::Json(FilterResult {
                    error: format!("Tandem: {error}"),
                    ..FilterResult::default()
                }))
            }
        }
    })
    .await
}

/// Puts the passing nodes in the result the way the request sent them.
fn answer_nodes(result: &mut FilterResult, args: &ExtenderArgs, passed: Vec<String>) {
    match (&args.node_names, &args.nodes) {
        (None, Some(list)) => {
            let items: Vec<_> = list
                .items
                .iter()
                .filter(|n| {
                    n.metadata
                        .name
                        .as_ref()
                        .is_some_and(|name| passed.contains(name))
                })
                .cloned()
                .collect();
            result.nodes = Some(serde_json::to_value(NodeList { items }).expect("nodes serialize"));
        }
        _ => result.node_names = Some(passed),
    }
}

fn pass_all(args: &ExtenderArgs, candidates: Vec<String>) -> FilterResult {
    let mut result = FilterResult::default();
    answer_nodes(&mut result, args, candidates);
    result
}

async fn prioritize(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let app2 = Arc::clone(&app);
    timed(&app, "prioritize", async move {
        let args: ExtenderArgs = parse("prioritize", &body)?;
        let candidates = args.candidates();
        let zeros = || -> Vec<HostPriority> {
            candidates
                .iter()
                .map(|host| HostPriority {
                    host: host.clone(),
                    score: 0,
                })
                .collect()
        };
        let Some(pod) = app2.gpu_pod(&args.pod) else {
            return Ok(axum::Json(zeros()));
        };
        let view = app2.view();
        let scores = if pod.gpus == 1 {
            app2.scores(&pod, &view, &candidates)
        } else {
            Ok(Default::default())
        };
        match scores {
            Ok(scores) => Ok(axum::Json(extender::prioritize(
                &view,
                &pod,
                &candidates,
                &scores,
            ))),
            Err(error) => {
                // Equal scores leave the choice to the scheduler's own plugins.
                app2.metrics.engine_errors.inc();
                app2.metrics.fail_open("prioritize");
                tracing::error!(%error, "prioritize: engine failed; all nodes score 0");
                Ok(axum::Json(zeros()))
            }
        }
    })
    .await
}

async fn bind(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let app2 = Arc::clone(&app);
    timed(&app, "bind", async move {
        let args: BindingArgs = parse("bind", &body)?;
        let error = match bind_pod(&app2, &args).await {
            Ok(gpus) => {
                tracing::info!(node = %args.node, gpus = %gpus.join(","), "bound");
                String::new()
            }
            Err((reason, message)) => {
                tracing::warn!(node = %args.node, reason, "bind failed");
                message
            }
        };
        Ok(axum::Json(BindingResult { error }))
    })
    .await
}

/// Why a bind failed: a short reason for the log (which never names pods) and the full message
/// for the scheduler (which knows the pod anyway).
type BindFailure = (&'static str, String);

/// Chooses the GPU(s), records them on the pod, then binds it. Returns the GPUs.
async fn bind_pod(app: &App, args: &BindingArgs) -> Result<Vec<String>, BindFailure> {
    let client = app.client().ok_or((
        "fixed cluster",
        "this adapter runs on a fixed cluster file and cannot bind".to_owned(),
    ))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &args.pod_namespace);
    let pod = pods
        .get(&args.pod_name)
        .await
        .map_err(|e| ("cannot read the pod", format!("cannot read the pod: {e}")))?;
    if pod.metadata.uid.as_deref() != Some(args.pod_uid.as_str()) {
        return Err((
            "pod replaced",
            "the pod was replaced since it was scheduled (UID differs)".into(),
        ));
    }
    // One bind at a time: the choice below must see the previous bind's GPU.
    let _guard = app.bind_lock.lock().await;
    let mut gpus = Vec::new();
    if let Some(gp) = app.gpu_pod(&pod) {
        let view = app.view();
        gpus = extender::choose_gpus(&app.engine, &view, &gp, &args.node)
            .map_err(|e| {
                app.metrics.engine_errors.inc();
                ("engine failed", format!("Tandem: {e}"))
            })?
            .map_err(|why| ("no GPU fits any more", format!("Tandem: {why}")))?;
        let patch = serde_json::json!({
            "metadata": { "annotations": { GPU_ANNOTATION: gpus.join(",") } }
        });
        pods.patch(
            &args.pod_name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|e| {
            (
                "cannot annotate the pod",
                format!("cannot annotate the pod with its GPU: {e}"),
            )
        })?;
        app.assume(&args.pod_uid, &args.node, gpus.clone());
    }
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(args.pod_name.clone()),
            namespace: Some(args.pod_namespace.clone()),
            uid: Some(args.pod_uid.clone()),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(args.node.clone()),
            ..ObjectReference::default()
        },
    };
    pods.create_subresource::<Binding, serde_json::Value>(
        "binding",
        &args.pod_name,
        &PostParams::default(),
        &binding,
    )
    .await
    .map_err(|e| ("cannot bind", format!("cannot bind: {e}")))?;
    Ok(gpus)
}

/// Checks the intake's bearer token.
fn authorize(app: &App, headers: &HeaderMap) -> Result<(), Failure> {
    let Some(expected) = &app.intake_token else {
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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileRecord {
    /// Keyed job id (32 hex digits; see [`crate::identity`]).
    pub job: String,
    /// The measured profile.
    pub profile: Profile,
}

/// Body of `POST /v1/profiles`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilesRequest {
    /// The profiles.
    pub profiles: Vec<ProfileRecord>,
}

/// Answer of `POST /v1/profiles`: where each profile was filed, in order.
#[derive(Debug, Clone, Serialize)]
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

async fn profiles(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let app2 = Arc::clone(&app);
    timed(&app, "profiles", async move {
        authorize(&app2, &headers)?;
        let request: ProfilesRequest = parse("profiles", &body)?;
        check_keyed(
            request
                .profiles
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("profiles[{i}].job"), r.job.as_str())),
        )?;
        let assignments = app2
            .observe(|engine, _| {
                request
                    .profiles
                    .iter()
                    .map(|r| engine.observe_profile(&r.job, &r.profile))
                    .collect::<Result<Vec<_>, _>>()
            })
            .await?;
        Ok(axum::Json(ProfilesAnswer { assignments }))
    })
    .await
}

/// Body of `POST /v1/outcomes`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomesRequest {
    /// The outcomes, with keyed job ids.
    pub outcomes: Vec<Outcome>,
}

async fn outcomes(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let app2 = Arc::clone(&app);
    timed(&app, "outcomes", async move {
        authorize(&app2, &headers)?;
        let request: OutcomesRequest = parse("outcomes", &body)?;
        check_keyed(request.outcomes.iter().enumerate().flat_map(|(i, o)| {
            o.jobs
                .iter()
                .enumerate()
                .map(move |(j, id)| (format!("outcomes[{i}].jobs[{j}]"), id.as_str()))
        }))?;
        let count = request.outcomes.len();
        app2.observe(|engine, _| {
            request
                .outcomes
                .iter()
                .try_for_each(|o| engine.observe_outcome(o))
        })
        .await?;
        Ok(axum::Json(serde_json::json!({ "observed": count })))
    })
    .await
}

/// Body of `POST /v1/predict`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    /// Keyed ids of the jobs sharing the GPU.
    pub jobs: Vec<String>,
    /// The GPU.
    pub gpu: GpuSpec,
}

async fn predict(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let app2 = Arc::clone(&app);
    timed(&app, "predict", async move {
        authorize(&app2, &headers)?;
        let request: PredictRequest = parse("predict", &body)?;
        let group: Vec<Job> = request.jobs.iter().map(Job::new).collect();
        let prediction = app2
            .engine
            .predict(&group, &request.gpu)
            .map_err(|e| Failure::from(ObserveError::from(e)))?;
        Ok(axum::Json(prediction))
    })
    .await
}

async fn knowledge(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let app2 = Arc::clone(&app);
    timed(&app, "knowledge", async move {
        authorize(&app2, &headers)?;
        let summary = app2
            .engine
            .describe()
            .map_err(|e| Failure::from(ObserveError::from(e)))?;
        Ok(axum::Json(summary))
    })
    .await
}

async fn readyz(State(app): State<Arc<App>>) -> Response {
    if app.is_ready() {
        (StatusCode::OK, "ready").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "watchers not synced").into_response()
    }
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    app.metrics
        .leader
        .set(i64::from(app.leadership.is_leader()));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.encode(),
    )
        .into_response()
}
