//! Policies: who decides which queued job starts where.
//!
//! Every policy sees the same [`View`] at every decision: the head of the queue (a window, in
//! arrival order), every GPU with its running jobs, and what any scheduler of a real cluster
//! could know about the job types ([`Known`]): the solo throughput of each type on each model
//! (the history of its solo runs), and its profile and GPU utilization only where the catalog
//! measured them (or, for the utilization baselines, where the engine predicted the utilization
//! from a declared model). Pair speeds are never shown: a policy learns them only from the outcomes it is
//! told about ([`Policy::learn`]): the history (a share of the catalog's measured pairs, the
//! same for every policy) and every co-location finished during the run.
//!
//! The simulator enforces the cluster's rules on every [`Start`] (a job runs where its type was
//! measured; multi-GPU jobs, jobs resubmitted after an OOM and jobs whose type is still being
//! profiled get idle GPUs and nobody joins them; at most [`MAX_GROUP`] jobs share a GPU); a
//! policy that breaks one stops the run with [`Error::Policy`](crate::Error::Policy).

mod api;
mod baselines;
mod tandem;

pub use api::{
    GpuView, JobId, Known, KnownType, MAX_GROUP, Observed, Policy, QueuedJob, Resident, Start, View,
};
pub use baselines::{
    ExclusiveFifo, FfdUtilization, JrsRanking, JrsScore, LucidStyle, RandomColocation,
    SchedTuneMinJct,
};
pub use tandem::Tandem;

use crate::error::Result;

/// Every policy the simulator can compare, by its name in reports and on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyName {
    /// [`ExclusiveFifo`].
    ExclusiveFifo,
    /// [`RandomColocation`].
    Random,
    /// [`FfdUtilization`].
    FfdUtil,
    /// [`SchedTuneMinJct`].
    SchedTuneMinJct,
    /// [`JrsRanking`].
    JrsRanking,
    /// [`LucidStyle`].
    LucidStyle,
    /// [`Tandem`], balanced objective.
    TandemBalanced,
    /// [`Tandem`], minimum slowdown.
    TandemMinSlowdown,
    /// [`Tandem`], maximum packing.
    TandemMaxPacking,
    /// [`Tandem`], balanced, told no speeds ([`Tandem::blind`]): the heterogeneity ablation.
    TandemBalancedBlind,
    /// [`Tandem`], balanced, declared models withheld ([`Tandem::undeclared`]): the memory
    /// guard ablation.
    TandemBalancedUndeclared,
}

impl PolicyName {
    /// Every policy, baselines first.
    pub const ALL: [PolicyName; 11] = [
        PolicyName::ExclusiveFifo,
        PolicyName::Random,
        PolicyName::FfdUtil,
        PolicyName::SchedTuneMinJct,
        PolicyName::JrsRanking,
        PolicyName::LucidStyle,
        PolicyName::TandemBalanced,
        PolicyName::TandemMinSlowdown,
        PolicyName::TandemMaxPacking,
        PolicyName::TandemBalancedBlind,
        PolicyName::TandemBalancedUndeclared,
    ];

    /// The name in reports and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyName::ExclusiveFifo => "exclusive-fifo",
            PolicyName::Random => "random",
            PolicyName::FfdUtil => "ffd-util",
            PolicyName::SchedTuneMinJct => "schedtune-min-jct",
            PolicyName::JrsRanking => "jrs-ranking",
            PolicyName::LucidStyle => "lucid-style",
            PolicyName::TandemBalanced => "tandem-balanced",
            PolicyName::TandemMinSlowdown => "tandem-min-slowdown",
            PolicyName::TandemMaxPacking => "tandem-max-packing",
            PolicyName::TandemBalancedBlind => "tandem-balanced-blind",
            PolicyName::TandemBalancedUndeclared => "tandem-balanced-undeclared",
        }
    }

    /// The policy of that name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// Builds the policy, or says why it cannot run on what is known (a baseline that needs
    /// utilizations the catalogs lack). Tandem's policies need the engine `runtime`.
    pub fn build(self, known: &Known, runtime: &tandem_host::Runtime, seed: u64) -> Result<Built> {
        use tandem_api::Objective;
        let ready = |policy: Box<dyn Policy>| Ok(Built::Ready(policy));
        let applicable = |built: Result<Box<dyn Policy>, String>| {
            Ok(built.map_or_else(Built::NotApplicable, Built::Ready))
        };
        let tandem = |objective| ready(Box::new(Tandem::new(runtime, objective, known, seed)?));
        match self {
            PolicyName::ExclusiveFifo => ready(Box::new(ExclusiveFifo)),
            PolicyName::Random => ready(Box::new(RandomColocation::new(seed))),
            PolicyName::FfdUtil => {
                applicable(FfdUtilization::new(known).map(|p| Box::new(p) as Box<dyn Policy>))
            }
            PolicyName::SchedTuneMinJct => ready(Box::new(SchedTuneMinJct)),
            PolicyName::JrsRanking => ready(Box::<JrsRanking>::default()),
            PolicyName::LucidStyle => {
                applicable(LucidStyle::new(known).map(|p| Box::new(p) as Box<dyn Policy>))
            }
            PolicyName::TandemBalanced => tandem(Objective::Balanced),
            PolicyName::TandemMinSlowdown => tandem(Objective::MinSlowdown),
            PolicyName::TandemMaxPacking => tandem(Objective::MaxPacking),
            PolicyName::TandemBalancedBlind => ready(Box::new(Tandem::blind(
                runtime,
                Objective::Balanced,
                known,
                seed,
            )?)),
            PolicyName::TandemBalancedUndeclared => ready(Box::new(Tandem::undeclared(
                runtime,
                Objective::Balanced,
                known,
                seed,
            )?)),
        }
    }
}

/// A policy built for a run, or why it does not apply.
pub enum Built {
    /// The policy, ready to replay the trace.
    Ready(Box<dyn Policy>),
    /// It cannot run on what is known: why, for the report.
    NotApplicable(String),
}

impl std::fmt::Display for PolicyName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
