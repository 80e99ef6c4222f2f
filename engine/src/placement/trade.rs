//! After placing: jobs that started alone on GPUs of different models trade GPUs when that
//! lowers their total run time.

use super::resolve::Resolved;
use super::state::GpuState;

/// A job started alone on an idle GPU by this plan: the GPU's index, the job's id, and the job
/// on every model.
pub(super) type Alone<'a> = (usize, &'a str, Resolved);

/// Passes over the pairs; each trade strictly lowers the total, so a few suffice.
const PASSES: usize = 4;

/// Jobs placed one at a time take the best GPU left for them, so an early job may hold a
/// fast GPU that a later job would gain more from. Two jobs that each run alone on a GPU of
/// a different model trade GPUs when that lowers the sum of their run times (of their
/// slownesses, without run times) and each fits the other's GPU; repeated until no trade
/// helps (at most [`PASSES`] passes).
pub(super) fn trade_gpus<'a>(
    gpus: &mut [GpuState<'a>],
    alone: Vec<Alone<'a>>,
    placed_on: &mut [Vec<&'a str>],
) {
    let mut alone: Vec<Alone<'a>> = alone
        .into_iter()
        .filter(|(g, _, _)| gpus[*g].jobs() == 1)
        .collect();
    for _ in 0..PASSES {
        let mut traded = false;
        for a in 0..alone.len() {
            for b in a + 1..alone.len() {
                let (ga, gb) = (alone[a].0, alone[b].0);
                let (ma, mb) = (gpus[ga].model, gpus[gb].model);
                if ma == mb {
                    continue;
                }
                let (ra, rb) = (&alone[a].2, &alone[b].2);
                let before = pair_cost(ra, ma, rb, mb);
                let after = pair_cost(ra, mb, rb, ma);
                if after >= before * (1.0 - 1e-9)
                    || !gpus[gb].could_hold(&ra.views[mb])
                    || !gpus[ga].could_hold(&rb.views[ma])
                {
                    continue;
                }
                let (ida, idb) = (alone[a].1, alone[b].1);
                let (va, vb) = (ra.views[mb], rb.views[ma]);
                gpus[ga].reset_alone(idb, vb);
                gpus[gb].reset_alone(ida, va);
                placed_on[ga] = vec![idb];
                placed_on[gb] = vec![ida];
                alone[a].0 = gb;
                alone[b].0 = ga;
                traded = true;
            }
        }
        if !traded {
            break;
        }
    }
}

/// What running `a` on model `ma` and `b` on model `mb` costs together: the sum of their run
/// times when both want latency and both are known (what average JCT adds up), else of their
/// slownesses (weighted by their priorities).
fn pair_cost(a: &Resolved, ma: usize, b: &Resolved, mb: usize) -> f64 {
    match (a.solo_s[ma], b.solo_s[mb]) {
        (Some(ta), Some(tb)) if a.latency && b.latency => ta + tb,
        _ => a.slowness[ma] + b.slowness[mb],
    }
}
