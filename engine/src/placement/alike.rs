//! Queued jobs the planner sees alike, refused alike.
//!
//! Whether a queued job finds a GPU, and the reason it is given when it does not, depend on
//! the GPUs' states and on the job's views on each model (its features, cluster, workload and
//! memory), not on its id or its run time: the objective values a co-location by the group's
//! predicted slowdowns and saving, and the guard by memory and what was seen sharing. A job
//! refused everywhere leaves every GPU as it was, so until a job is placed, a later job with
//! the same views is refused for the same reason. A queue of recurring workloads (many
//! instances of few jobs) on a busy cluster meets this at almost every job: the sweep over
//! the GPUs is done once per kind of job, not once per job.

use super::resolve::Resolved;

/// The refusals given since the GPUs last changed.
#[derive(Default)]
pub(super) struct Refused {
    /// Each refused kind of job: its views, whether there was contention when it was judged
    /// (which decides whether idle GPUs are judged first), and why it was refused.
    given: Vec<(Resolved, bool, String)>,
}

impl Refused {
    /// Why a job seen as `resolved`, judged under `contention`, is refused, if a job seen
    /// alike was refused since the GPUs last changed.
    pub(super) fn reason_for(&self, resolved: &Resolved, contention: bool) -> Option<&str> {
        self.given
            .iter()
            .find(|(seen, under, _)| *under == contention && seen.views == resolved.views)
            .map(|(_, _, reason)| reason.as_str())
    }

    /// Records that the job seen as `resolved` was refused for `reason`.
    pub(super) fn remember(&mut self, resolved: Resolved, contention: bool, reason: &str) {
        self.given.push((resolved, contention, reason.to_owned()));
    }

    /// Forgets every refusal: a job was placed, so the GPUs changed.
    pub(super) fn forget(&mut self) {
        self.given.clear();
    }
}
