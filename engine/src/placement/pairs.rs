//! `balanced` and `max-packing` under contention, first phase: queued jobs paired by
//! maximum-weight matching, each pair started on an idle GPU.

use smallvec::SmallVec;
use tandem_api::Job;

use super::forecast::{self, PairMemo};
use super::objective::Goal;
use super::order::Entry;
use super::resolve::Resolved;
use super::state::GpuState;
use crate::grouping;
use crate::interference;
use crate::knowledge::{GroupPrediction, JobView, Knowledge};

/// Most queued jobs the matching pairs; above it (the edges grow as n²) the planner places
/// jobs greedily only.
const PAIRING_LIMIT: usize = 600;

/// Pairs queued jobs by maximum-weight matching (see [`grouping`]) and starts each pair on an
/// idle GPU, best fit by memory, surest jobs' pairs first. An edge's weight is what the pair is
/// worth on its own GPU to the objective, `goal` ([`Goal::pair_value`]), less what the GPU's
/// model costs the two beyond their best models, so only pairs it values above running alone
/// are formed. An objective that wants the time saved whatever the risk
/// ([`Goal::expects_saving`]) values a pair by the time it is expected to save over the
/// uncertainty of its predicted slowdowns ([`interference::expected_saving`]): among many
/// pairs predicted from little evidence, the matching would otherwise favour those predicted
/// too well (docs/EVALUATION.md, "Declared models"). Before any outcome was observed, the
/// predictions are taken as they are.
///
/// When both run times are known (work and speeds), the time a pair saves follows them: the two
/// share until the first finishes and the other then runs alone
/// ([`interference::time_saved_s`]), so a long job beside a short one saves at most the short
/// one's time and partners that finish together are preferred. The objective says whether a
/// pair then weighs the seconds it saves or the share of its run time ([`Goal::weighs_seconds`]).
/// Without run times, jobs are taken to run equally long. Returns the jobs still to place
/// (unpaired, or paired but left without an idle GPU big enough), in order; the greedy phase
/// places them, on GPUs with residents too.
pub(super) fn place_matched_pairs<'q>(
    goal: &dyn Goal,
    knowledge: &Knowledge,
    memo: Option<&PairMemo>,
    gpus: &mut [GpuState<'q>],
    queue: &'q [Job],
    order: Vec<Entry>,
    placed_on: &mut [Vec<&'q str>],
) -> Vec<Entry> {
    // Only an idle GPU whose cap admits two can take a pair.
    let pairable = |s: &GpuState<'_>| s.is_idle() && s.cap >= 2;
    // The largest such GPU of each model.
    // GPUs index the request's models; those past the last one a GPU uses take no pair.
    let models = gpus.iter().map(|s| s.model + 1).max().unwrap_or(0);
    let mut roomiest: SmallVec<[Option<u64>; 4]> = smallvec::smallvec![None; models];
    for s in gpus.iter().filter(|s| pairable(s)) {
        let room = &mut roomiest[s.model];
        *room = (*room).max(Some(s.capacity()));
    }
    if roomiest.iter().all(Option::is_none) {
        return order;
    }
    if order.len() > PAIRING_LIMIT {
        return order;
    }
    let mut idle_models: Vec<&str> = gpus
        .iter()
        .filter(|s| pairable(s))
        .map(|s| s.gpu.spec.model.as_str())
        .collect();
    idle_models.sort_unstable();
    idle_models.dedup();
    // The unit of pair values when run times are known and the objective weighs seconds: the
    // queued jobs' mean run time (each on its fastest model), the same for every pair, so the
    // matching maximizes the seconds saved. A pair of unknown run times counts as two jobs of
    // that length.
    let known: Vec<f64> = order.iter().filter_map(|(_, r)| fastest_s(r)).collect();
    let unit_s = (!known.is_empty()).then(|| known.iter().sum::<f64>() / known.len() as f64);
    // Before the first outcome every belief is the analytic prior, whose errors are one
    // formula's, shared by all pairs rather than independent: an expectation over independent
    // errors would then rank pairs by the prior's width (widest, relative to the slowdown, near
    // zero) instead of by evidence. Cold, the predictions are taken as they are.
    let spread = goal.expects_saving() && knowledge.has_outcomes();
    let mut edges = Vec::new();
    for a in 0..order.len() {
        for b in a + 1..order.len() {
            let (ra, rb) = (&order[a].1, &order[b].1);
            let (va, vb) = (ra.any(), rb.any());
            // Two jobs that may share unseen (`JobView::may_share_unseen`, as the guard asks)
            // may pair wherever their memory fits; any other pair only if it was seen sharing
            // (an outcome is the only evidence it fits and how it interferes).
            let fits = roomiest.iter().enumerate().any(|(m, room)| {
                let (a, b) = (&ra.views[m], &rb.views[m]);
                room.is_some_and(|room| {
                    a.may_share_unseen()
                        && b.may_share_unseen()
                        && pair_memory(a, b).is_some_and(|mib| mib <= room)
                })
            }) || knowledge.shared_on_any(va, vb, idle_models.iter().copied());
            if !fits {
                continue;
            }
            // Interference is predicted per GPU model: the pair is worth what it is worth on
            // the best model with an idle GPU to take it.
            let value = roomiest
                .iter()
                .enumerate()
                .filter(|(_, room)| room.is_some())
                .map(|(m, _)| {
                    let (ja, jb) = (&ra.views[m], &rb.views[m]);
                    let terms =
                        Knowledge::partner_terms(&[ja, jb], |x, y| knowledge.predict_pair(x, y));
                    let predicted = GroupPrediction::of(&terms);
                    let slowdowns = [terms[0].slowdown, terms[1].slowdown];
                    // A goal that takes the predictions as they are sees no spread.
                    let log_vars = if spread {
                        [terms[0].var, terms[1].var]
                    } else {
                        [0.0; 2]
                    };
                    let worst = slowdowns[0].max(slowdowns[1]);
                    let value =
                        |time_saved| goal.pair_value(time_saved, worst, predicted.uncertainty);
                    // Less what the model costs the two beyond their best ones, as the
                    // greedy phase weighs a GPU: a pair that saves time on a slow model may
                    // still finish later than the two would elsewhere.
                    let (sa, sb) = (ra.slowness[m], rb.slowness[m]);
                    match run_times(ra, rb, m).zip(unit_s) {
                        // Seconds saved, counted on the jobs' fastest models (a slow model's
                        // longer runs are no more saving), per the pair's mean run time; in
                        // the unit all pairs share when the objective weighs seconds.
                        Some((([ta, tb], [fa, fb]), unit)) => {
                            let saved = interference::expected_saving(slowdowns, log_vars, |s| {
                                interference::time_saved_s(s, &[ta, tb])
                            }) * (fa + fb)
                                / (ta + tb);
                            let mean = (fa + fb) / 2.0;
                            let weight = if goal.weighs_seconds() {
                                mean / unit
                            } else {
                                1.0
                            };
                            (value(saved / mean) - (sa * fa + sb * fb) / mean) * weight
                        }
                        None => {
                            let saved = interference::expected_saving(slowdowns, log_vars, |s| {
                                interference::time_saved(s)
                            });
                            value(saved) - sa - sb
                        }
                    }
                })
                .fold(f64::NEG_INFINITY, f64::max);
            if value > 0.0 {
                edges.push(grouping::Edge { a, b, value });
            }
        }
    }
    let mut pairs = grouping::best_pairs(order.len(), &edges);
    // Pairs holding the jobs of highest precedence choose their GPUs first.
    pairs.sort_by_key(|&(a, b)| a.min(b));
    let mut placed = vec![false; order.len()];
    for (a, b) in pairs {
        let (ra, rb) = (&order[a].1, &order[b].1);
        // The idle GPU whose model suits the pair best (least slowness), then best fit by
        // memory.
        let best_fit = gpus
            .iter()
            .enumerate()
            .filter(|(_, s)| pairable(s))
            .filter_map(|(g, s)| {
                let (va, vb) = (&ra.views[s.model], &rb.views[s.model]);
                let memory = pair_memory(va, vb);
                let left = match memory {
                    Some(memory) if s.free_mib() >= memory => Some(s.free_mib() - memory),
                    // Unknown memory, or predicted too large: any GPU of a model the two were
                    // seen sharing (an outcome outweighs a prediction, as in the guard).
                    _ => knowledge
                        .shared(va, vb, &s.gpu.spec.model)
                        .then(|| s.free_mib().saturating_sub(memory.unwrap_or(0))),
                }?;
                Some((g, ra.slowness[s.model] + rb.slowness[s.model], left))
            })
            .min_by(|x, y| x.1.total_cmp(&y.1).then(x.2.cmp(&y.2)))
            .map(|(g, _, _)| g);
        let Some(g) = best_fit else { continue };
        let model = gpus[g].model;
        for &member in &[a, b] {
            let (i, ref resolved) = order[member];
            gpus[g].add(&queue[i].id, resolved.views[model]);
            placed_on[g].push(&queue[i].id);
            placed[member] = true;
        }
        let state = &mut gpus[g];
        state.time_saved = forecast::predict(knowledge, memo, &state.members, None).time_saved;
    }
    order
        .into_iter()
        .zip(placed)
        .filter(|(_, placed)| !placed)
        .map(|(entry, _)| entry)
        .collect()
}

/// A job's run time alone on its fastest model, s, when known on any.
fn fastest_s(job: &Resolved) -> Option<f64> {
    job.solo_s
        .iter()
        .flatten()
        .copied()
        .filter(|t| *t > 0.0)
        .min_by(f64::total_cmp)
}

/// Two jobs' run times alone on model `m`, and on their fastest models, when all are known.
fn run_times(a: &Resolved, b: &Resolved, m: usize) -> Option<([f64; 2], [f64; 2])> {
    let on_m = [a.solo_s[m]?, b.solo_s[m]?];
    let fastest = [fastest_s(a)?, fastest_s(b)?];
    (on_m[0] + on_m[1] > 0.0).then_some((on_m, fastest))
}

/// Memory two jobs need together, if both are known.
fn pair_memory(a: &JobView, b: &JobView) -> Option<u64> {
    Some(u64::from(a.memory_mib?) + u64::from(b.memory_mib?))
}
