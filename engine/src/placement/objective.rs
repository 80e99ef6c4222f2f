//! The objectives as types: what each wants of a placement, in one place per objective.
//!
//! - [`Balanced`]: the marginal time saved by sharing (in solo-time units), minus a penalty
//!   once the group's worst predicted slowdown, raised in proportion to the prediction's
//!   uncertainty, passes [`SLOWDOWN_TOLERANCE`]. Sharing is for contention: a co-location
//!   worth less than running alone is refused, and the job stays queued rather than wreck its
//!   co-runners.
//! - [`MinSlowdown`]: the smallest worst predicted slowdown (an idle GPU is best).
//! - [`MaxPacking`]: the marginal time saved by sharing, whatever it costs individual jobs;
//!   best fit by memory among equals, and the largest jobs choose first. It packs without
//!   contention too (the provider's view: GPU time saved).
//!
//! The planner asks [`goal`] for the policy's objective once and consults it wherever the
//! objectives differ.

use rand_xoshiro::Xoshiro256PlusPlus;
use tandem_api::{Job, Objective};

use super::order::{self, Entry};

/// Worst individual slowdown `balanced` accepts without penalty (50%, the threshold the
/// evaluation counts as a bad pairing).
pub(super) const SLOWDOWN_TOLERANCE: f64 = 0.5;
/// Value `balanced` loses per unit of slowdown beyond the tolerance: steep, so that a group
/// passes the tolerance only by a little, and only where it saves six times that much. A slope
/// of 1 lets a group saving 30% of its solo time slow a member by 80%, and on the demo a
/// quarter of the shared jobs then end slowed by more than half.
const SLOWDOWN_PENALTY: f64 = 6.0;
/// What one whole GPU of memory left free costs `max-packing`, in solo-time units: enough to
/// prefer the tighter fit between placements that save the same time, too little to outweigh
/// a time saving the predictor can tell apart.
const LOOSE_FIT_COST: f64 = 0.05;
/// How many predictive standard deviations (of log slowdown) `balanced` adds to the worst
/// predicted slowdown before the penalty applies: the slowdown it guards against is the upper
/// end of a one-sided ~70% interval, wider the less the prediction is known.
const RISK_AVERSION: f64 = 0.5;

/// What placing one job on one GPU would do, as the objectives weigh it.
pub(super) struct Effect {
    /// Time the GPU's group saves by sharing with the job, less what it saved without it, in
    /// solo-time units.
    pub(super) time_gained: f64,
    /// Worst predicted slowdown in the group, the newcomer included.
    pub(super) worst_slowdown: f64,
    /// How unsure the group's prediction is, 0..=1.
    pub(super) uncertainty: f64,
    /// Memory the GPU would have left, as a fraction of its memory (0 once a member's memory
    /// is unknown, or the newcomer's).
    pub(super) free_share: f64,
}

/// What an objective wants of a placement.
pub(super) trait Goal {
    /// The order in which queued jobs choose their GPUs.
    fn order(
        &self,
        entries: Vec<Entry>,
        queue: &[Job],
        exploration: f64,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Vec<Entry>;

    /// What the objective thinks of `effect`; higher is better.
    fn value(&self, effect: &Effect) -> f64;

    /// The GPU's score for the job, before rounding into 1..=100: `value` (from
    /// [`Goal::value`]) less the job's `slowness` on the GPU's model, as the choice weighs it.
    fn score(&self, effect: &Effect, value: f64, slowness: f64) -> f64;

    /// Whether, under contention, queued jobs are first paired by maximum-weight matching and
    /// each pair started on an idle GPU.
    fn pairs_first(&self) -> bool {
        false
    }

    /// What a pair of queued jobs is worth on an idle GPU of its own, for the matching of
    /// [`Goal::pairs_first`]: `time_saved` by sharing (solo-time units), its `worst_slowdown`
    /// and the prediction's `uncertainty`. Only pairs worth more than 0 are formed.
    fn pair_value(&self, time_saved: f64, worst_slowdown: f64, uncertainty: f64) -> f64 {
        Balanced::pair_value(time_saved, worst_slowdown, uncertainty)
    }

    /// Whether, when run times are known, the matching of [`Goal::pairs_first`] weighs a pair
    /// by the seconds it saves (a pair of long jobs outweighs a pair of short ones: GPU time is
    /// what the objective wants) rather than by the share of its run time it saves (partners
    /// that finish together first, whatever their length: a long job shared is slowed for
    /// long, which is what a job's user feels).
    fn weighs_seconds(&self) -> bool {
        false
    }

    /// Whether the matching of [`Goal::pairs_first`] values a pair by the time it is
    /// *expected* to save over the uncertainty of its predicted slowdowns
    /// ([`crate::interference::expected_saving`]) rather than by what its predictions alone
    /// would save: what an objective that wants the most time saved, whatever the risk, should
    /// maximize. An objective that prices the risk itself (`balanced`'s pessimistic penalty)
    /// takes the predictions as they are.
    fn expects_saving(&self) -> bool {
        false
    }

    /// Whether, while idle GPUs remain for every job still to place, a job that fits an idle
    /// GPU is judged on idle GPUs only (sharing would only slow someone down).
    fn idle_first(&self) -> bool {
        false
    }

    /// Whether a placement of negative value is refused, leaving the job queued.
    fn refuses_harm(&self) -> bool {
        false
    }
}

/// The objective `objective` names.
pub(super) fn goal(objective: Objective) -> &'static dyn Goal {
    match objective {
        Objective::Balanced => &Balanced,
        Objective::MinSlowdown => &MinSlowdown,
        Objective::MaxPacking => &MaxPacking,
    }
}

/// `balanced`: time saved by sharing, less a penalty for slowdowns beyond the tolerance.
pub(super) struct Balanced;

impl Balanced {
    /// What a pair is worth on a GPU of its own: the time it saves less the slowdown penalty;
    /// only pairs better than running alone (positive) are worth forming.
    pub(super) fn pair_value(time_saved: f64, worst_slowdown: f64, uncertainty: f64) -> f64 {
        time_saved - slowdown_penalty(worst_slowdown, uncertainty)
    }
}

impl Goal for Balanced {
    fn order(
        &self,
        entries: Vec<Entry>,
        queue: &[Job],
        exploration: f64,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Vec<Entry> {
        order::surest_first(entries, queue, exploration, rng)
    }

    fn value(&self, effect: &Effect) -> f64 {
        effect.time_gained - slowdown_penalty(effect.worst_slowdown, effect.uncertainty)
    }

    fn score(&self, _: &Effect, value: f64, slowness: f64) -> f64 {
        50.0 + 50.0 * (value - slowness).clamp(-1.0, 1.0)
    }

    fn pairs_first(&self) -> bool {
        true
    }

    fn idle_first(&self) -> bool {
        true
    }

    fn refuses_harm(&self) -> bool {
        true
    }
}

/// `min-slowdown`: the smallest worst predicted slowdown.
pub(super) struct MinSlowdown;

impl Goal for MinSlowdown {
    fn order(
        &self,
        entries: Vec<Entry>,
        queue: &[Job],
        exploration: f64,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Vec<Entry> {
        order::surest_first(entries, queue, exploration, rng)
    }

    fn value(&self, effect: &Effect) -> f64 {
        -effect.worst_slowdown
    }

    fn score(&self, effect: &Effect, _: f64, slowness: f64) -> f64 {
        100.0 * (1.0 - (effect.worst_slowdown + slowness).min(1.0))
    }
}

/// `max-packing`: the provider's view, GPU time saved. A placement is worth the time sharing
/// saves (the packing saving JRS maximizes), slowdowns notwithstanding, and packs regardless of
/// contention; between placements that save the same, the one leaving the least memory free
/// (best fit). Under contention queued jobs are first matched into the pairs that save the
/// most.
pub(super) struct MaxPacking;

impl Goal for MaxPacking {
    fn order(
        &self,
        entries: Vec<Entry>,
        _: &[Job],
        _: f64,
        _: &mut Xoshiro256PlusPlus,
    ) -> Vec<Entry> {
        order::largest_first(entries)
    }

    fn value(&self, effect: &Effect) -> f64 {
        effect.time_gained - LOOSE_FIT_COST * effect.free_share
    }

    fn score(&self, _: &Effect, value: f64, slowness: f64) -> f64 {
        50.0 + 50.0 * (value - slowness).clamp(-1.0, 1.0)
    }

    fn pairs_first(&self) -> bool {
        true
    }

    fn pair_value(&self, time_saved: f64, _: f64, _: f64) -> f64 {
        time_saved
    }

    fn weighs_seconds(&self) -> bool {
        true
    }

    fn expects_saving(&self) -> bool {
        true
    }
}

/// What `balanced` charges for a group whose worst predicted slowdown is `worst`: nothing up to
/// [`SLOWDOWN_TOLERANCE`], then [`SLOWDOWN_PENALTY`] per unit beyond it. The slowdown is taken
/// pessimistically — raised by [`RISK_AVERSION`] predictive standard deviations, which the
/// uncertainty measures (see [`crate::learning::interval`]) — so a pairing the knowledge base
/// knows little about must promise more before it is made, and the outcome it then produces
/// makes the next decision surer.
fn slowdown_penalty(worst: f64, uncertainty: f64) -> f64 {
    let (_, pessimistic) = crate::learning::interval(worst, uncertainty, RISK_AVERSION);
    SLOWDOWN_PENALTY * (pessimistic - SLOWDOWN_TOLERANCE).max(0.0)
}
