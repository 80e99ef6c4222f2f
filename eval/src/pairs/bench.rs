//! The measured ground truth of one GPU model of a catalog, shaped for the evaluation: job
//! types with a solo time, and the measured outcome of every pair of two different types.

use std::collections::HashMap;
use std::path::Path;

use tandem_api::{ModelSummary, Profile};
use tandem_catalog::{Catalog, DeclaredModels, colocated_times};

use crate::error::{Error, Result};

/// Solo time given to every job of a type whose catalog entry has throughputs rather than
/// completion times: each job then does the same amount of work (its type's throughput times
/// this), so pairs of different types are compared on equal footing.
pub const ASSUMED_SOLO_S: f64 = 1000.0;

/// One job type usable on the evaluated GPU model.
#[derive(Debug, Clone)]
pub(crate) struct TypeInfo {
    /// The catalog's name (a public benchmark name); never sent to the engine.
    pub name: String,
    /// Completion time alone, in seconds (measured, or [`ASSUMED_SOLO_S`]).
    pub solo_s: f64,
    /// Whether `solo_s` was measured rather than assumed.
    pub solo_measured: bool,
    /// Peak GPU utilization, 0..=100, from the profile or the approximate figure.
    pub gpu_util_pct: Option<f64>,
    /// Peak device memory from the profile, in MiB.
    pub mem_used_mib: Option<u32>,
    /// The catalog's profile of the type, when it has one (the profile path gives it to the
    /// engine; the per-id path never does).
    pub profile: Option<Profile>,
    /// The model the type declares (the catalog's, or `--models`'): Tandem's jobs of the type
    /// declare it, so the engine predicts their memory and interference from it.
    pub declared: Option<ModelSummary>,
}

/// A measured pair of two different job types.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MeasuredPair {
    /// Index of the first type (the lower index).
    pub a: usize,
    /// Index of the second type.
    pub b: usize,
    /// Completion times of `a` and `b` started together, in seconds.
    pub colocated_s: [f64; 2],
}

/// Ground truth for one GPU model.
#[derive(Debug, Clone)]
pub(crate) struct Bench {
    /// The catalog's name.
    pub catalog: String,
    /// The GPU model evaluated.
    pub gpu_model: String,
    /// Its device memory, in MiB.
    pub memory_mib: u32,
    /// Job types with solo data on the model, in catalog order.
    pub types: Vec<TypeInfo>,
    /// Measured pairs of two different types, in catalog order.
    pub pairs: Vec<MeasuredPair>,
    /// Self-pairs (two instances of one type) the catalog measured, left out.
    pub self_pairs_skipped: usize,
    /// (lower type index, higher type index) -> index in `pairs`.
    index: HashMap<(usize, usize), usize>,
}

impl Bench {
    /// Reads the ground truth of `gpu_model` (the catalog's only model when `None`).
    pub(crate) fn load(catalog: &Catalog, path: &Path, gpu_model: Option<&str>) -> Result<Self> {
        let models: Vec<&str> = catalog
            .gpu_models()
            .iter()
            .map(|g| g.model.as_str())
            .collect();
        let gpu = match gpu_model {
            Some(model) => catalog.gpu_model(model).ok_or_else(|| {
                Error::Setting(format!(
                    "--gpu-model {model}: {} has no such GPU model (it has: {})",
                    path.display(),
                    models.join(", ")
                ))
            })?,
            None => match catalog.gpu_models() {
                [only] => only,
                _ => {
                    return Err(Error::Setting(format!(
                        "--gpu-model: {} measured several GPU models; choose one of: {}",
                        path.display(),
                        models.join(", ")
                    )));
                }
            },
        };
        let model = gpu.model.as_str();

        let mut types = Vec::new();
        let mut type_index = HashMap::new();
        for job in catalog.job_types() {
            let measured = job.solo_time_s.get(model).copied();
            if measured.is_none() && !job.solo_throughput.contains_key(model) {
                continue;
            }
            type_index.insert(job.name.as_str(), types.len());
            types.push(TypeInfo {
                name: job.name.clone(),
                solo_s: measured.unwrap_or(ASSUMED_SOLO_S),
                solo_measured: measured.is_some(),
                gpu_util_pct: job
                    .profile
                    .as_ref()
                    .map(|p| f64::from(p.gpu_util_pct))
                    .or(job.gpu_util_pct_approx.map(f64::from)),
                mem_used_mib: job.profile.as_ref().map(|p| p.mem_used_mib),
                profile: job.profile.clone(),
                declared: job.declared.clone(),
            });
        }
        if types.len() < 2 {
            return Err(Error::Unusable {
                file: path.to_owned(),
                problem: format!(
                    "only {} job type(s) have a solo throughput or solo time on {model}; pairing needs at least 2",
                    types.len()
                ),
            });
        }

        let mut pairs = Vec::new();
        let mut index = HashMap::new();
        let mut self_pairs_skipped = 0;
        for record in catalog.pairs().iter().filter(|p| p.gpu_model == model) {
            if record.a == record.b {
                self_pairs_skipped += 1;
                continue;
            }
            // A pair naming a type without solo data cannot be scored: its solo time is unknown.
            let (Some(&ia), Some(&ib)) = (
                type_index.get(record.a.as_str()),
                type_index.get(record.b.as_str()),
            ) else {
                continue;
            };
            // Store with the lower index first, times oriented to match.
            let (a, b, stored_in_order) = if ia < ib {
                (ia, ib, true)
            } else {
                (ib, ia, false)
            };
            let solo = [types[a].solo_s, types[b].solo_s];
            // Measured completion times only make sense next to measured solo times; with
            // assumed solo times the speeds say what happens to the assumed work.
            let measured_times = record
                .colocated_time_s
                .filter(|_| types[a].solo_measured && types[b].solo_measured);
            let colocated_s = match measured_times {
                Some([ta, tb]) if stored_in_order => [ta, tb],
                Some([ta, tb]) => [tb, ta],
                None => {
                    let (speed_a, speed_b) = if stored_in_order {
                        (record.speed_a, record.speed_b)
                    } else {
                        (record.speed_b, record.speed_a)
                    };
                    colocated_times(solo, [speed_a, speed_b])
                }
            };
            index.insert((a, b), pairs.len());
            pairs.push(MeasuredPair { a, b, colocated_s });
        }

        Ok(Self {
            catalog: catalog.name().to_owned(),
            gpu_model: model.to_owned(),
            memory_mib: gpu.memory_mib,
            types,
            pairs,
            self_pairs_skipped,
            index,
        })
    }

    /// Gives each job type `models` names its declared model (over the catalog's); returns
    /// how many it named.
    pub(crate) fn declare(&mut self, models: &DeclaredModels) -> usize {
        let mut named = 0;
        for info in &mut self.types {
            if let Some(summary) = models.get(&info.name) {
                info.declared = Some(summary.clone());
                named += 1;
            }
        }
        named
    }

    /// Job types that declare their models.
    pub(crate) fn declared_models(&self) -> usize {
        self.types.iter().filter(|t| t.declared.is_some()).count()
    }

    /// Completion times of types `a` and `b` (in that order) started together, or `None` if
    /// the pair was not measured.
    pub(crate) fn colocated(&self, a: usize, b: usize) -> Option<[f64; 2]> {
        let &p = self.index.get(&(a.min(b), a.max(b)))?;
        let times = self.pairs[p].colocated_s;
        Some(if a < b { times } else { [times[1], times[0]] })
    }

    /// Solo times of the two jobs of a measured pair, seconds.
    fn solo_s(&self, pair: &MeasuredPair) -> [f64; 2] {
        [self.types[pair.a].solo_s, self.types[pair.b].solo_s]
    }

    /// Packing saving of a measured pair, a fraction (the catalog's definition).
    pub(crate) fn packing_saving(&self, pair: &MeasuredPair) -> f64 {
        tandem_catalog::packing_saving(self.solo_s(pair), pair.colocated_s)
    }

    /// What the JRS ranking knows of a measured pair.
    pub(crate) fn jrs_score(&self, pair: &MeasuredPair) -> tandem_sim::policy::JrsScore {
        tandem_sim::policy::JrsScore::of(self.solo_s(pair), pair.colocated_s)
    }

    /// IndSD (fractions) of the two jobs of a measured pair.
    pub(crate) fn slowdowns(&self, pair: &MeasuredPair) -> [f64; 2] {
        [
            tandem_catalog::individual_slowdown(self.types[pair.a].solo_s, pair.colocated_s[0]),
            tandem_catalog::individual_slowdown(self.types[pair.b].solo_s, pair.colocated_s[1]),
        ]
    }

    /// Whether every solo time was measured (else some or all are [`ASSUMED_SOLO_S`]).
    pub(crate) fn solo_times_measured(&self) -> bool {
        self.types.iter().all(|t| t.solo_measured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CATALOG: &str = r#"{
      "name": "tiny", "source": "tests",
      "gpu_models": [{"model": "T4", "memory_mib": 15360}, {"model": "K80", "memory_mib": 12288}],
      "job_types": [
        {"name": "a", "profile": null, "declared": null, "solo_time_s": {"T4": 100.0}},
        {"name": "b", "profile": null, "declared": null, "solo_time_s": {"T4": 50.0}},
        {"name": "c", "profile": null, "declared": null, "solo_throughput": {"K80": 2.0}},
        {"name": "d", "profile": null, "declared": null, "solo_throughput": {"T4": 3.0, "K80": 1.0},
         "gpu_util_pct_approx": 30}
      ],
      "pairs": [
        {"gpu_model": "T4", "a": "b", "b": "a", "speed_a": 0.8, "speed_b": 0.5},
        {"gpu_model": "T4", "a": "d", "b": "a", "speed_a": 0.5, "speed_b": 0.5,
         "colocated_time_s": [1.0, 2.0]},
        {"gpu_model": "T4", "a": "a", "b": "a", "speed_a": 0.5, "speed_b": 0.5},
        {"gpu_model": "K80", "a": "c", "b": "d", "speed_a": 0.5, "speed_b": 0.5}
      ]
    }"#;

    fn catalog() -> Catalog {
        Catalog::parse(CATALOG, "tiny.json").unwrap()
    }

    #[test]
    fn keeps_types_with_solo_data_and_orients_pairs() {
        let bench = Bench::load(&catalog(), Path::new("tiny.json"), Some("T4")).unwrap();
        let names: Vec<&str> = bench.types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "d"]);
        assert_eq!(bench.types[2].solo_s, ASSUMED_SOLO_S);
        assert_eq!(bench.types[2].gpu_util_pct, Some(30.0));
        assert!(!bench.solo_times_measured());
        assert_eq!(bench.self_pairs_skipped, 1);
        assert_eq!(bench.pairs.len(), 2);
        // Stored as (b, a) with speeds 0.8, 0.5: a (100 s) at 0.5, b (50 s) at 0.8.
        assert_eq!(bench.colocated(0, 1), Some([131.25, 62.5]));
        assert_eq!(bench.colocated(1, 0), Some([62.5, 131.25]));
        // d's solo time is assumed, so the measured times are not used: both at half speed.
        assert_eq!(bench.colocated(0, 2), Some([200.0, 1100.0]));
        assert_eq!(bench.colocated(1, 2), None);
        let first = bench.pairs[0];
        assert!((bench.packing_saving(&first) - 0.125).abs() < 1e-12);
        assert_eq!(bench.slowdowns(&first), [0.3125, 0.25]);
    }

    #[test]
    fn the_gpu_model_must_be_named_when_there_are_several() {
        let error = Bench::load(&catalog(), Path::new("tiny.json"), None).unwrap_err();
        assert!(error.to_string().contains("--gpu-model"), "{error}");
        assert!(error.to_string().contains("T4, K80"), "{error}");
        let error = Bench::load(&catalog(), Path::new("tiny.json"), Some("A100")).unwrap_err();
        assert!(
            error.to_string().starts_with("--gpu-model A100: "),
            "{error}"
        );
        // On the K80 only c and d have solo data: enough for one pair.
        let bench = Bench::load(&catalog(), Path::new("tiny.json"), Some("K80")).unwrap();
        assert_eq!(bench.types.len(), 2);
        assert_eq!(bench.pairs.len(), 1);
    }
}
