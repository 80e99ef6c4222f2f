//! The memory guard and the per-GPU job cap: whether a job may join a GPU at all.
//!
//! No placement ever puts a GPU over its memory. A job of unknown memory (no profile, none
//! observed under its id, no declared model) may run alone on an idle GPU, or share one with
//! exactly one job it was observed sharing a GPU of that model with: an outcome proves the two
//! fit together, and nothing else would. A GPU holding such a job is closed to everyone else.
//! A job whose memory is a declared model's prediction beyond what the memory model was trained
//! on fits where that prediction fits, and shares like a job of unknown memory.
//! Whatever the figures, two jobs observed sharing a GPU of a model may share one again, the
//! two of them alone: a measured co-run outweighs predicted reservations and their margin.

use tandem_api::Policy;

use super::state::GpuState;
use crate::knowledge::{JobView, Knowledge};

/// Why a job may not join a GPU (see [`refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The GPU holds `max-jobs-per-gpu` jobs.
    Cap,
    /// A job of unknown memory is on it, and the newcomer was never seen sharing with it.
    BesideUnknownMemory,
    /// Its residents are reported over its memory.
    Overfull,
    /// The newcomer's memory is unknown and it was never seen sharing with what runs there.
    UnknownMemory,
    /// Not enough free memory.
    Memory,
    /// The newcomer or a member has no profile, and the two were never seen sharing.
    NoEvidence,
    /// The newcomer's or a member's memory is predicted beyond what the memory model was
    /// trained on, and the two were never seen sharing.
    Extrapolated,
}

/// Most jobs a GPU of `model` may hold under `policy`: no job may join a GPU that holds as
/// many ([`Refusal::Cap`], the first check of [`refusal`]), whatever the job.
pub(crate) fn cap(policy: &Policy, model: &str) -> usize {
    policy.max_jobs_on(model) as usize
}

/// Whether the job seen as `view` may join `state` now. Allocation-free: it runs for every
/// job and GPU, and the reason is spelled out ([`Refusal::describe`]) only when someone
/// reads it.
pub(super) fn refusal(
    knowledge: &Knowledge,
    state: &GpuState<'_>,
    view: &JobView,
) -> Option<Refusal> {
    if state.jobs() >= state.cap {
        return Some(Refusal::Cap);
    }
    let model = &state.gpu.spec.model;
    if state.unknown_memory.is_some() {
        // Only one job it was seen sharing this model with may join it.
        let only = &state.members[0].view;
        if state.jobs() > 1 || !knowledge.shared(only, view, model) {
            return Some(Refusal::BesideUnknownMemory);
        }
        return None;
    }
    if state.used_mib > state.capacity() {
        // Residents reported over the GPU's memory: the figures are wrong or the GPU is
        // about to fail; either way nothing more goes there.
        return Some(Refusal::Overfull);
    }
    // An outcome outweighs any figure: two jobs observed sharing a GPU of this model fit on one
    // together, whether their memory is unknown or predicted (with the margin kept for
    // predictions) past it.
    if let [only] = state.members.as_slice()
        && knowledge.shared(&only.view, view, model)
    {
        return None;
    }
    let Some(needed) = view.memory_mib.map(u64::from) else {
        return (!state.members.is_empty()).then_some(Refusal::UnknownMemory);
    };
    if needed > state.free_mib() {
        return Some(Refusal::Memory);
    }
    // Memory known from a declared model says nothing of interference by itself, and a
    // prediction the memory model does not vouch for may keep a job off a GPU too small for it,
    // never put it beside another: a job that may not share unseen (or beside one) shares only
    // with a job it was seen sharing this model with, as a job of unknown memory does.
    let unseen = view.may_share_unseen() && state.members.iter().all(|m| m.view.may_share_unseen());
    match state.members.as_slice() {
        [] => None,
        _ if unseen => None,
        _ if view.memory_extrapolated
            || state.members.iter().any(|m| m.view.memory_extrapolated) =>
        {
            Some(Refusal::Extrapolated)
        }
        _ => Some(Refusal::NoEvidence),
    }
}

/// Why the job seen as `view` may not join `state` now, if it may not, for a person.
pub(super) fn fits(
    knowledge: &Knowledge,
    policy: &Policy,
    state: &GpuState<'_>,
    view: &JobView,
) -> Result<(), String> {
    match refusal(knowledge, state, view) {
        None => Ok(()),
        Some(refusal) => Err(refusal.describe(
            policy,
            state,
            view,
            state.unknown_memory.unwrap_or_default(),
        )),
    }
}

impl Refusal {
    /// The refusal in words, naming what stands in the way on `state`. `unknown` is the
    /// resident of unknown memory to name ([`Refusal::BesideUnknownMemory`]): `state`'s own,
    /// or, where `state` stands for several GPUs the engine sees alike, that of the GPU the
    /// reason is for, since each holds a different job.
    pub(super) fn describe(
        self,
        policy: &Policy,
        state: &GpuState<'_>,
        view: &JobView,
        unknown: &str,
    ) -> String {
        let model = &state.gpu.spec.model;
        match self {
            Self::Cap => format!(
                "already holds {} job(s), the cap for a {model} is {}{}",
                state.jobs(),
                state.cap,
                if policy.model_caps.iter().any(|c| &c.gpu_model == model) {
                    " (policy.model-caps)"
                } else {
                    " (max-jobs-per-gpu)"
                }
            ),
            Self::BesideUnknownMemory => format!(
                "`{unknown}` on it has no known profile (unknown memory), and the job was never \
                 observed sharing a {model} with it"
            ),
            Self::Overfull => format!(
                "its residents already use {} MiB, more than its {} MiB",
                state.used_mib,
                state.capacity()
            ),
            Self::UnknownMemory => format!(
                "the job has no known profile (unknown memory): it may share a GPU only with \
                 one job it was observed sharing a {model} with, and this GPU holds {} other(s)",
                state.jobs()
            ),
            Self::NoEvidence => format!(
                "the job or a job on it has no profile, so nothing predicts how they would \
                 interfere, and they were never observed sharing a {model}; it may share only \
                 with a job it was seen sharing one with"
            ),
            Self::Extrapolated => format!(
                "the job's or a job's memory on it is predicted from a declared model larger \
                 than any the memory model was trained on, and they were never observed sharing \
                 a {model}; it may share only with a job it was seen sharing one with (or once \
                 its peak is measured)"
            ),
            Self::Memory => format!(
                "needs {} MiB but only {} of {} MiB are free",
                view.memory_mib.unwrap_or_default(),
                state.free_mib(),
                state.capacity()
            ),
        }
    }
}
