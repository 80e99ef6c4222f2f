//! The verbs vc-scheduler's `extender` plugin calls (`POST /<verb>`): `onSessionOpen`,
//! `onSessionClose`, `predicate`, `prioritize`, `allocate`, `deallocate`.
//!
//! The core serves the rest (intake, `/v1/knowledge`, health, metrics) under its limits. A body
//! that does not parse gets `400` with the offending field named. An engine that fails or does
//! not answer in time makes a verb fail open (the node passes, every node scores 0, the
//! allocation goes ahead unrecorded), as `extender.ignorable: true` would for an adapter that
//! is down; both are counted (`tandem_fail_opens_total`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tandem_adapter_core::declaration::Field;
use tandem_adapter_core::http::{Failure, parse, timed};
use tandem_adapter_core::{EngineError, Placement};
use tandem_kube_common::placement::ANNOTATIONS;

use crate::frontend::{self, SessionJob, Task, Volcano};
use crate::wire::{
    EventRequest, EventResponse, PredicateRequest, PredicateResponse, PrioritizeRequest,
    PrioritizeResponse, SessionOpenRequest, TaskInfo,
};

/// The Volcano extender is a front-end on the adapter core.
impl tandem_adapter_core::Frontend for Volcano {
    const TYPE: &'static str = "vc-scheduler extender";

    const VERBS: &'static [&'static str] = &[
        "onSessionOpen",
        "onSessionClose",
        "predicate",
        "prioritize",
        "allocate",
        "deallocate",
    ];

    fn routes(self: Arc<Self>) -> Router {
        routes(self)
    }

    fn is_ready(&self) -> bool {
        self.app.is_ready()
    }
}

/// The verbs' routes, named as in deploy/helm/tandem/files/volcano-scheduler.conf.
pub fn routes(volcano: Arc<Volcano>) -> Router {
    Router::new()
        .route("/onSessionOpen", post(session_open))
        .route("/onSessionClose", post(session_close))
        .route("/predicate", post(predicate))
        .route("/prioritize", post(prioritize))
        .route("/allocate", post(allocate))
        .route("/deallocate", post(deallocate))
        .with_state(volcano)
}

/// The task of a request, or `400` naming what is wrong with its pod.
fn task_of(volcano: &Volcano, verb: &str, info: &TaskInfo) -> Result<Option<Arc<Task>>, Failure> {
    volcano.task(info).map_err(|why| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            format!("invalid {verb} request at `task.Pod`: {why}"),
        )
    })
}

async fn session_open(State(volcano): State<Arc<Volcano>>, body: Bytes) -> Response {
    let core = Arc::clone(&volcano.app.core);
    timed(&core, "onSessionOpen", async move {
        let request: SessionOpenRequest = parse("onSessionOpen", &body)?;
        let jobs: HashMap<String, SessionJob> = request
            .jobs
            .unwrap_or_default()
            .into_iter()
            .map(|(id, job)| {
                let declares = Field::ALL
                    .iter()
                    .filter_map(|field| {
                        let key = field.annotation();
                        Some((key, job.annotation(key)?.to_owned()))
                    })
                    .collect();
                let session_job = SessionJob {
                    min_available: job.min_available,
                    declares,
                };
                (id, session_job)
            })
            .collect();
        tracing::debug!(jobs = jobs.len(), "session opened");
        volcano.open_session(jobs);
        Ok(axum::Json(serde_json::json!({})))
    })
    .await
}

async fn session_close(State(volcano): State<Arc<Volcano>>) -> Response {
    let core = Arc::clone(&volcano.app.core);
    timed(&core, "onSessionClose", async move {
        volcano.close_session();
        Ok(axum::Json(serde_json::json!({})))
    })
    .await
}

async fn predicate(State(volcano): State<Arc<Volcano>>, body: Bytes) -> Response {
    let core = Arc::clone(&volcano.app.core);
    timed(&core, "predicate", async move {
        let request: PredicateRequest = parse("predicate", &body)?;
        let Some(task) = task_of(&volcano, "predicate", &request.task)? else {
            return Ok(axum::Json(PredicateResponse::pass()));
        };
        if !volcano.app.is_ready() {
            volcano.app.core.metrics.fail_open("predicate");
            return Ok(axum::Json(PredicateResponse::pass()));
        }
        if let Some((failed, refusal)) = frontend::declaration_check(&task) {
            if let Some(refusal) = refusal {
                volcano.app.core.refused(&refusal);
            }
            return Ok(axum::Json(failed));
        }
        let node = request.node.name;
        let (view, epochs) = volcano.current();
        if let Some(failed) = frontend::node_check(&view.0, &task, &node) {
            return Ok(axum::Json(failed));
        }
        let answer = if task.alone() {
            let task = Arc::clone(&task);
            volcano
                .app
                .decide("predicate", view, move |engine, _| {
                    Ok(frontend::predicate_alone(engine, &task, &node))
                })
                .await
        } else {
            match volcano.scores(&task, view.clone(), epochs).await {
                // The common case needs no engine call: the node fits.
                Ok(scores) if scores.fits.contains_key(&node) => Ok(PredicateResponse::pass()),
                Ok(scores) => {
                    let task = Arc::clone(&task);
                    volcano
                        .app
                        .decide("predicate", view, move |engine, _| {
                            frontend::predicate_shared(engine, &task, &node, &scores)
                        })
                        .await
                }
                Err(error) => Err(error),
            }
        };
        Ok(axum::Json(answer.unwrap_or_else(|error| {
            fail_open(&volcano, "predicate", &error);
            PredicateResponse::pass()
        })))
    })
    .await
}

/// Counts and logs a verb failing open because the engine failed.
fn fail_open(volcano: &Volcano, verb: &'static str, error: &EngineError) {
    volcano.app.core.metrics.engine_errors.inc();
    volcano.app.core.metrics.fail_open(verb);
    tracing::error!(verb, error = %tandem_telemetry::report(error), "the engine failed; failing open");
}

async fn prioritize(State(volcano): State<Arc<Volcano>>, body: Bytes) -> Response {
    let core = Arc::clone(&volcano.app.core);
    timed(&core, "prioritize", async move {
        let request: PrioritizeRequest = parse("prioritize", &body)?;
        let nodes: Vec<String> = request.nodes.into_iter().map(|n| n.name).collect();
        let zeros = |nodes: &[String]| PrioritizeResponse {
            node_score: nodes.iter().map(|n| (n.clone(), 0.0)).collect(),
            error_message: String::new(),
        };
        let Some(task) = task_of(&volcano, "prioritize", &request.task)? else {
            return Ok(axum::Json(zeros(&nodes)));
        };
        let (view, epochs) = volcano.current();
        let scores = if task.alone() {
            Ok(None)
        } else {
            volcano.scores(&task, view.clone(), epochs).await.map(Some)
        };
        let ranked = match scores {
            Ok(scores) => {
                let (task, names) = (Arc::clone(&task), nodes.clone());
                volcano
                    .app
                    .decide("prioritize", view, move |engine, _| {
                        Ok(frontend::node_scores(
                            engine,
                            &task,
                            &names,
                            scores.as_deref(),
                        ))
                    })
                    .await
            }
            Err(error) => Err(error),
        };
        match ranked {
            Ok(ranked) => Ok(axum::Json(PrioritizeResponse {
                node_score: nodes
                    .into_iter()
                    .zip(ranked)
                    .map(|(node, score)| (node, f64::from(score) * volcano.score_weight))
                    .collect(),
                error_message: String::new(),
            })),
            Err(error) => {
                // Equal scores leave the choice to vc-scheduler's own node-order plugins.
                fail_open(&volcano, "prioritize", &error);
                Ok(axum::Json(zeros(&nodes)))
            }
        }
    })
    .await
}

async fn allocate(State(volcano): State<Arc<Volcano>>, body: Bytes) -> Response {
    let core = Arc::clone(&volcano.app.core);
    timed(&core, "allocate", async move {
        let request: EventRequest = parse("allocate", &body)?;
        let Some(task) = task_of(&volcano, "allocate", &request.task)? else {
            return Ok(axum::Json(EventResponse::default()));
        };
        let node = request.task.node_name;
        if node.is_empty() {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid allocate request at `task.NodeName`: empty (an allocated task names its node)",
            ));
        }
        let placed = {
            let (task, node, recorder) = (Arc::clone(&task), node.clone(), Arc::clone(&volcano));
            let (view, _) = volcano.current();
            volcano
                .app
                .decide("allocate", view, move |engine, _| {
                    let placement = frontend::place(engine, &task, &node)?;
                    // Recorded in the step that places it: no view synced later leaves it out.
                    if let Placement::Placed { gpus, .. } = &placement {
                        recorder.record(&task, &node, gpus);
                    }
                    Ok(placement)
                })
                .await
        };
        let (gpus, reserved_mib) = match placed {
            Ok(Placement::Placed { gpus, reserved_mib }) => (gpus, reserved_mib),
            // Another allocation of this session took what the predicate saw: vc-scheduler
            // undoes this one and tries again.
            Ok(Placement::Refused(why)) => {
                return Ok(axum::Json(EventResponse {
                    error_message: format!("Tandem: {why}"),
                }));
            }
            Err(error) => {
                fail_open(&volcano, "allocate", &error);
                return Ok(axum::Json(EventResponse::default()));
            }
        };
        // Signed over the pod's UID: a pod owner who patches the placement between this
        // allocate and vc-scheduler's bind breaks the signature (nodes refuse the pod, the
        // view ignores the placement).
        let annotated = match volcano
            .app
            .placements()
            .annotations(&task.pod.uid, &gpus, reserved_mib)
        {
            Ok(annotations) => annotate(&volcano, &task, Some(&annotations)).await,
            Err(error) => Err(format!("the engine's GPUs are no placement: {error}")),
        };
        if let Err(error) = annotated {
            // The pod would run on a GPU Tandem cannot show: undo, and let the allocation fail.
            volcano.unrecord(&task);
            undo(&volcano, &task, gpus).await;
            return Ok(axum::Json(EventResponse {
                error_message: format!("Tandem: cannot record the GPU on the pod: {error}"),
            }));
        }
        tracing::info!(%node, gpus = %gpus.join(","), gang = task.gang, "allocated");
        Ok(axum::Json(EventResponse::default()))
    })
    .await
}

async fn deallocate(State(volcano): State<Arc<Volcano>>, body: Bytes) -> Response {
    let core = Arc::clone(&volcano.app.core);
    timed(&core, "deallocate", async move {
        let request: EventRequest = parse("deallocate", &body)?;
        let Some(task) = task_of(&volcano, "deallocate", &request.task)? else {
            return Ok(axum::Json(EventResponse::default()));
        };
        if let Some(gpus) = volcano.unrecord(&task) {
            undo(&volcano, &task, gpus).await;
            if let Err(error) = annotate(&volcano, &task, None).await {
                // The watcher will see a pending pod naming a GPU; it holds none until bound.
                tracing::warn!(%error, "could not remove the GPU record of a deallocated task");
            }
            tracing::info!("deallocated");
        }
        Ok(axum::Json(EventResponse::default()))
    })
    .await
}

/// Takes `task` off `gpus` in the engine.
async fn undo(volcano: &Volcano, task: &Task, gpus: Vec<String>) {
    let job = task.pod.job.clone();
    if let Err(error) = volcano
        .app
        .core
        .decide("unplace", move |engine| engine.unplace(&job, &gpus))
        .await
    {
        tracing::warn!(error = %tandem_telemetry::report(&error), "could not take an undone placement off the engine's view");
    }
}

/// Writes the placement's annotations on the task's pod (or, with `None`, removes them), every
/// key of a placement set or removed.
/// vc-scheduler binds the pod itself at the end of the session, so the annotations are a patch
/// of their own, made before `allocate` answers — before the kubelet can see the pod. Nothing
/// to write on a fixed cluster.
async fn annotate(
    volcano: &Volcano,
    task: &Task,
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<(), String> {
    let Some(client) = volcano.app.client() else {
        return Ok(());
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &task.namespace);
    // Every placement key is written: a merge patch removes a key set to null, so no value of
    // an earlier placement (the reservation of a one-GPU one, say) is left beside this one.
    let written: serde_json::Map<String, serde_json::Value> = ANNOTATIONS
        .iter()
        .map(|key| {
            let value = annotations
                .and_then(|a| a.get(*key))
                .map_or(serde_json::Value::Null, |v| {
                    serde_json::Value::from(v.as_str())
                });
            ((*key).to_owned(), value)
        })
        .collect();
    // The UID makes the patch conditional: a pod of the same name created since is left alone
    // (the API server answers a conflict), as a signature for one pod must not land on another.
    let patch = serde_json::json!({"metadata": {"uid": task.pod.uid, "annotations": written}});
    let patched = tokio::time::timeout(
        volcano.app.scheduler_timeout,
        pods.patch(&task.name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await;
    match patched {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("the API server did not answer in time".to_owned()),
    }
}
