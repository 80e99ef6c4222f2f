//! Comparing policies: one [`Scenario`] replayed under each policy in turn, gathered into the
//! [`Report`] that the table, JSON and HTML page show.

use tandem_catalog::{Cluster, DeclaredModels, Trace};

use crate::error::Result;
use crate::inputs::check_inputs;
use crate::metrics::{Inputs, PolicyReport, PredictedUtilization, Report};
use crate::policy::{Known, PolicyName};
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

/// Replays the scenario under each policy in turn and gathers the report. `progress` is told
/// `(policy, share of its jobs finished)`.
pub fn compare(
    scenario: &Scenario<'_>,
    settings: &Settings,
    policies: &[PolicyName],
    runtime: &tandem_host::Runtime,
    command: String,
    progress: &mut dyn FnMut(&str, f64),
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
    let mut reports = Vec::new();
    for &name in policies {
        match name.build(&known, runtime, settings.seed)? {
            Ok(mut policy) => {
                let report = simulate(
                    scenario.truth,
                    scenario.cluster,
                    scenario.trace,
                    settings,
                    policy.as_mut(),
                    &mut |share| progress(name.as_str(), share),
                )?;
                reports.push(report);
            }
            Err(why) => reports.push(PolicyReport::not_applicable(name.as_str(), why)),
        }
    }
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
