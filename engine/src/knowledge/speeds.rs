//! Speeds reported per workload and GPU model, and the speed of a workload on a model it was
//! never reported on.
//!
//! Speed on a model: the speed reported for the job's workload there, else a speed reported on
//! another model times the ratio between the two models, learned as the geometric mean of that
//! ratio over every workload reported on both (Gavel's throughputs show the ratio depends on
//! the workload, so the estimate is an average, the better the more workloads taught it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::identity::workload_of;

/// Speeds reported per workload and GPU model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Speeds {
    /// Workload -> GPU model -> work per second alone (the latest report).
    by_workload: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Speeds {
    /// Records a speed (replacing an earlier report for the same workload and model).
    pub(crate) fn observe(&mut self, job: &str, gpu_model: &str, work_per_s: f64) {
        self.by_workload
            .entry(workload_of(job).to_owned())
            .or_default()
            .insert(gpu_model.to_owned(), work_per_s);
    }

    /// Workloads with a speed on some model.
    pub(crate) fn workloads(&self) -> usize {
        self.by_workload.len()
    }

    /// Their ids.
    pub(crate) fn jobs(&self) -> impl Iterator<Item = &str> {
        self.by_workload.keys().map(String::as_str)
    }

    /// Forgets the speeds of the workload `job`.
    pub(crate) fn forget(&mut self, job: &str) {
        self.by_workload.remove(job);
    }

    /// Speed of `job`'s workload on `gpu_model`: reported, or scaled from the model with the
    /// best-supported ratio.
    pub(crate) fn speed(&self, job: &str, gpu_model: &str) -> Option<f64> {
        self.speed_from(self.by_workload.get(workload_of(job))?, gpu_model)
    }

    /// [`Speeds::speed`] on each of `gpu_models`, the workload's reports looked up once.
    pub(crate) fn speeds<'m>(
        &self,
        job: &str,
        gpu_models: impl Iterator<Item = &'m str>,
    ) -> impl Iterator<Item = Option<f64>> {
        let known = self.by_workload.get(workload_of(job));
        gpu_models.map(move |model| self.speed_from(known?, model))
    }

    /// Speed on `gpu_model` of a workload whose reports are `known`.
    fn speed_from(&self, known: &BTreeMap<String, f64>, gpu_model: &str) -> Option<f64> {
        if let Some(&speed) = known.get(gpu_model) {
            return Some(speed);
        }
        known
            .iter()
            .filter_map(|(from, &speed)| {
                self.ratio(from, gpu_model)
                    .map(|(ratio, support)| (speed * ratio, support))
            })
            .max_by_key(|&(_, support)| support)
            .map(|(speed, _)| speed)
    }

    /// Geometric mean of `speed on to / speed on from` over the workloads reported on both, and
    /// how many there were.
    fn ratio(&self, from: &str, to: &str) -> Option<(f64, usize)> {
        let (sum, n) = self
            .by_workload
            .values()
            .filter_map(|speeds| Some((speeds.get(from)?, speeds.get(to)?)))
            .fold((0.0, 0), |(sum, n), (a, b)| (sum + (b / a).ln(), n + 1));
        (n > 0).then(|| ((sum / n as f64).exp(), n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_carry_across_models_by_the_learned_ratio() {
        let mut speeds = Speeds::default();
        speeds.observe("a~1", "K80", 1.0);
        speeds.observe("a~2", "V100", 4.0);
        speeds.observe("b", "K80", 2.0);
        speeds.observe("b", "V100", 2.0 * 9.0);
        // Instances share their workload's speeds; b's V100 speed is its own.
        assert_eq!(speeds.speed("a~9", "V100"), Some(4.0));
        speeds.observe("c", "K80", 3.0);
        // c on a V100: the geometric mean of a's (4×) and b's (9×) ratios, 6×.
        let c = speeds.speed("c", "V100").unwrap_or_default();
        assert!((c - 18.0).abs() < 1e-9, "{c}");
        assert_eq!(speeds.speed("c", "P100"), None);
        assert_eq!(speeds.speed("d", "K80"), None);
    }
}
