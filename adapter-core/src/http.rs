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

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;

use tandem_api::{Estimate, Job, ModelSummary, Outcome, Profile, bounds};
use tower_http::timeout::TimeoutLayer;

use crate::engine::failed;
use crate::identity::is_keyed;
use crate::intake::{AuthError, Caller, Scope};
use crate::learning::{self, KnowledgeReport, PeakReport};
use crate::{Core, Frontend, ObserveError};

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

/// Permits are counted in KiB, so a budget of gigabytes fits a semaphore's `u32` requests.
const KIB: usize = 1024;

/// The memory request bodies in flight may take, all requests together.
struct BodyBudget {
    permits: tokio::sync::Semaphore,
    max_body_bytes: usize,
    metrics: Arc<crate::metrics::Metrics>,
}

/// Admits a request only if the body it declares fits what is left of the budget (a body that
/// declares no length is counted at the largest size allowed); holds that share until the
/// answer is made. Requests without a body (`GET`: probes, metrics) are always admitted.
async fn admit(State(budget): State<Arc<BodyBudget>>, request: Request, next: Next) -> Response {
    if request.method() == axum::http::Method::GET {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(budget.max_body_bytes)
        .min(budget.max_body_bytes);
    let kib = u32::try_from(declared.div_ceil(KIB).max(1)).unwrap_or(u32::MAX);
    let Ok(_held) = budget.permits.try_acquire_many(kib) else {
        budget.metrics.bodies_refused.inc();
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            axum::Json(serde_json::json!({
                "error": "too many large requests in flight; retry shortly"
            })),
        )
            .into_response();
    };
    next.run(request).await
}

pub use tandem_wire::intake::{
    EstimateRequest, MAX_BATCH_ITEMS, OutcomesRequest, PredictRequest, ProfileRecord,
    ProfilesAnswer, ProfilesRequest, TOO_MANY_ITEMS, bounded,
};

/// An answer that is not the verb's normal result.
#[derive(Debug)]
pub struct Failure {
    /// The status to answer with.
    pub status: StatusCode,
    /// What went wrong, for the caller.
    pub message: String,
    /// When to try again (`Retry-After`), for a refusal that passes.
    pub retry_after: Option<std::time::Duration>,
}

impl Failure {
    /// A failure with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            axum::Json(serde_json::json!({ "error": self.message })),
        )
            .into_response();
        if let Some(wait) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, wait.as_secs().max(1).into());
        }
        response
    }
}

impl From<ObserveError> for Failure {
    fn from(error: ObserveError) -> Self {
        let status = match &error {
            // Nothing more fits: retrying will not help until something is forgotten.
            ObserveError::Store(crate::store::StoreError::TooLarge { .. }) => {
                StatusCode::INSUFFICIENT_STORAGE
            }
            ObserveError::NotLeader(_) | ObserveError::Store(_) | ObserveError::Call(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ObserveError::Engine(e) if e.is_refusal() => StatusCode::BAD_REQUEST,
            // The engine took it, and cannot load what it made: retrying will not help.
            ObserveError::Unloadable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ObserveError::Engine(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, error.to_string())
    }
}

/// Parses a JSON body of request `what`, naming the field that is wrong.
pub fn parse<T: DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, Failure> {
    // Tracking the path costs on every element of a large request (a `filter` names hundreds
    // of nodes), and only an error reads it: a body that fails is decoded again, with it.
    if let Ok(parsed) = serde_json::from_slice(body) {
        return Ok(parsed);
    }
    let mut json = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut json).map_err(|e| {
        let path = e.path().to_string();
        // `.` is the whole body, `?` a body that ended before any field.
        let at = if path == "." || path == "?" {
            String::new()
        } else {
            format!(" at `{path}`")
        };
        let error = e.into_inner().to_string();
        let status = if error.contains(TOO_MANY_ITEMS) {
            StatusCode::PAYLOAD_TOO_LARGE
        } else {
            StatusCode::BAD_REQUEST
        };
        Failure::new(status, format!("invalid {what} request{at}: {error}"))
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
        // and logs must never carry names (docs/RELIABILITY.md, "Privacy").
        tracing::warn!(verb, status = %f.status, "request failed");
    }
    core.metrics
        .record(verb, result, started.elapsed().as_secs_f64());
    match answer {
        Ok(body) => body.into_response(),
        Err(f) => f.into_response(),
    }
}

/// Whether `given` equals `expected`, without an early exit (timing does not reveal a matching
/// prefix).
fn same_secret(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0_u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The token a request presents: `Authorization: Bearer <token>`, or the password of
/// `Authorization: Basic` (what an HTTP client sends for a URL `https://user:<token>@host/`).
fn presented_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    if let Some(token) = value.strip_prefix("Bearer ") {
        return Some(token.trim().to_owned());
    }
    let encoded = value.strip_prefix("Basic ")?;
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    Some(decoded.split_once(':')?.1.to_owned())
}

/// Admits a caller of the scheduler verbs who proves to be the scheduler (see
/// [`crate::SchedulerAuth`]).
async fn authenticate(State(core): State<Arc<Core>>, request: Request, next: Next) -> Response {
    let auth = &core.scheduler_auth;
    if auth.is_open() {
        return next.run(request).await;
    }
    let certified = auth.client_certificates
        && request
            .extensions()
            .get::<crate::serve::ClientCertificate>()
            .is_some_and(|c| c.0);
    let token = presented_token(request.headers());
    let tokened = match (&auth.token, &token) {
        (Some(expected), Some(given)) => same_secret(given, expected),
        _ => false,
    };
    if certified || tokened {
        return next.run(request).await;
    }
    let verb = request.uri().path().trim_start_matches('/').to_owned();
    core.metrics
        .unauthorized
        .get_or_create(&crate::metrics::Verb { verb: verb.clone() })
        .inc();
    tracing::warn!(
        verb,
        "refused a scheduler verb from a caller without the scheduler's credential"
    );
    let failure = if token.is_some() {
        Failure::new(StatusCode::FORBIDDEN, "wrong scheduler token")
    } else {
        Failure::new(
            StatusCode::UNAUTHORIZED,
            "the scheduler verbs need the scheduler's client certificate or token",
        )
    };
    failure.into_response()
}

/// Who is calling intake endpoint `verb`: the operator's token admits anything; a node
/// profiler the front-end's [`crate::intake::IntakeAuth`] authenticates may post profiles only
/// (which of its node's jobs, [`check_node`] checks). A refusal is counted by verb in
/// `tandem_unauthorized_total`.
async fn authorize(core: &Core, headers: &HeaderMap, verb: &str) -> Result<Caller, Failure> {
    let refused = |failure: Failure| {
        core.metrics
            .unauthorized
            .get_or_create(&crate::metrics::Verb {
                verb: verb.to_owned(),
            })
            .inc();
        failure
    };
    let auth = core.intake_auth();
    if core.intake_token.is_none() && auth.is_none() {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "the intake is disabled: start the adapter with --intake-token-file",
        ));
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let caller = match (&core.intake_token, auth) {
        (Some(expected), _) if same_secret(given, expected) => Caller::operator(),
        (_, Some(auth)) => auth.authenticate(headers).await.map_err(|error| {
            let status = match &error {
                AuthError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
                AuthError::Forbidden(_) => StatusCode::FORBIDDEN,
                AuthError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            refused(Failure::new(status, error.to_string()))
        })?,
        (_, None) => {
            return Err(refused(Failure::new(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token",
            )));
        }
    };
    if let Scope::Node(node) = &caller.scope
        && verb != "profiles"
    {
        return Err(refused(Failure::new(
            StatusCode::FORBIDDEN,
            format!(
                "the profiler of node {node} may post only /v1/profiles, of its own node's jobs; \
                 /v1/{verb} takes the operator's intake token"
            ),
        )));
    }
    Ok(caller)
}

/// Refuses a node-scoped caller's items whose job does not run on its node (`jobs`: field name
/// and keyed id of each item): a node's profiler measures its own node's GPUs, so a profile of
/// any other job is a lie. Nothing is refused for a caller of scope [`Scope::Any`].
fn check_node<'a>(
    core: &Core,
    caller: &Caller,
    jobs: impl IntoIterator<Item = (String, &'a str)>,
) -> Result<(), Failure> {
    let Scope::Node(node) = &caller.scope else {
        return Ok(());
    };
    let Some(locator) = core.locator() else {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            format!(
                "this adapter cannot tell where jobs run yet, so the profiler of node {node} may \
                 post nothing"
            ),
        ));
    };
    for (field, job) in jobs {
        if !locator.runs_on(job, node) {
            core.metrics
                .unauthorized
                .get_or_create(&crate::metrics::Verb {
                    verb: "profiles".to_owned(),
                })
                .inc();
            return Err(Failure::new(
                StatusCode::FORBIDDEN,
                format!(
                    "{field}: job {job} has no pod on node {node}; the profiler of node {node} \
                     may post profiles of its own node's jobs only"
                ),
            ));
        }
    }
    Ok(())
}

/// Takes `items` from what `caller` may add this minute ([`crate::intake::RateBound`]):
/// `429` with `Retry-After` when they do not fit now, `413` when they never would.
fn admit_items(core: &Core, caller: &Caller, verb: &str, items: usize) -> Result<(), Failure> {
    let per_minute = core.rate.per_minute();
    if per_minute > 0 && items > per_minute as usize {
        return Err(Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{items} items in one request, more than {} may add in a minute ({per_minute}, \
                 --intake-items-per-minute): send at most {per_minute} per request",
                caller.name
            ),
        ));
    }
    core.rate
        .admit(&caller.name, items, Instant::now())
        .map_err(|limited| {
            core.metrics
                .intake_rate_limited
                .get_or_create(&crate::metrics::Verb {
                    verb: verb.to_owned(),
                })
                .inc();
            Failure {
                retry_after: Some(limited.retry_after),
                ..Failure::new(StatusCode::TOO_MANY_REQUESTS, limited.to_string())
            }
        })
}

/// Refuses a GPU model that is neither one the engine knows nor one of the cluster's: the field
/// is free text that would be stored, so it must not carry anything but a model's name.
fn check_model(
    state: &mut crate::EngineState,
    field: &str,
    model: &str,
    call: &'static str,
) -> Result<(), crate::EngineFailure> {
    let mut in_view = || {
        state
            .recommender()
            .cluster()
            .iter()
            .any(|(_, gpu)| gpu.spec.model == model)
    };
    if crate::gpu_models::is_known(model) || in_view() {
        return Ok(());
    }
    Err(crate::EngineFailure {
        call,
        source: tandem_host::Error::Engine(tandem_api::EngineError::InvalidInput(format!(
            "{field} names a GPU model ({} characters) that is neither one Tandem knows nor one \
             of the cluster's",
            model.len()
        ))),
    })
}

/// Refuses a profile whose percentages are not percentages, naming the field
/// (`profiles[3].profile.gpu_util_pct`).
fn check_percentages(records: &[ProfileRecord]) -> Result<(), Failure> {
    for (i, r) in records.iter().enumerate() {
        for (name, value) in [
            ("gpu_util_pct", r.profile.gpu_util_pct),
            ("mem_access_pct", r.profile.mem_access_pct),
        ] {
            bounds::percentage(value, format_args!("profiles[{i}].profile.{name}"))
                .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, e.to_string()))?;
        }
    }
    Ok(())
}

/// The most memory a job measured on a GPU of `model` can have used: the largest of the
/// cluster's GPUs of that model, or, when the view has none, the largest board sold under that
/// name ([`bounds::largest_memory_of`]).
fn memory_limit(state: &crate::EngineState, model: &str) -> u32 {
    state
        .gpu_models()
        .filter(|spec| spec.model == model)
        .map(|spec| spec.memory_mib)
        .max()
        .unwrap_or_else(|| bounds::largest_memory_of(model))
}

/// Refuses profile `i` when it used more memory than its GPU has: the largest peak of a job
/// sticks, so one such profile would keep its job off every shared GPU for good.
fn check_memory(
    state: &crate::EngineState,
    i: usize,
    profile: &Profile,
) -> Result<(), crate::EngineFailure> {
    let limit = memory_limit(state, &profile.gpu_model);
    bounds::memory(
        profile.mem_used_mib,
        limit,
        format_args!("profiles[{i}].profile.mem_used_mib"),
    )
    .map_err(|e| crate::EngineFailure {
        call: "observe-profile",
        source: tandem_host::Error::Engine(tandem_api::EngineError::InvalidInput(format!(
            "{e} ({} {})",
            profile.gpu_model,
            if state
                .gpu_models()
                .any(|spec| spec.model == profile.gpu_model)
            {
                "in this cluster"
            } else {
                "at most, of any board of that name"
            }
        ))),
    })
}

/// Refuses outcomes whose times no run can show, naming the field (`outcomes[0].solo_s[1]`):
/// the engine's statistics would overflow on them.
fn check_times(outcomes: &[Outcome]) -> Result<(), Failure> {
    let refuse = |e: bounds::OutOfBounds| Failure::new(StatusCode::BAD_REQUEST, e.to_string());
    for (i, o) in outcomes.iter().enumerate() {
        for (name, list) in [("solo_s", &o.solo_s), ("colocated_s", &o.colocated_s)] {
            for (j, &t) in list.iter().enumerate() {
                bounds::run_time(t, format_args!("outcomes[{i}].{name}[{j}]")).map_err(refuse)?;
            }
        }
        for (j, (&solo, &colocated)) in o.solo_s.iter().zip(&o.colocated_s).enumerate() {
            bounds::colocated_ratio(
                solo,
                colocated,
                format_args!("outcomes[{i}].colocated_s[{j}]"),
            )
            .map_err(refuse)?;
        }
    }
    Ok(())
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
        let caller = authorize(&core2, &headers, "profiles").await?;
        let request: ProfilesRequest = parse("profiles", &body)?;
        let jobs = || {
            request
                .profiles
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("profiles[{i}].job"), r.job.as_str()))
        };
        check_keyed(jobs())?;
        check_node(&core2, &caller, jobs())?;
        admit_items(&core2, &caller, "profiles", request.profiles.len())?;
        // The peak a profile measured teaches the memory model when its job declared a model.
        let declared: Vec<(usize, ModelSummary)> = request
            .profiles
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i, core2.declared_model(&r.job)?)))
            .collect();
        // The profiles are filed in the instance deciding now, and stored, before any refit:
        // from here on a job whose peak the memory model under-predicted is judged by its
        // measured memory, not by the prediction, while the refit that corrects the
        // prediction for other jobs of its model runs (no OOM-risking placement of it
        // meanwhile). The refit's instance is forked from this one, profiles included.
        check_percentages(&request.profiles)?;
        let records = request.profiles.clone();
        let (assignments, specs) = core2
            .observe(move |state| {
                // Every profile is checked before any is filed.
                for (i, r) in records.iter().enumerate() {
                    check_model(
                        state,
                        &format!("profiles[{i}].profile.gpu_model"),
                        &r.profile.gpu_model,
                        "observe-profile",
                    )?;
                    check_memory(state, i, &r.profile)?;
                }
                let mut specs = Vec::with_capacity(records.len());
                let assignments = records
                    .iter()
                    .map(|r| {
                        let assignment = state
                            .recommender()
                            .observe_profile(&r.job, &r.profile)
                            .map_err(failed("observe-profile"))?;
                        state.lessons.profile(&r.profile.gpu_model);
                        // The peak's GPU as the cluster view describes it (the instance that
                        // learns is built without one).
                        specs.push(state.gpu_spec(&r.profile.gpu_model));
                        Ok(assignment)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((assignments, specs))
            })
            .await?;
        if declared.is_empty() {
            return Ok(axum::Json(ProfilesAnswer {
                assignments,
                peaks_learned: 0,
            }));
        }
        let peaks: Vec<PeakReport> = declared
            .into_iter()
            .map(|(i, model)| {
                let record = &request.profiles[i];
                PeakReport {
                    job: record.job.clone(),
                    declared: model,
                    gpu: specs[i].clone(),
                    peak_mib: record.profile.mem_used_mib,
                }
            })
            .collect();
        let peaks_count = peaks.len();
        let learned = core2
            .observe_off_thread(move |fresh, lessons| {
                let learned = learning::learn_peaks(fresh, lessons, &peaks)
                    .map_err(failed("observe-memory"))?;
                for why in &learned.skipped {
                    tracing::info!(why, "a measured peak was not learned");
                }
                Ok(learned)
            })
            .await?;
        for (model, lesson) in &learned.lessons {
            core2.metrics.peak(model, lesson);
        }
        let learned = peaks_count - learned.skipped.len();
        core2.metrics.peaks_learned.inc_by(learned as u64);
        tracing::info!(peaks = learned, "the memory model learned measured peaks");
        Ok(axum::Json(ProfilesAnswer {
            assignments,
            peaks_learned: u32::try_from(learned).unwrap_or(u32::MAX),
        }))
    })
    .await
}

async fn outcomes(State(core): State<Arc<Core>>, headers: HeaderMap, body: Bytes) -> Response {
    let core2 = Arc::clone(&core);
    timed(&core, "outcomes", async move {
        let caller = authorize(&core2, &headers, "outcomes").await?;
        let request: OutcomesRequest = parse("outcomes", &body)?;
        check_keyed(request.outcomes.iter().enumerate().flat_map(|(i, o)| {
            o.jobs
                .iter()
                .enumerate()
                .map(move |(j, id)| (format!("outcomes[{i}].jobs[{j}]"), id.as_str()))
        }))?;
        admit_items(&core2, &caller, "outcomes", request.outcomes.len())?;
        check_times(&request.outcomes)?;
        let count = request.outcomes.len();
        let lessons = core2
            .observe(move |state| {
                let mut lessons = Vec::new();
                for (i, o) in request.outcomes.iter().enumerate() {
                    check_model(
                        state,
                        &format!("outcomes[{i}].gpu_model"),
                        &o.gpu_model,
                        "observe-outcome",
                    )?;
                    let gpu = state.gpu_spec(&o.gpu_model);
                    lessons.extend(learning::slowdown_before(state.recommender(), o, &gpu));
                    state
                        .recommender()
                        .observe_outcome(o)
                        .map_err(failed("observe-outcome"))?;
                }
                Ok(lessons)
            })
            .await?;
        for lesson in &lessons {
            core2.metrics.slowdown(lesson);
        }
        Ok(axum::Json(serde_json::json!({ "observed": count })))
    })
    .await
}

async fn predict(State(core): State<Arc<Core>>, headers: HeaderMap, body: Bytes) -> Response {
    let core2 = Arc::clone(&core);
    timed(&core, "predict", async move {
        authorize(&core2, &headers, "predict").await?;
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
            .map_err(ObserveError::from)?;
        Ok(axum::Json(prediction))
    })
    .await
}

async fn knowledge(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    let core2 = Arc::clone(&core);
    timed(&core, "knowledge", async move {
        authorize(&core2, &headers, "knowledge").await?;
        let report = core2
            .query("describe", |state| {
                let summary = state.recommender().describe().map_err(failed("describe"))?;
                let gpu_models = state.lessons.report(summary.memory_margin_pct);
                Ok::<_, crate::EngineFailure>(KnowledgeReport {
                    summary,
                    gpu_models,
                })
            })
            .await
            .map_err(ObserveError::from)?;
        Ok(axum::Json(report))
    })
    .await
}

async fn estimate(State(core): State<Arc<Core>>, headers: HeaderMap, body: Bytes) -> Response {
    let core2 = Arc::clone(&core);
    timed(&core, "estimate", async move {
        authorize(&core2, &headers, "estimate").await?;
        let request: EstimateRequest = parse("estimate", &body)?;
        if let Some(job) = &request.job {
            check_keyed([("job".to_owned(), job.as_str())])?;
        }
        let job = Job {
            declared: request.declared,
            priority: request.priority,
            work: request.work,
            ..Job::new(request.job.as_deref().unwrap_or(learning::PROBE_JOB))
        };
        let estimates: Vec<Estimate> = core2
            .query("estimate", move |state| {
                state
                    .recommender()
                    .estimate(&job, &request.gpus)
                    .map_err(failed("estimate"))
            })
            .await
            .map_err(ObserveError::from)?;
        Ok(axum::Json(estimates))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Request {
        pod: Named,
        #[serde(deserialize_with = "bounded")]
        nodes: Vec<String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Named {
        name: String,
    }

    #[test]
    fn a_body_is_parsed_and_a_bad_one_is_refused_naming_the_field() {
        let ok: Request = parse("filter", br#"{"pod":{"name":"a"},"nodes":["n1","n2"]}"#).unwrap();
        assert_eq!(ok.nodes, ["n1", "n2"]);
        let bad = parse::<Request>("filter", br#"{"pod":{"name":7},"nodes":[]}"#).unwrap_err();
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        assert!(
            bad.message
                .starts_with("invalid filter request at `pod.name`: invalid type"),
            "{}",
            bad.message
        );
        let broken = parse::<Request>("filter", b"{").unwrap_err();
        assert!(
            broken.message.starts_with("invalid filter request: "),
            "{}",
            broken.message
        );
    }

    #[test]
    fn a_list_past_the_bound_is_refused_as_too_large() {
        let nodes = vec!["n"; MAX_BATCH_ITEMS + 1];
        let body = serde_json::json!({ "pod": { "name": "a" }, "nodes": nodes }).to_string();
        let refused = parse::<Request>("observe", body.as_bytes()).unwrap_err();
        assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(
            refused.message.contains("at `nodes`"),
            "{}",
            refused.message
        );
    }
}
