//! What the answer tells a person: why a job was left queued, and what each placement is
//! predicted to do and why it was made.

use tandem_api::{Placement, Policy, Prediction};

use super::forecast::{self, PairMemo};
use super::guard;
use super::resolve::Resolved;
use super::state::GpuState;
use crate::interference;
use crate::knowledge::Knowledge;

/// Why a job stays queued when every GPU it fits would slow someone down beyond what sharing
/// saves (`worst`: the smallest worst slowdown among them).
pub(super) fn too_harmful(worst: f64) -> String {
    format!(
        "every GPU it fits would mean a predicted worst slowdown of at least {:.0}%, \
         beyond what sharing saves under the balanced objective; left queued for a better slot",
        worst * 100.0
    )
}

/// Why a job waits for `later_gpu` rather than start on `now_gpu` (see `wait::for_faster`).
pub(super) fn waits(later_gpu: &str, later: f64, now_gpu: &str, now: f64) -> String {
    format!(
        "waits for {later_gpu}: estimated to finish in {later:.0} s there (after the jobs \
         before it) against {now:.0} s on {now_gpu} now"
    )
}

/// Why a job fits no GPU: what stops it on the GPU that comes closest.
pub(super) fn unplaceable(
    knowledge: &Knowledge,
    policy: &Policy,
    gpus: &[GpuState<'_>],
    resolved: &Resolved,
) -> String {
    if gpus.is_empty() {
        return "no GPUs were offered".into();
    }
    if resolved.views.iter().all(|v| v.memory_mib.is_none()) {
        return "it has no known profile and no declared model (unknown memory): it runs \
                alone on an idle GPU or beside one job it was observed sharing that GPU \
                model with, and no GPU offers either"
            .into();
    }
    // The GPU that comes closest: the least memory missing for the job on its model.
    let open = gpus
        .iter()
        .filter(|s| s.jobs() < s.cap && s.unknown_memory.is_none())
        .filter_map(|s| Some((s, u64::from(resolved.views[s.model].memory_mib?))));
    match open.min_by_key(|(s, needed)| needed.saturating_sub(s.free_mib())) {
        // Memory is not what stops it there: say what does.
        Some((closest, needed)) if needed <= closest.free_mib() => {
            let view = &resolved.views[closest.model];
            let why = guard::fits(knowledge, policy, closest, view)
                .err()
                .unwrap_or_default();
            format!("{}: {why}", closest.gpu.id)
        }
        Some((closest, needed)) => format!(
            "needs {needed} MiB on a {} ({} MiB free on {}, the closest fit under the job cap)",
            closest.gpu.spec.model,
            closest.free_mib(),
            closest.gpu.id
        ),
        None if gpus.iter().any(|s| s.jobs() < s.cap) => {
            "every GPU under its job cap runs a resident of unknown memory".into()
        }
        None => "every GPU already holds as many jobs as its cap allows (max-jobs-per-gpu, \
                 or policy.model-caps for its model)"
            .into(),
    }
}

/// The placement of `placed` (jobs of this plan) on `state`, with its prediction and reason.
pub(super) fn placement(
    knowledge: &Knowledge,
    memo: Option<&PairMemo>,
    policy: &Policy,
    state: &GpuState<'_>,
    placed: &[&str],
) -> Placement {
    let group = forecast::predict(knowledge, memo, &state.members, None);
    let slowdown_pct = state.members[state.residents..]
        .iter()
        .zip(&group.slowdowns[state.residents..])
        .map(|(_, s)| (s * 100.0) as f32)
        .collect();
    let worst = group.worst();
    let saving = interference::packing_saving(&group.slowdowns);
    let gpu = &state.gpu.id;
    let memory = match state.unknown_memory {
        None => format!("{} of {} MiB", state.used_mib, state.capacity()),
        Some(_) => format!("unknown memory, up to {} MiB", state.capacity()),
    };
    let reason = if state.members.len() == 1 {
        format!(
            "alone on {gpu} ({memory}): the {} objective found no better co-runner",
            policy.objective
        )
    } else {
        let evidence = if group.learned {
            "learned from observed outcomes"
        } else if state.members.iter().all(|m| m.view.features.is_some()) {
            "analytic prior from the profiles"
        } else {
            "no evidence yet"
        };
        format!(
            "{} jobs share {gpu} ({memory}): predicted packing saving {:.0}%, worst slowdown {:.0}% ({evidence}, {} objective)",
            state.members.len(),
            saving * 100.0,
            worst * 100.0,
            policy.objective
        )
    };
    Placement {
        jobs: placed.iter().map(|id| (*id).to_owned()).collect(),
        residents: state.members[..state.residents]
            .iter()
            .map(|m| m.id.to_owned())
            .collect(),
        gpu: gpu.clone(),
        predicted: Prediction {
            slowdown_pct,
            packing_saving_pct: (saving * 100.0) as f32,
            uncertainty: group.uncertainty as f32,
            peak_mem_mib: u32::try_from(state.peak_mib()).unwrap_or(u32::MAX),
        },
        reason,
    }
}
