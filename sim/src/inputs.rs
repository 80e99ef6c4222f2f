//! Checks a scenario's inputs against the ground truth before any replay: every GPU model and
//! job type known, every job able to run somewhere. Both [`simulate`](crate::simulate) and
//! [`compare`](crate::compare) call it, so a bad line is reported before any policy runs.

use tandem_catalog::{Cluster, Trace};

use crate::error::{Result, at_line};
use crate::truth::Truth;

/// Checks `trace` and `cluster` against `truth`: every job type and GPU model known, every job
/// able to run somewhere in the cluster. Errors name the line.
pub fn check_inputs(truth: &Truth, cluster: &Cluster, trace: &Trace) -> Result<()> {
    let mut models = Vec::new();
    for (group, line) in cluster.groups.iter().zip(&cluster.lines) {
        let Some(m) = truth.model(&group.gpu_model) else {
            let known: Vec<&str> = truth.models().iter().map(|m| m.name.as_str()).collect();
            return Err(at_line(
                &cluster.origin,
                *line,
                format!(
                    "GPU model `{}` is not in the catalogs (they measured {})",
                    group.gpu_model,
                    known.join(", ")
                ),
            ));
        };
        models.push((m, group.nodes * group.gpus_per_node, group.gpus_per_node));
    }
    for (job, line) in trace.jobs.iter().zip(&trace.lines) {
        let Some(t) = truth.job_type(&job.job_type) else {
            return Err(at_line(
                &trace.origin,
                *line,
                format!("unknown job type `{}` (not in the catalogs)", job.job_type),
            ));
        };
        let runnable = models.iter().any(|&(m, total, _)| {
            truth.throughput(t, m).is_some() && total >= job.gpus && truth.oom(m, &[t]).is_none()
        });
        if !runnable {
            return Err(at_line(
                &trace.origin,
                *line,
                format!(
                    "job type `{}` needing {} GPU(s) can run nowhere in the cluster (no model with its throughput measured, enough GPUs and enough memory for it)",
                    job.job_type, job.gpus
                ),
            ));
        }
    }
    Ok(())
}
