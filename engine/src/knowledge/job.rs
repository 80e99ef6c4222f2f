//! A job as the predictor sees it.

use crate::features::Features;
use crate::learning::{PairBelief, UNCERTAINTY_LOG_STD};
use crate::workloads::OnModel;

/// Predicted slowdowns of a group's members; a GPU holds a few jobs, so they live on the stack.
pub(crate) type Slowdowns = smallvec::SmallVec<[f64; 4]>;

/// What a group sharing one GPU is predicted to do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GroupPrediction {
    /// Each member's predicted slowdown (fraction), in the group's order.
    pub(crate) slowdowns: Slowdowns,
    /// The largest member's predictive standard deviation of log slowdown, over
    /// [`crate::learning::UNCERTAINTY_LOG_STD`], capped at 1.
    pub(crate) uncertainty: f64,
    /// Whether any observed outcome informed the prediction.
    pub(crate) learned: bool,
}

impl GroupPrediction {
    /// The prediction of a group whose members' terms are `terms`, in the group's order.
    pub(crate) fn of(terms: &[PartnerTerms]) -> Self {
        let uncertainty = terms
            .iter()
            .fold(0.0_f64, |u, t| u.max(t.var.sqrt() / UNCERTAINTY_LOG_STD));
        Self {
            slowdowns: terms.iter().map(|t| t.slowdown).collect(),
            uncertainty: uncertainty.min(1.0),
            learned: terms.iter().any(|t| t.learned),
        }
    }
}

/// What one member of a group is predicted to suffer from its partners, pair beliefs summed
/// in the group's order: what a [`GroupPrediction`] is made of. A group's terms extend to a
/// newcomer (each member's pair with it added last, as it comes last in the group) without
/// predicting the members' pairs again.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct PartnerTerms {
    /// Sum of the predicted slowdowns next to each partner (fractions).
    pub(crate) slowdown: f64,
    /// Sum of their predictive variances (log slowdown²).
    pub(crate) var: f64,
    /// Whether an observed outcome informed any of them.
    pub(crate) learned: bool,
}

impl PartnerTerms {
    /// Adds what is believed about the member next to one more partner.
    pub(crate) fn add(&mut self, belief: PairBelief) {
        self.slowdown += belief.slowdown();
        self.var += belief.predictive_var();
        self.learned |= belief.learned;
    }
}

/// A job as the predictor sees it: its features and where it falls in the clustering when its
/// profile is known, its workload when outcomes named its id.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct JobView {
    /// Normalized telemetry; `None` for a job with no known profile.
    pub(crate) features: Option<Features>,
    pub(crate) cluster: Option<u32>,
    /// How unsure the knowledge base is about the job, 0..=1: the distance-based uncertainty of
    /// its cluster assignment for a profiled job (1 without clusters), the evidence on its
    /// workload otherwise.
    pub(crate) assignment_uncertainty: f64,
    /// Index of the job's id among the workloads outcomes named.
    pub(crate) workload: Option<usize>,
    /// Memory the job uses, in MiB; `None` when unknown.
    pub(crate) memory_mib: Option<u32>,
    /// Whether `memory_mib` is a declared model's prediction beyond what the memory model was
    /// trained on: it may rule a GPU out, never let the job share one (the guard then treats
    /// the job's memory as it treats unknown memory beside others).
    pub(crate) memory_extrapolated: bool,
    /// The GPU model it is seen on: interference learned on one model is not applied
    /// unchanged to another.
    pub(crate) gpu_model: OnModel,
    /// Variance, in slowdown², that predicted rather than measured features add to the
    /// profiles' prior of any pair the job is in: 0 for a profiled job, the utilization and
    /// memory-access models' error for a job known by its declared model alone.
    pub(crate) feature_var: f64,
}

impl JobView {
    /// Whether what is known of the job lets it share a GPU with a job it was never seen
    /// beside: features (measured, or predicted from its declared model) to predict the
    /// interference, and no memory figure past what the memory model vouches for. Whether the
    /// two fit in memory is asked apart.
    pub(crate) fn may_share_unseen(&self) -> bool {
        self.features.is_some() && !self.memory_extrapolated
    }

    /// What the predictor's answer for this job depends on, as bits (features, cluster,
    /// spread of predicted features, workload and GPU model, two to a word; not memory): two views with the same key are predicted alike, which the
    /// cluster view's states and pair memos rely on.
    pub(crate) fn prediction_key(&self) -> [u64; 5] {
        let [util, access, share] = self.features.map_or([u64::MAX; 3], |f| f.map(f64::to_bits));
        [
            util,
            access,
            share,
            // A declared job's features may equal a measured one's; its spread tells them apart.
            self.cluster.map_or(u64::from(u32::MAX), u64::from)
                | u64::from((self.feature_var as f32).to_bits()) << 32,
            self.workload.map_or(u64::from(u32::MAX), |w| w as u64) | self.gpu_model.key() << 32,
        ]
    }
}
