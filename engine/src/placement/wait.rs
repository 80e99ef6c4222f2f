//! JCT-aware placement (SchedTune): a job may wait for a busy GPU that would finish it
//! clearly sooner than the idle one it could start on now.

use super::resolve::Resolved;
use super::state::GpuState;

/// How much sooner a job must finish on a busy GPU, waiting for it, than on the idle GPU it
/// could start on now, for the planner to keep it queued: estimates of when a GPU frees up are
/// optimistic (they assume its residents run at their solo speed), so waiting must clearly pay.
const WAIT_GAIN: f64 = 0.25;

/// A GPU worth waiting for: its index, and the job's estimated completion there and on the
/// idle GPU it would start on now, s.
pub(super) struct Wait {
    pub(super) gpu: usize,
    pub(super) later_s: f64,
    pub(super) now_s: f64,
}

/// A job under the `latency` priority about to start alone on idle GPU `now` whose estimated
/// completion would come clearly sooner ([`WAIT_GAIN`]) by waiting for a busy GPU — running
/// there after the residents and after the queued jobs already waiting for it — waits for it
/// instead. `free_in` is, per GPU, the seconds until it is free for a newcomer (`None` where
/// unknown); the job's run time is booked on the GPU it waits for.
pub(super) fn for_faster(
    gpus: &[GpuState<'_>],
    free_in: &mut [Option<f64>],
    resolved: &Resolved,
    now: usize,
) -> Option<Wait> {
    if !resolved.latency {
        return None;
    }
    let start_now = resolved.solo_s[gpus[now].model]?;
    let (gpu, later) = gpus
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_idle())
        .filter(|(_, s)| s.could_hold(&resolved.views[s.model]))
        .filter_map(|(g, s)| Some((g, free_in[g]? + resolved.solo_s[s.model]?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    if later >= start_now * (1.0 - WAIT_GAIN) {
        return None;
    }
    let run = resolved.solo_s[gpus[gpu].model]?;
    if let Some(free) = &mut free_in[gpu] {
        *free += run;
    }
    Some(Wait {
        gpu,
        later_s: later,
        now_s: start_now,
    })
}
