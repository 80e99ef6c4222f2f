//! The Rust mirror of Tandem's WIT contract, `tandem:engine@0.5.0` (`wit/v0.5.0/engine.wit`,
//! which `wit/current` points to: the one path every binding generator reads).
//!
//! Every host-facing crate speaks these types: the engine implements its logic on them, the
//! component glue converts them to and from the canonical ABI, and `tandem-host` exposes them as
//! its typed API, so a caller cannot tell (except by speed and isolation) whether it talks to the
//! sandboxed component or to the engine compiled natively. Field names follow the WIT names in
//! `snake_case`, which is also their JSON form.
//!
//! Each item's documentation is the WIT's; keep the two in step.

pub mod bounds;
mod mirror;
mod view;

pub use view::{Binding, Choice, ClusterChange, ClusterSummary, GpuTable, Unbinding, ViewGpu};

use serde::{Deserialize, Serialize};

/// The WIT package this crate mirrors.
pub const WIT_PACKAGE: &str = "tandem:engine";
/// The WIT version this crate mirrors.
pub const WIT_VERSION: &str = "0.5.0";

/// Starts the message the engine component logs (at error level) just before a panic aborts
/// it, so the host can tell a panic from other traps and report the panic's own message.
pub const PANIC_PREFIX: &str = "guest panicked: ";

/// Severity of a log line the engine sends to its host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Very detailed tracing, usually disabled.
    Trace,
    /// Diagnostics for developers.
    Debug,
    /// Normal operation worth recording.
    Info,
    /// Something unexpected that the engine worked around.
    Warn,
    /// A failure; a guest panic is reported at this level just before the guest traps.
    Error,
}

/// Black-box telemetry of one job over its profiling window, measured on one GPU model.
///
/// This is everything the engine ever learns about what a job runs: no model name, dataset,
/// batch size, image, command or user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Maximum streaming-multiprocessor utilization seen in the window, 0..=100.
    pub gpu_util_pct: f32,
    /// Maximum share of time device memory was being read or written, 0..=100.
    pub mem_access_pct: f32,
    /// Maximum device memory the job used, in MiB.
    pub mem_used_mib: u32,
    /// GPU model the profile was measured on (for example `V100`).
    pub gpu_model: String,
}

/// Characteristics of one GPU model. Only `model` and `memory_mib` are required; the rest feed
/// heterogeneity-aware prediction and user priorities when a host knows them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuSpec {
    /// GPU model name (for example `V100`), matched against [`Profile::gpu_model`].
    pub model: String,
    /// Device memory, in MiB: 1 to 524,288 (512 GiB, more than any GPU has).
    pub memory_mib: u32,
    /// Streaming multiprocessors, if known.
    #[serde(default)]
    pub sm_count: Option<u32>,
    /// CUDA cores, if known.
    #[serde(default)]
    pub cuda_cores: Option<u32>,
    /// Tensor cores, if known.
    #[serde(default)]
    pub tensor_cores: Option<u32>,
    /// Memory bandwidth in GB/s, if known.
    #[serde(default)]
    pub mem_bandwidth_gbps: Option<f32>,
    /// Memory clock in MHz, if known.
    #[serde(default)]
    pub mem_clock_mhz: Option<u32>,
    /// Price of one GPU-hour in the operator's currency, if known.
    #[serde(default)]
    pub price_per_hour: Option<f32>,
    /// Board power in watts, if known.
    #[serde(default)]
    pub power_watts: Option<f32>,
}

impl GpuSpec {
    /// A spec that knows only the model and its memory.
    pub fn new(model: impl Into<String>, memory_mib: u32) -> Self {
        Self {
            model: model.into(),
            memory_mib,
            ..Self::default()
        }
    }
}

/// Opt-in description of a job's model, for placing it before any profiling. Sizes are finite,
/// 0 to 16 TiB, not all 0; `gflops` 0 to 1e12; `batch_size` 1 to 2^24; each layer count at
/// most 2^20 ([`bounds::model_summary`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSummary {
    /// Size of the parameters, in MiB.
    pub params_mib: f32,
    /// Size of the activations of one batch, in MiB.
    pub activations_mib: f32,
    /// Size of one input batch, in MiB.
    pub input_mib: f32,
    /// Training batch size.
    pub batch_size: u32,
    /// Floating-point work of one forward pass, in GFLOPs.
    pub gflops: f32,
    /// Number of convolution layers.
    pub conv_layers: u32,
    /// Number of fully connected layers.
    pub linear_layers: u32,
    /// Number of activation layers.
    pub activation_layers: u32,
    /// Number of all other layers.
    pub other_layers: u32,
}

/// What the user who submitted a job cares about most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// Finish as early as possible.
    Latency,
    /// Spend as little as possible (uses [`GpuSpec::price_per_hour`]).
    Cost,
    /// Use as little energy as possible (uses [`GpuSpec::power_watts`]).
    Energy,
}

/// One job, queued or already running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Opaque identifier. Hosts key real names (HMAC with a per-cluster secret) before they
    /// reach the engine; the engine never needs to know what a job is called.
    pub id: String,
    /// Telemetry from the job's profiling window, if it was profiled. When absent the engine
    /// falls back to a profile observed earlier under the same id.
    #[serde(default)]
    pub profile: Option<Profile>,
    /// The model the user declared instead of (or besides) being profiled.
    #[serde(default)]
    pub declared: Option<ModelSummary>,
    /// What the job's user cares about; `latency` when absent.
    #[serde(default)]
    pub priority: Option<Priority>,
    /// Submission time in seconds on the host's clock (the engine has no clock), finite and
    /// within ±1e12.
    #[serde(default)]
    pub submitted_at_s: f64,
    /// Work left, in the unit of the speeds reported for the job's workload with
    /// `observe-speed` (for example training steps). With it the engine turns speeds into run
    /// times: of a queued job, to weigh a slow GPU now against a fast one later; of a
    /// resident, to know when its GPU frees up. Finite, 0 to 1e18.
    #[serde(default)]
    pub work: Option<f64>,
}

impl Job {
    /// A job known only by its id (its profile was observed earlier, or is unknown).
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            profile: None,
            declared: None,
            priority: None,
            submitted_at_s: 0.0,
            work: None,
        }
    }

    /// A job with a profile.
    pub fn profiled(id: impl Into<String>, profile: Profile) -> Self {
        Self {
            profile: Some(profile),
            ..Self::new(id)
        }
    }
}

/// One GPU a job could be placed on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// Unique identifier, conventionally `<node>/<index>`.
    pub id: String,
    /// Node the GPU belongs to.
    pub node: String,
    /// Model and capacity of the GPU.
    pub spec: GpuSpec,
    /// Jobs already running on this GPU. A resident without a profile, and without one
    /// observed earlier, is treated as using the whole GPU: the engine never guesses memory in
    /// a job's favour.
    #[serde(default)]
    pub residents: Vec<Job>,
}

/// What a recommendation optimizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Objective {
    /// Maximize packing saving while keeping individual slowdown low.
    #[default]
    Balanced,
    /// The user's view: smallest individual slowdown.
    MinSlowdown,
    /// The provider's view: the most GPU time saved by sharing (packing saving), whatever it
    /// costs individual jobs; the tightest fit by memory among equal savings.
    MaxPacking,
}

impl Objective {
    /// Every objective, in WIT order.
    pub const ALL: [Objective; 3] = [
        Objective::Balanced,
        Objective::MinSlowdown,
        Objective::MaxPacking,
    ];

    /// The WIT / command-line name (`balanced`, `min-slowdown`, `max-packing`).
    pub fn name(self) -> &'static str {
        match self {
            Objective::Balanced => "balanced",
            Objective::MinSlowdown => "min-slowdown",
            Objective::MaxPacking => "max-packing",
        }
    }
}

impl std::fmt::Display for Objective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Objective {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Objective::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| {
                format!("unknown objective `{s}` (expected balanced, min-slowdown or max-packing)")
            })
    }
}

/// Settings of one recommender.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// What `recommend` optimizes.
    #[serde(default)]
    pub objective: Objective,
    /// Most jobs, residents included, that may share one GPU (at least 1).
    #[serde(default = "Policy::default_max_jobs_per_gpu")]
    pub max_jobs_per_gpu: u32,
    /// Probability, 0..=1, of ignoring the low-uncertainty-first precedence (exploration).
    #[serde(default)]
    pub exploration: f32,
    /// Caps for particular GPU models, overriding `max_jobs_per_gpu` there. At most one entry
    /// per model.
    #[serde(default)]
    pub model_caps: Vec<ModelCap>,
}

/// A cap on jobs per GPU for one GPU model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelCap {
    /// The GPU model ([`GpuSpec::model`]).
    pub gpu_model: String,
    /// Most jobs, residents included, that may share one GPU of this model (at least 1).
    pub max_jobs: u32,
}

impl Policy {
    /// Two jobs per GPU: the pairing the research this engine builds on measured.
    pub const DEFAULT_MAX_JOBS_PER_GPU: u32 = 2;

    /// Most jobs that may share one GPU of `model`: its entry in `model_caps`, else
    /// `max_jobs_per_gpu`.
    pub fn max_jobs_on(&self, model: &str) -> u32 {
        self.model_caps
            .iter()
            .find(|c| c.gpu_model == model)
            .map_or(self.max_jobs_per_gpu, |c| c.max_jobs)
    }

    /// The largest cap on any GPU model (`max_jobs_per_gpu` or an entry of `model_caps`).
    pub fn max_jobs_anywhere(&self) -> u32 {
        self.model_caps
            .iter()
            .map(|c| c.max_jobs)
            .fold(self.max_jobs_per_gpu, u32::max)
    }

    fn default_max_jobs_per_gpu() -> u32 {
        Self::DEFAULT_MAX_JOBS_PER_GPU
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            objective: Objective::default(),
            max_jobs_per_gpu: Self::DEFAULT_MAX_JOBS_PER_GPU,
            exploration: 0.0,
            model_caps: Vec::new(),
        }
    }
}

/// Measured result of one finished co-location, used to learn interference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// GPU model the jobs shared.
    pub gpu_model: String,
    /// Ids of the jobs that shared the GPU (profiles observed earlier).
    pub jobs: Vec<String>,
    /// Completion time of each job alone on that GPU model, in seconds.
    pub solo_s: Vec<f64>,
    /// Completion time of each job while co-located, in seconds.
    pub colocated_s: Vec<f64>,
}

/// Where `observe_profile` filed a job in the knowledge base.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// Cluster of similar jobs the profile belongs to.
    pub cluster: u32,
    /// 0 (at the cluster's centre) ..= 1 (far from any cluster).
    pub uncertainty: f32,
}

/// Predicted effect of a placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Individual slowdown of each placed job, in percent, in the order of
    /// [`Placement::jobs`]: `(co-located time - solo time) / solo time * 100`.
    pub slowdown_pct: Vec<f32>,
    /// Packing saving of the whole group on the GPU, in percent:
    /// `(sum of solo times - max co-located time) / sum of solo times * 100`.
    pub packing_saving_pct: f32,
    /// 0 (confident) ..= 1 (no evidence) for this prediction.
    pub uncertainty: f32,
    /// Predicted peak memory of the whole group on the GPU, residents included, in MiB.
    pub peak_mem_mib: u32,
}

/// Where a memory figure in an [`Estimate`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// The job's profile, measured on this GPU model.
    Observed,
    /// Its profile, measured on another GPU model: scaled by the ratio the memory model
    /// predicts between the two when the job declared its model, else taken as is.
    Transferred,
    /// Predicted from the declared model ([`Job::declared`]) for this GPU model.
    Declared,
    /// Nothing to go on: the guard reserves the whole GPU.
    Unknown,
}

impl std::fmt::Display for MemorySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Observed => "observed",
            Self::Transferred => "transferred",
            Self::Declared => "declared",
            Self::Unknown => "unknown",
        })
    }
}

/// What the engine expects of one job running alone on one GPU model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The GPU model.
    pub gpu_model: String,
    /// Where the memory figures come from.
    pub memory_source: MemorySource,
    /// Peak memory, in MiB, as measured or predicted; `None` when unknown.
    pub peak_mem_mib: Option<u32>,
    /// What the memory guard reserves: the peak, plus the memory model's margin when the peak
    /// is predicted; `None` when unknown (the whole GPU is reserved).
    pub reserved_mib: Option<u32>,
    /// Whether the reservation fits an empty GPU of this model (`false` when unknown).
    pub fits_empty: bool,
    /// Work per second alone on this GPU model: reported (`observe-speed`) or scaled from
    /// another model by the ratio learned across workloads; `None` when unknown.
    pub speed: Option<f64>,
    /// Run time alone, in seconds: `work / speed`; `None` without both.
    pub solo_s: Option<f64>,
    /// Price of that run time ([`GpuSpec::price_per_hour`]); `None` without both.
    pub cost: Option<f64>,
    /// Energy of that run time, in kJ ([`GpuSpec::power_watts`]); `None` without both.
    pub energy_kj: Option<f64>,
    /// Peak GPU utilization alone, in percent: the job's profile when it has one, else
    /// predicted from its declared model (trained on runs measured on one Tesla P100, so the
    /// same on every model); `None` without either.
    pub utilization_pct: Option<f32>,
}

/// Jobs the engine recommends placing together on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// Queued jobs to start on `gpu`, in the order of [`Prediction::slowdown_pct`].
    pub jobs: Vec<String>,
    /// Jobs already running on `gpu` that the placed jobs will share it with.
    pub residents: Vec<String>,
    /// The GPU chosen.
    pub gpu: String,
    /// What the engine expects to happen.
    pub predicted: Prediction,
    /// Why this placement was chosen, for a person to read.
    pub reason: String,
}

/// A queued job the engine could not place now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unplaced {
    /// The job's id.
    pub job: String,
    /// Why it was not placed, for a person to read.
    pub reason: String,
}

/// Answer of `recommend`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Recommendation {
    /// Groups to start, one per GPU.
    pub placements: Vec<Placement>,
    /// Jobs that stay queued.
    pub unplaced: Vec<Unplaced>,
}

/// Answer of `filter` for one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// The GPU judged.
    pub gpu: String,
    /// Whether the job may be placed there now.
    pub fits: bool,
    /// Why not (empty when it fits), for a person to read.
    pub reason: String,
}

/// Answer of `score` for one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuScore {
    /// The GPU judged.
    pub gpu: String,
    /// 0 (worst) ..= 100 (best); GPUs the job does not fit score 0.
    pub score: u8,
}

/// One cluster of similar profiles in the knowledge base.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// Stable id (kept across re-clustering while the centre stays put).
    pub id: u32,
    /// Centre: SM utilization, in percent.
    pub gpu_util_pct: f32,
    /// Centre: memory-access share, in percent.
    pub mem_access_pct: f32,
    /// Centre: memory used as a share of the GPU's memory, in percent.
    pub mem_share_pct: f32,
    /// Profiles assigned at the last clustering.
    pub members: u32,
    /// Mean distance of the members to the centre, in normalized feature units.
    pub radius: f32,
}

/// What was measured for jobs of one cluster sharing a GPU with jobs of another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairInfo {
    /// Cluster of the job whose slowdown this is.
    pub cluster: u32,
    /// Cluster of its co-runner.
    pub partner: u32,
    /// Outcomes behind these figures.
    pub observations: u32,
    /// Mean individual slowdown, in percent.
    pub slowdown_pct: f32,
    /// Standard deviation of the individual slowdown, in percent.
    pub slowdown_std_pct: f32,
    /// Mean packing saving of such pairs, in percent, if measured for exactly two jobs.
    pub packing_saving_pct: Option<f32>,
    /// Rank among all measured cluster pairs: best packing saving first, then least slowdown.
    pub rank: u32,
}

/// What a knowledge base holds (the answer of `describe`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnowledgeSummary {
    /// Profiles observed under (keyed) job ids.
    pub profiles: u32,
    /// Anonymous seed profiles the clustering started from.
    pub seed_points: u32,
    /// Outcomes learned from.
    pub outcomes: u32,
    /// Pairwise observations the pair-level predictor learned from.
    pub residual_observations: u32,
    /// Measured peaks the memory model trained on, bundled ones included.
    pub memory_rows: u32,
    /// The memory guard's margin, in percent of a predicted peak.
    pub memory_margin_pct: f32,
    /// Workloads with a reported speed on at least one GPU model.
    pub speed_workloads: u32,
    /// The clusters.
    pub clusters: Vec<ClusterInfo>,
    /// Measured cluster pairs.
    pub pairs: Vec<PairInfo>,
}

/// One profile of a workload at one batch size, measured or generated by `synthesize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    /// Batch size of the run; finite and positive.
    pub batch_size: f64,
    /// One value per feature, in the same order for every sample of a call (for example
    /// maximum GPU utilization %, maximum memory-access %, maximum memory allocated %).
    pub values: Vec<f64>,
}

/// The samples of one workload (one model on one dataset), known only by an opaque label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Series {
    /// Opaque label of the workload, unique within one call. Hosts pass labels such as `w1`,
    /// never model or dataset names.
    pub workload: String,
    /// Samples in any order.
    pub samples: Vec<Sample>,
}

/// How a feature is interpolated between measured batch sizes. No method extrapolates: outside
/// the measured range every method returns the value at the nearest end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interpolation {
    /// Straight lines between neighbouring points.
    Linear,
    /// Monotone piecewise cubic Hermite (Fritsch–Carlson, as SciPy's `PchipInterpolator`):
    /// never overshoots the data, flat at local extrema.
    Pchip,
    /// Natural cubic spline (zero second derivative at both ends): smooth, may overshoot.
    CubicSpline,
    /// The single polynomial through all points, in barycentric form: exact for polynomial
    /// data, oscillates between points otherwise.
    Barycentric,
}

impl Interpolation {
    /// Every method, in WIT order (simplest first: the order that breaks ties).
    pub const ALL: [Interpolation; 4] = [
        Interpolation::Linear,
        Interpolation::Pchip,
        Interpolation::CubicSpline,
        Interpolation::Barycentric,
    ];

    /// The WIT name (`linear`, `pchip`, `cubic-spline`, `barycentric`), as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Interpolation::Linear => "linear",
            Interpolation::Pchip => "pchip",
            Interpolation::CubicSpline => "cubic-spline",
            Interpolation::Barycentric => "barycentric",
        }
    }
}

impl std::fmt::Display for Interpolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How well one method predicted a workload's left-out points in the blinded evaluation (each
/// interior measured batch size predicted from all the others).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodScore {
    /// The workload's label.
    pub workload: String,
    /// The method judged.
    pub method: Interpolation,
    /// Root mean square error over every left-out prediction, in the features' units; `None`
    /// when there was nothing to leave out (fewer than 3 distinct batch sizes), infinite when
    /// a prediction overflowed.
    pub rmse: Option<f64>,
    /// Mean absolute error over the same predictions; `None` and infinite as `rmse`.
    pub mae: Option<f64>,
    /// Number of predictions: interior batch sizes times features.
    pub predictions: u32,
}

/// The method a workload's synthetic samples were generated with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BestMethod {
    /// The workload's label.
    pub workload: String,
    /// The lowest RMSE of the blinded evaluation, ties to the simpler method (in the order of
    /// [`Interpolation::ALL`]); `linear` when the workload has fewer than 3 batch sizes.
    pub method: Interpolation,
}

/// Answer of `synthesize`. Every list follows the order of the input workloads.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Synthesis {
    /// One score per workload and method, methods in the order of [`Interpolation::ALL`].
    pub scores: Vec<MethodScore>,
    /// The method chosen for each workload.
    pub best: Vec<BestMethod>,
    /// The synthetic samples of each workload, by increasing batch size; measured samples are
    /// not repeated. A workload with fewer than two batch sizes gets no samples.
    pub generated: Vec<Series>,
}

/// Errors the engine returns as values (a trap is never used for these).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "message")]
pub enum EngineError {
    /// An input breaks the contract (a NaN, a percentage out of range, duplicate ids,
    /// mismatched list lengths, an unreadable snapshot); the text names the field.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// An outcome or resident names a job whose profile the engine has never seen.
    #[error("unknown job: {0}")]
    UnknownJob(String),
    /// The request is well formed but cannot be satisfied (for example no GPU at all).
    #[error("infeasible: {0}")]
    Infeasible(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objective_names_round_trip_through_from_str_and_serde() {
        for objective in Objective::ALL {
            assert_eq!(objective.name().parse::<Objective>(), Ok(objective));
            let json = serde_json::to_string(&objective).unwrap();
            assert_eq!(json, format!("\"{}\"", objective.name()));
        }
        assert!(
            "fastest"
                .parse::<Objective>()
                .unwrap_err()
                .contains("fastest")
        );
    }

    #[test]
    fn interpolation_names_are_the_wit_names_in_serde_and_display() {
        let names: Vec<&str> = Interpolation::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names, ["linear", "pchip", "cubic-spline", "barycentric"]);
        for method in Interpolation::ALL {
            let json = serde_json::to_string(&method).unwrap();
            assert_eq!(json, format!("\"{method}\""));
        }
    }

    #[test]
    fn policy_fields_default_when_absent() {
        let policy: Policy = serde_json::from_str("{}").unwrap();
        assert_eq!(policy, Policy::default());
    }
}
