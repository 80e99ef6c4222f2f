//! Tandem's trace-driven simulator of a heterogeneous GPU cluster.
//!
//! Jobs arrive from a [`Trace`]; a [`Policy`] decides, at every change, which queued jobs start
//! on which GPUs; the cluster runs them at the speeds someone *measured* ([`Truth`], built from
//! the catalogs in `data/catalogs/`). Jobs sharing a GPU progress at their measured pair speeds
//! and speed up again when a partner leaves; a group the catalogs never measured (unless its
//! catalog time-slices unmeasured pairs), or whose memory does not fit, fails with an OOM and
//! its jobs are resubmitted to run alone. New job
//! types are profiled alone before they may share. Finished co-locations are reported back to
//! every policy, so learning policies (Tandem, through the real engine component) learn during
//! the run. The [`Report`] gives JCT, makespan, queueing delay, utilization, slowdowns, packing
//! saving, OOMs and decisions per second per policy, as a table, JSON or an HTML page with
//! plots.
//!
//! Modules by concern: [`trace`], [`cluster`] and [`declared`] are the input formats and
//! [`convert`] builds traces and clusters from public traces (all four re-exported from
//! `tandem-catalog`, the home of public data and its converters), [`truth`] is the measured ground truth, [`settings`] a run's
//! settings, [`inputs`] the checks of a scenario before it runs, [`world`] the event loop,
//! [`comparison`] one scenario under every policy, [`policy`] the policies, [`utilization`]
//! the utilization the engine predicts from declared models for the utilization baselines,
//! [`metrics`] what is measured, [`report`] how it is shown.
//!
//! Imports point one way: `settings`, `error`, the input formats and `truth` import nothing
//! above them; `metrics` names the settings it reports but not the loop that measured them;
//! `world` runs one policy, `comparison` all of them; `report` reads only `metrics`. This root
//! only re-exports, and no module imports through it.

pub mod comparison;
pub mod demo;
pub mod error;
pub mod inputs;
pub mod metrics;
pub mod policy;
pub mod report;
pub mod settings;
pub mod truth;
pub mod utilization;
pub mod world;

// The input formats and their converters live with the rest of the public data in
// `tandem-catalog`; re-exported under their old paths so callers keep `tandem_sim::convert`.
pub use tandem_catalog::convert::traces as convert;
pub use tandem_catalog::{Cluster, DeclaredModels, Trace, cluster, declared, trace};

pub use comparison::{Scenario, compare};
pub use error::{Error, Result};
pub use metrics::{JobRecord, PolicyReport, PredictedUtilization, Report};
pub use policy::Policy;
pub use settings::Settings;
pub use truth::Truth;
pub use world::simulate;
