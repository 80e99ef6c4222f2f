//! A queued job as seen on each GPU model of a request: its view, how much slower or dearer
//! each model is for it, and its run time there.

use smallvec::SmallVec;
use tandem_api::{GpuSpec, Job, Priority};

use crate::knowledge::{JobView, Knowledge};

/// A queued job as seen on each GPU model of the request.
#[derive(Debug, Clone)]
pub(super) struct Resolved {
    /// The job on each model (index into the planner's models): the memory the guard reserves
    /// differs by model, the rest does not.
    pub(super) views: SmallVec<[JobView; 4]>,
    /// What running there costs beyond the job's best model, as a fraction of the best: run
    /// time, weighted by price or power under a `cost` or `energy` priority. 0 on the best
    /// model, and everywhere when the engine knows no speed of the job.
    pub(super) slowness: SmallVec<[f64; 4]>,
    /// Run time alone on each model, s, when the job's work and speed there are known.
    pub(super) solo_s: SmallVec<[Option<f64>; 4]>,
    /// Whether its user cares about finishing soon (`latency`, the default) rather than cost
    /// or energy, which waiting for a faster GPU does not lower.
    pub(super) latency: bool,
}

impl Resolved {
    /// The job as every model sees it alike (features, cluster, workload).
    pub(super) fn any(&self) -> &JobView {
        &self.views[0]
    }
}

/// `job` on every model of `models` (the distinct GPU models of the request).
pub(super) fn resolve(knowledge: &Knowledge, models: &[&GpuSpec], job: &Job) -> Resolved {
    let views = if models.is_empty() {
        smallvec::smallvec![knowledge.view_of(job)]
    } else {
        knowledge.views_on(job, models)
    };
    let weights = priority_weights(job.priority, models);
    let times: SmallVec<[Option<f64>; 4]> = knowledge
        .speeds(&job.id, models.iter().map(|spec| spec.model.as_str()))
        .map(|speed| speed.map(|s| 1.0 / s))
        .collect();
    // A model without a speed for the job counts as its slowest known one: never preferred
    // on a guess. Without any speed, run time is taken to be the same everywhere.
    let slowest = times.iter().flatten().copied().fold(f64::NAN, f64::max);
    let costs: SmallVec<[f64; 4]> = times
        .iter()
        .zip(&weights)
        .map(|(time, weight)| {
            let time = time.unwrap_or(if slowest.is_nan() { 1.0 } else { slowest });
            time * weight
        })
        .collect();
    let best = costs.iter().copied().fold(f64::INFINITY, f64::min);
    let slowness = costs.iter().map(|c| c / best - 1.0).collect();
    let solo_s = times
        .iter()
        .map(|time| job.work.zip(*time).map(|(work, time)| work * time))
        .collect();
    Resolved {
        views,
        slowness,
        solo_s,
        latency: matches!(job.priority, None | Some(Priority::Latency)),
    }
}

/// What a job's priority weighs a GPU model by, per unit of run time: its price, its power, or
/// nothing (latency), when every model offered states it; otherwise run time alone.
fn priority_weights(priority: Option<Priority>, specs: &[&GpuSpec]) -> Vec<f64> {
    let weight = |spec: &GpuSpec| match priority.unwrap_or(Priority::Latency) {
        Priority::Latency => Some(1.0),
        Priority::Cost => spec.price_per_hour.map(f64::from),
        Priority::Energy => spec.power_watts.map(f64::from),
    };
    let weights: Option<Vec<f64>> = specs.iter().map(|s| weight(s)).collect();
    weights
        .filter(|w| w.iter().all(|&x| x > 0.0))
        .unwrap_or_else(|| vec![1.0; specs.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_need_every_model_to_state_them() {
        let mut cheap = GpuSpec::new("K80", 11_441);
        cheap.price_per_hour = Some(0.5);
        let mut dear = GpuSpec::new("V100", 16_384);
        dear.price_per_hour = Some(2.5);
        let specs = [&cheap, &dear];
        assert_eq!(
            priority_weights(Some(Priority::Cost), &specs),
            vec![0.5, 2.5]
        );
        assert_eq!(
            priority_weights(Some(Priority::Energy), &specs),
            vec![1.0, 1.0]
        );
        assert_eq!(priority_weights(None, &specs), vec![1.0, 1.0]);
    }
}
