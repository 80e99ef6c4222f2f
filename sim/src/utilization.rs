//! Utilization predicted by the engine from declared models, for the utilization baselines.
//!
//! `ffd-util` and `lucid-style` pack by each job type's GPU utilization, which most catalogs
//! (Gavel's among them) never measured. Given the models the types' users declare
//! ([`DeclaredModels`]), the engine component predicts each type's peak utilization the way it
//! does for any declared job (`estimate`'s `utilization-pct`: Yeung et al.'s approach, a forest
//! trained on measured runs), and those baselines pack by the prediction. The figures are the
//! shipped engine's, asked through the host like every other engine call of the simulator.

use tandem_api::{GpuSpec, Job};
use tandem_catalog::DeclaredModels;
use tandem_host::Runtime;

use crate::error::{Error, Result, at_line};
use crate::policy::Known;

/// Sets every job type's [`predicted_util_pct`](crate::policy::KnownType::predicted_util_pct)
/// from its model in `declared`; returns how many types got one. A declared job type the
/// catalogs do not know is an input error naming its line.
pub fn predict(runtime: &Runtime, known: &mut Known, declared: &DeclaredModels) -> Result<usize> {
    for (model, line) in declared.models.iter().zip(&declared.lines) {
        if !known.types.iter().any(|t| t.name == model.job_type) {
            return Err(at_line(
                &declared.origin,
                *line,
                format!(
                    "unknown job type `{}` (not in the catalogs)",
                    model.job_type
                ),
            ));
        }
    }
    // The prediction is for the GPU the training runs were measured on, and the engine
    // reports it the same on every model: any of the cluster's models will do.
    let Some(gpu) = known.models.first() else {
        return Ok(0);
    };
    let gpu = GpuSpec::new(gpu.name.clone(), gpu.memory_mib);
    let failed = |source| Error::Prediction {
        origin: declared.origin.clone(),
        source,
    };
    let mut engine = runtime
        .bootstrap(&tandem_api::Policy::default(), 0)
        .map_err(failed)?;
    let mut predicted = 0;
    for (t, job_type) in known.types.iter_mut().enumerate() {
        let Some(summary) = declared.get(&job_type.name) else {
            continue;
        };
        // The engine sees an opaque id, never the type's name.
        let job = Job {
            declared: Some(summary.clone()),
            ..Job::new(format!("declared-{t}"))
        };
        let estimates = engine
            .estimate(&job, std::slice::from_ref(&gpu))
            .map_err(failed)?;
        job_type.predicted_util_pct = estimates.first().and_then(|e| e.utilization_pct);
        predicted += usize::from(job_type.predicted_util_pct.is_some());
    }
    Ok(predicted)
}
