//! The extender verbs kube-scheduler calls: `POST /filter`, `/prioritize` and `/bind`.
//!
//! The core serves everything else (the intake, `/v1/knowledge`, health and metrics) and sets
//! the limits every request runs under ([`tandem_adapter_core::http::router`]). A body that does
//! not parse gets `400` with the offending field named; an engine that fails or does not answer
//! in time makes the verb fail open, as the scheduler's `ignorable` expects.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tandem_adapter_core::http::{parse, timed};
use tandem_adapter_core::{EngineError, EngineFailure, EngineState, Placement};

use tandem_kube_common::app::App;
use tandem_kube_common::assumed::Assumptions;
use tandem_kube_common::cluster::GpuPod;
use tandem_kube_common::decide::{self, FilterPasses, NodeScores, job_of};

use crate::extender::{
    BindingArgs, BindingResult, ExtenderArgs, FilterResult, HostPriority, NodeList,
};
use crate::frontend::Extender;

/// The extender is the adapter core's front-end: its routes, and ready once the view is synced.
impl tandem_adapter_core::Frontend for Extender {
    const TYPE: &'static str = "kube-scheduler extender";

    const VERBS: &'static [&'static str] = &["filter", "prioritize", "bind"];

    fn routes(self: Arc<Self>) -> Router {
        routes(self)
    }

    fn is_ready(&self) -> bool {
        self.app.is_ready()
    }
}

/// The extender's routes, for the core's router.
pub fn routes(extender: Arc<Extender>) -> Router {
    Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize))
        .route("/bind", post(bind))
        .with_state(extender)
}

async fn filter(State(extender): State<Arc<Extender>>, body: Bytes) -> Response {
    let app = Arc::clone(&extender.app);
    let core = Arc::clone(&app.core);
    timed(&core, "filter", async move {
        let mut args: ExtenderArgs = parse("filter", &body)?;
        let candidates = args.take_candidates();
        // A model declared by reference is read before the pod is judged (once a minute).
        app.read_model(&args.pod).await;
        let Some(pod) = app.gpu_pod(&args.pod) else {
            // Not a pod Tandem manages: every node passes.
            return Ok(axum::Json(pass_all(&args, candidates)));
        };
        if !app.is_ready() {
            app.core.metrics.fail_open("filter");
            return Ok(axum::Json(FilterResult {
                error: "Tandem is starting: its view of the cluster is not synced yet".into(),
                ..FilterResult::default()
            }));
        }
        let view = app.view_for(&pod);
        let epoch = view.1;
        let passes = extender.filter_passes;
        // Holding needs a binder; a fixed cluster is only ever asked.
        let holds = app
            .client()
            .is_some()
            .then(|| Arc::clone(app.assumptions()));
        let judged = {
            let pod = pod.clone();
            app.decide("filter", view, move |engine, view| {
                if let Some(assumed) = &holds {
                    release(engine, assumed, &pod)?;
                }
                let refused = decide::refusal(engine, &pod);
                let bests = if pod.gpus == 1 {
                    decide::candidate_bests(engine, &pod, &candidates)?
                } else {
                    Vec::new()
                };
                let scores: Vec<u8> = bests.iter().map(|best| best.score).collect();
                let filtered = decide::filter(engine, view, &pod, &candidates, &scores, passes)?;
                if let (Some(assumed), [node]) = (&holds, filtered.passed.as_slice()) {
                    let best = candidates
                        .iter()
                        .position(|candidate| candidate == node)
                        .and_then(|at| bests.get(at)?.gpu);
                    hold(engine, assumed, &pod, node, best)?;
                }
                // Only `prioritize` reads the scores again, and the scheduler calls it only
                // when more than one node passes.
                let scores = (passes == FilterPasses::Fitting && pod.gpus == 1)
                    .then(|| candidates.into_iter().zip(scores).collect::<NodeScores>());
                Ok((scores, filtered, refused))
            })
            .await
        };
        let (scores, filtered) = match judged {
            Ok((scores, filtered, refused)) => {
                match refused {
                    Some(refusal) => app.core.refused(&refusal),
                    None => {
                        if let Some(model) = pod.summary() {
                            app.core.remember_declared(&pod.job, model);
                        }
                    }
                }
                (scores, filtered)
            }
            Err(error) => {
                // The scheduler skips an ignorable extender that reports an error, and retries
                // the pod otherwise: either way nothing is placed on a guess.
                app.core.metrics.engine_errors.inc();
                app.core.metrics.fail_open("filter");
                let error = tandem_telemetry::report(&error);
                tracing::error!(%error, "filter: the engine failed; failing open");
                return Ok(axum::Json(FilterResult {
                    error: format!("Tandem: {error}"),
                    ..FilterResult::default()
                }));
            }
        };
        if let Some(scores) = scores {
            extender.keep_scores(&pod, epoch, Arc::new(scores));
        }
        let decide::Filtered {
            passed,
            failed,
            unresolvable,
        } = filtered;
        tracing::debug!(
            passed = passed.len(),
            failed = failed.len() + unresolvable.len(),
            "filter"
        );
        let mut result = FilterResult {
            failed_nodes: failed,
            failed_and_unresolvable_nodes: unresolvable,
            ..FilterResult::default()
        };
        answer_nodes(&mut result, &args, passed);
        Ok(axum::Json(result))
    })
    .await
}

/// Holds GPUs of `node` for `pod` in the engine, when `filter` passes that node alone: the
/// scheduler can only bind the pod there. It binds asynchronously and filters its next pods
/// meanwhile; with the GPUs counted from the `filter`, those pods are judged without them.
/// Waiting for `bind` would give the same GPU to the next pod, whose `bind` Tandem would then
/// refuse, and an `ignorable` extender's refusal to bind makes the scheduler bind the pod
/// itself, on a full node, with no GPU named.
///
/// A one-GPU pod takes `best`, the GPU that scored best there in the `filter`'s own
/// `score-all` (what `bind` would choose); the memory reserved for it is `bind`'s to compute,
/// outside the scheduler's serial cycle.
fn hold(
    engine: &mut EngineState,
    assumed: &Assumptions,
    pod: &GpuPod,
    node: &str,
    best: Option<u32>,
) -> Result<(), EngineFailure> {
    if pod.uid.is_empty() {
        return Ok(());
    }
    let gpus = match best {
        Some(gpu) => engine.place_on(&job_of(pod), gpu)?.into_iter().collect(),
        None => match engine.place(&job_of(pod), node, pod.gpus)? {
            Placement::Placed { gpus, .. } => gpus,
            Placement::Refused(_) => Vec::new(),
        },
    };
    if !gpus.is_empty() {
        assumed.record(pod, node, &gpus);
    }
    Ok(())
}

/// Gives back what an earlier `filter` held for `pod` (the scheduler filters a pod again when
/// it could not bind it where that filter said).
fn release(
    engine: &mut EngineState,
    assumed: &Assumptions,
    pod: &GpuPod,
) -> Result<(), EngineFailure> {
    match assumed.remove(&pod.uid) {
        Some(held) => engine.unplace(&pod.job, held.gpus()),
        None => Ok(()),
    }
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
            result.nodes = Some(serde_json::to_value(NodeList { items }).unwrap_or_default());
        }
        _ => result.node_names = Some(passed),
    }
}

fn pass_all(args: &ExtenderArgs, candidates: Vec<String>) -> FilterResult {
    let mut result = FilterResult::default();
    answer_nodes(&mut result, args, candidates);
    result
}

async fn prioritize(State(extender): State<Arc<Extender>>, body: Bytes) -> Response {
    let app = Arc::clone(&extender.app);
    let core = Arc::clone(&app.core);
    timed(&core, "prioritize", async move {
        let args: ExtenderArgs = parse("prioritize", &body)?;
        let candidates = args.candidates();
        let zeros = |candidates: &[String]| -> Vec<HostPriority> {
            candidates
                .iter()
                .map(|host| HostPriority {
                    host: host.clone(),
                    score: 0,
                })
                .collect()
        };
        let Some(pod) = app.gpu_pod(&args.pod) else {
            return Ok(axum::Json(zeros(&candidates)));
        };
        let (view, epoch) = app.view_for(&pod);
        let scores = match extender.cached_scores(&pod, epoch) {
            Some(scores) if candidates.iter().all(|n| scores.contains_key(n)) => Ok(scores),
            _ if pod.gpus > 1 => Ok(Arc::new(NodeScores::new())),
            _ => {
                let (pod, names) = (pod.clone(), candidates.clone());
                app.decide(
                    "prioritize",
                    (Arc::clone(&view), epoch),
                    move |engine, _| decide::score_nodes(engine, &pod, &names),
                )
                .await
                .map(Arc::new)
            }
        };
        match scores {
            Ok(scores) => {
                let ranked = decide::prioritize(&view, &pod, &candidates, &scores);
                Ok(axum::Json(
                    candidates
                        .into_iter()
                        .zip(ranked)
                        .map(|(host, score)| HostPriority { host, score })
                        .collect::<Vec<_>>(),
                ))
            }
            Err(error) => {
                // Equal scores leave the choice to the scheduler's own plugins.
                app.core.metrics.engine_errors.inc();
                app.core.metrics.fail_open("prioritize");
                tracing::error!(error = %tandem_telemetry::report(&error), "prioritize: the engine failed; all nodes score 0");
                Ok(axum::Json(zeros(&candidates)))
            }
        }
    })
    .await
}

async fn bind(State(extender): State<Arc<Extender>>, body: Bytes) -> Response {
    let app = Arc::clone(&extender.app);
    let core = Arc::clone(&app.core);
    timed(&core, "bind", async move {
        let started = Instant::now();
        let args: BindingArgs = parse("bind", &body)?;
        let error = match bind_pod(&app, &args, started).await {
            Ok(gpus) => {
                tracing::info!(node = %args.node, gpus = %gpus.join(","), "bound");
                String::new()
            }
            Err((reason, message)) => {
                tracing::warn!(node = %args.node, reason, "bind failed");
                message
            }
        };
        if started.elapsed() > app.scheduler_timeout {
            app.core.metrics.binds_late.inc();
        }
        Ok(axum::Json(BindingResult { error }))
    })
    .await
}

/// Why a bind failed: a short reason for the log (which never names pods) and the full message
/// for the scheduler (which knows the pod anyway).
type BindFailure = (&'static str, String);

/// Chooses the GPU(s) and records them in the engine at once (so concurrent binds see each
/// other's choices without waiting for one another), then binds the pod with its GPU
/// annotation in one API call: the API server applies a Binding's annotations to the pod, so
/// the two can never disagree. A bind that could no longer finish before the scheduler gives
/// up on it is abandoned, and the engine's record undone.
async fn bind_pod(
    app: &App,
    args: &BindingArgs,
    started: Instant,
) -> Result<Vec<String>, BindFailure> {
    let client = app.client().ok_or((
        "fixed cluster",
        "this adapter runs on a fixed cluster file and cannot bind".to_owned(),
    ))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &args.pod_namespace);
    // The watcher's copy saves an API round trip; a pod too new for it is read.
    let pod = match app.cached_pod(&args.pod_namespace, &args.pod_name) {
        Some(pod) => pod,
        None => Arc::new(
            pods.get(&args.pod_name)
                .await
                .map_err(|e| ("cannot read the pod", format!("cannot read the pod: {e}")))?,
        ),
    };
    if pod.metadata.uid.as_deref() != Some(args.pod_uid.as_str()) {
        return Err((
            "pod replaced",
            "the pod was replaced since it was scheduled (UID differs)".into(),
        ));
    }
    let mut gpus = Vec::new();
    let mut reserved_mib = None;
    let placed = app.gpu_pod(&pod);
    if let Some(gp) = &placed {
        let (pod, node, assumed) = (gp.clone(), args.node.clone(), Arc::clone(app.assumptions()));
        (gpus, reserved_mib) = match app
            .decide("bind", app.view(), move |engine, _| {
                let job = job_of(&pod);
                if let Some(held) = assumed.get(&pod.uid) {
                    if held.node() == node {
                        let reserved_mib = match held.gpus() {
                            [gpu] if pod.gpus == 1 => engine.reservation(&job, gpu)?,
                            _ => None,
                        };
                        return Ok(Placement::Placed {
                            gpus: held.gpus().to_vec(),
                            reserved_mib,
                        });
                    }
                    // The scheduler chose another node (its `filter` call failed open, say).
                    release(engine, &assumed, &pod)?;
                }
                let placement = engine.place(&job, &node, pod.gpus)?;
                if let Placement::Placed { gpus, .. } = &placement {
                    assumed.record(&pod, &node, gpus);
                }
                Ok(placement)
            })
            .await
        {
            Ok(Placement::Placed { gpus, reserved_mib }) => (gpus, reserved_mib),
            Ok(Placement::Refused(why)) => {
                return Err(("no GPU fits any more", format!("Tandem: {why}")));
            }
            Err(EngineError::Failed(engine)) => {
                app.core.metrics.engine_errors.inc();
                return Err(("engine failed", format!("Tandem: {engine}")));
            }
            Err(EngineError::Call(call)) => {
                return Err(("engine did not answer", format!("Tandem: {call}")));
            }
        };
        app.expect_bound(&gp.uid, &args.node, &gpus);
    }
    let mut metadata = ObjectMeta {
        name: Some(args.pod_name.clone()),
        namespace: Some(args.pod_namespace.clone()),
        uid: Some(args.pod_uid.clone()),
        ..ObjectMeta::default()
    };
    if !gpus.is_empty() {
        // Signed over the pod's UID, which the Binding's own UID precondition pins: the API
        // server binds only the pod the scheduler asked about.
        match app
            .placements()
            .annotations(&args.pod_uid, &gpus, reserved_mib)
        {
            Ok(annotations) => metadata.annotations = Some(annotations),
            Err(error) => {
                undo_placement(app, placed.as_ref(), &gpus).await;
                return Err((
                    "no placement",
                    format!("Tandem: the engine's GPUs are no placement: {error}"),
                ));
            }
        }
    }
    let binding = Binding {
        metadata,
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(args.node.clone()),
            ..ObjectReference::default()
        },
    };
    let left = app.scheduler_timeout.saturating_sub(started.elapsed());
    let bound = if left.is_zero() {
        Err((
            "scheduler gave up",
            "Tandem could not bind before the scheduler's time limit".to_owned(),
        ))
    } else {
        match tokio::time::timeout(
            left,
            pods.create_subresource::<Binding, serde_json::Value>(
                "binding",
                &args.pod_name,
                &PostParams::default(),
                &binding,
            ),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(("cannot bind", format!("cannot bind: {e}"))),
            // The API server may still apply it: the watcher will show where the pod went.
            Err(_) => {
                return Err((
                    "bind timed out",
                    "Tandem: the binding did not complete before the scheduler's time limit".into(),
                ));
            }
        }
    };
    if let Err(failure) = bound {
        undo_placement(app, placed.as_ref(), &gpus).await;
        return Err(failure);
    }
    Ok(gpus)
}

/// Takes back a placement whose bind failed: forgotten by the view, off the engine.
async fn undo_placement(app: &App, placed: Option<&GpuPod>, gpus: &[String]) {
    if let Some(gp) = placed {
        app.forget(&gp.uid);
        let (job, undo) = (gp.job.clone(), gpus.to_vec());
        let _ = app
            .core
            .decide("unbind", move |engine| engine.unplace(&job, &undo))
            .await;
    }
}
