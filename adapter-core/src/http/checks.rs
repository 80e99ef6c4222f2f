//! What the intake refuses before the engine learns from it: ids that are not keyed, a node's
//! caller posting for another node, too many items, GPU models, percentages, memory and times
//! that cannot be.

use std::time::Instant;

use axum::http::StatusCode;

use tandem_api::{Outcome, Profile, bounds};

use crate::Core;
use crate::identity::is_keyed;
use crate::intake::{Caller, Scope};

use super::answer::Failure;
use tandem_wire::intake::ProfileRecord;

/// Refuses a node-scoped caller's items whose job does not run on its node (`jobs`: field name
/// and keyed id of each item): a node's profiler measures its own node's GPUs, so a profile of
/// any other job is a lie. Nothing is refused for a caller of scope [`Scope::Any`].
pub(super) fn check_node<'a>(
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
pub(super) fn admit_items(
    core: &Core,
    caller: &Caller,
    verb: &str,
    items: usize,
) -> Result<(), Failure> {
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
pub(super) fn check_model(
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
pub(super) fn check_percentages(records: &[ProfileRecord]) -> Result<(), Failure> {
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
pub(super) fn memory_limit(state: &crate::EngineState, model: &str) -> u32 {
    state
        .gpu_models()
        .filter(|spec| spec.model == model)
        .map(|spec| spec.memory_mib)
        .max()
        .unwrap_or_else(|| bounds::largest_memory_of(model))
}

/// Refuses profile `i` when it used more memory than its GPU has: the largest peak of a job
/// sticks, so one such profile would keep its job off every shared GPU for good.
pub(super) fn check_memory(
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
pub(super) fn check_times(outcomes: &[Outcome]) -> Result<(), Failure> {
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

pub(super) fn check_keyed<'a>(
    ids: impl IntoIterator<Item = (String, &'a str)>,
) -> Result<(), Failure> {
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
