//! The core's endpoints: profiles, outcomes, predictions, estimates, the knowledge base's
//! report and the metrics.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};

use tandem_api::{Estimate, Job, ModelSummary};

use crate::engine::failed;
use crate::learning::{self, KnowledgeReport, PeakReport};
use crate::{Core, ObserveError};

use super::answer::{parse, timed};
use super::auth::authorize;
use super::checks::{
    admit_items, check_keyed, check_memory, check_model, check_node, check_percentages, check_times,
};
use tandem_wire::intake::{
    EstimateRequest, OutcomesRequest, PredictRequest, ProfilesAnswer, ProfilesRequest,
};

pub(super) async fn profiles(
    State(core): State<Arc<Core>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
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

pub(super) async fn outcomes(
    State(core): State<Arc<Core>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
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

pub(super) async fn predict(
    State(core): State<Arc<Core>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
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

pub(super) async fn knowledge(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
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

pub(super) async fn estimate(
    State(core): State<Arc<Core>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
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

pub(super) async fn metrics(State(core): State<Arc<Core>>) -> Response {
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
