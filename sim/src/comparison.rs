//! Comparing policies: one [`Scenario`] replayed under each policy, gathered into the
//! [`Report`] that the table, JSON and HTML page show.

use rayon::prelude::*;
use tandem_catalog::{Cluster, DeclaredModels, Trace};

use crate::error::Result;
use crate::inputs::check_inputs;
use crate::metrics::{Inputs, PolicyReport, PredictedUtilization, Report};
use crate::policy::{Built, Known, PolicyName};
use crate::settings::Settings;
use crate::truth::Truth;
use crate::utilization;
use crate::world::simulate;

/// What a comparison replays: the ground truth, the cluster and the trace, with the names the
/// report gives them.
#[derive(Debug)]
pub struct Scenario<'a> {
    /// The measured ground truth.
    pub truth: &'a Truth,
    /// The cluster.
    pub cluster: &'a Cluster,
    /// Its name in the report (a file, or "built-in demo").
    pub cluster_name: String,
    /// The trace.
    pub trace: &'a Trace,
    /// Its name in the report.
    pub trace_name: String,
    /// Models declared for the job types, from which the engine predicts the GPU utilization
    /// the utilization baselines pack by (where the catalogs measured none); its origin names
    /// it in the report.
    pub declared: Option<&'a DeclaredModels>,
}

/// Replays the scenario under each policy and gathers the report, in the order of `policies`.
/// The replays are independent (each policy gets its own engine and the same seed), so they
/// run side by side, one per core, with the same results as one after another. `progress` is
/// told `(policy, share of its jobs finished)`, from the thread replaying that policy.
pub fn compare(
    scenario: &Scenario<'_>,
    settings: &Settings,
    policies: &[PolicyName],
    runtime: &tandem_host::Runtime,
    command: String,
    progress: &(dyn Fn(&str, f64) + Sync),
) -> Result<Report> {
    settings.check()?;
    check_inputs(scenario.truth, scenario.cluster, scenario.trace)?;
    let mut known = Known::of(scenario.truth);
    let predicted_utilization = match scenario.declared {
        Some(declared) => Some(PredictedUtilization {
            declared_models: declared.origin.clone(),
            job_types: utilization::predict(runtime, &mut known, declared)?,
        }),
        None => None,
    };
    let replay = |name: PolicyName| -> Result<PolicyReport> {
        match name.build(&known, runtime, settings.seed)? {
            Built::Ready(mut policy) => simulate(
                scenario.truth,
                scenario.cluster,
                scenario.trace,
                settings,
                policy.as_mut(),
                &mut |share| progress(name.as_str(), share),
            ),
            Built::NotApplicable(why) => Ok(PolicyReport::not_applicable(name.as_str(), why)),
        }
    };
    // `collect` keeps the policies' order, and stops handing out policies at the first error.
    let reports = policies
        .par_iter()
        .map(|&name| replay(name))
        .collect::<Result<Vec<_>>>()?;
    let mut gpus: Vec<(String, usize)> = Vec::new();
    for gpu in scenario.cluster.gpus() {
        match gpus.iter_mut().find(|(m, _)| *m == gpu.model) {
            Some((_, n)) => *n += 1,
            None => gpus.push((gpu.model, 1)),
        }
    }
    Ok(Report {
        command,
        inputs: Inputs {
            catalogs: scenario.truth.catalogs().to_vec(),
            trace: scenario.trace_name.clone(),
            jobs: scenario.trace.jobs.len(),
            cluster: scenario.cluster_name.clone(),
            gpus,
            predicted_utilization,
        },
        settings: settings.clone(),
        policies: reports,
    })
}
