//! Tandem itself, through the real component: train a recommender on observed outcomes, then
//! ask it to group queues and to predict held-out pairs.
//!
//! The engine sees keyed ids only: each job type's name is keyed once (HMAC-SHA256, as the CLI
//! keys job ids; see `tandem_wire::identity`) and every job of that type carries the keyed id, so what the engine learns
//! about a job type it learns per id, exactly as it would for a recurring workload.

use tandem_api::{Gpu, GpuSpec, Job, Objective, Outcome, Policy, Prediction};
use tandem_host::{Recommender, Runtime};
use tandem_wire::identity::keyed_id;

use super::bench::Bench;
use super::methods::Pairs;
use crate::error::{Error, Result};

/// How the engine took its training outcomes.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Training {
    /// Outcomes the engine accepted.
    pub outcomes_observed: usize,
    /// Outcomes it refused (an error value, or a call that failed); nothing is learned from
    /// those, and the evaluation carries on.
    pub outcomes_rejected: usize,
    /// The first refusal, for the reader.
    pub first_rejection: Option<String>,
}

/// A recommender trained on a set of measured pairs.
pub(crate) struct Trained {
    recommender: Recommender,
    /// Keyed id of each job type.
    ids: Vec<String>,
    /// How training went.
    pub training: Training,
}

impl Trained {
    /// Bootstraps a recommender for `objective` (two jobs per GPU, no exploration, so answers
    /// depend on nothing but the seed and what was observed) and feeds it the outcomes of the
    /// pairs `observed` (indices into `bench.pairs`).
    pub(crate) fn new(
        runtime: &Runtime,
        bench: &Bench,
        secret: &[u8],
        objective: Objective,
        seed: u64,
        observed: &[usize],
    ) -> Result<Self> {
        let policy = Policy {
            objective,
            max_jobs_per_gpu: 2,
            exploration: 0.0,
            model_caps: Vec::new(),
        };
        let mut recommender = runtime
            .bootstrap(&policy, seed)
            .map_err(|source| Error::Engine {
                doing: "cannot create the recommender to evaluate",
                source,
            })?;
        let ids: Vec<String> = bench
            .types
            .iter()
            .map(|t| keyed_id(secret, &t.name))
            .collect();
        let training = observe_outcomes(&mut recommender, bench, observed, &ids);
        Ok(Self {
            recommender,
            ids,
            training,
        })
    }

    /// Tells the engine each job type's speed on the evaluated model: one run of the type
    /// per its solo time, the unit of the work [`Trained::pairs`] may declare.
    pub(crate) fn tell_speeds(&mut self, bench: &Bench) -> Result<()> {
        for (id, info) in self.ids.iter().zip(&bench.types) {
            self.recommender
                .observe_speed(id, &bench.gpu_model, 1.0 / info.solo_s)
                .map_err(|source| Error::Engine {
                    doing: "the engine refused a job type's speed",
                    source,
                })?;
        }
        Ok(())
    }

    /// The engine's grouping of a queue (job types in queue order), each job declaring its
    /// `work` (runs of its type, in queue order) when given: its placements of two jobs are the
    /// pairs; a job placed alone or left unplaced runs alone.
    pub(crate) fn pairs(
        &mut self,
        bench: &Bench,
        queue: &[usize],
        work: Option<&[f64]>,
    ) -> Result<Pairs> {
        let jobs: Vec<Job> = queue
            .iter()
            .enumerate()
            .map(|(position, &t)| Job {
                submitted_at_s: position as f64,
                work: work.map(|w| w[position]),
                ..self.job(bench, t)
            })
            .collect();
        group(&mut self.recommender, bench, &jobs)
    }

    /// A job of type `t` as the engine is given it: its keyed id, and its type's declared
    /// model if any (never a profile: this is the per-id path).
    fn job(&self, bench: &Bench, t: usize) -> Job {
        Job {
            declared: bench.types[t].declared.clone(),
            ..Job::new(self.ids[t].clone())
        }
    }

    /// The engine's prediction for types `a` and `b` sharing a GPU of the evaluated model.
    pub(crate) fn predict(
        &mut self,
        bench: &Bench,
        a: usize,
        b: usize,
    ) -> Result<Prediction, tandem_host::Error> {
        let group = [self.job(bench, a), self.job(bench, b)];
        self.recommender.predict(
            &group,
            &GpuSpec::new(bench.gpu_model.clone(), bench.memory_mib),
        )
    }
}

/// The engine's grouping of `jobs` (a queue, in order, ids distinct) on half as many idle GPUs
/// of the evaluated model: its placements of two jobs are the pairs (positions in `jobs`); a
/// job placed alone or left unplaced runs alone. Half as many GPUs as jobs: the queue starts at
/// once only by sharing, which is when grouping matters (with a GPU per job, `balanced` runs
/// every job alone).
pub(crate) fn group(recommender: &mut Recommender, bench: &Bench, jobs: &[Job]) -> Result<Pairs> {
    let gpus: Vec<Gpu> = (0..jobs.len().div_ceil(2))
        .map(|i| Gpu {
            id: format!("eval/{i}"),
            node: "eval".into(),
            spec: GpuSpec::new(bench.gpu_model.clone(), bench.memory_mib),
            residents: vec![],
        })
        .collect();
    let answer = recommender
        .recommend(jobs, &gpus)
        .map_err(|source| Error::Engine {
            doing: "the engine failed to group an evaluation queue",
            source,
        })?;
    let position = |id: &str| -> Result<usize> {
        jobs.iter().position(|job| job.id == id).ok_or_else(|| {
            Error::Answer(format!(
                "the engine placed a job `{id}` that was not queued"
            ))
        })
    };
    let mut pairs = Vec::new();
    for placement in &answer.placements {
        match placement.jobs.as_slice() {
            [_] => {}
            [a, b] => {
                let (i, j) = (position(a)?, position(b)?);
                pairs.push((i.min(j), i.max(j)));
            }
            jobs => {
                return Err(Error::Answer(format!(
                    "the engine put {} jobs on {} although at most 2 may share a GPU",
                    jobs.len(),
                    placement.gpu
                )));
            }
        }
    }
    Ok(pairs)
}

/// Feeds `recommender` the outcomes of the measured pairs `observed` (indices into
/// `bench.pairs`), each job type under its id in `ids`; a refusal is counted, and nothing is
/// learned from it.
pub(crate) fn observe_outcomes(
    recommender: &mut Recommender,
    bench: &Bench,
    observed: &[usize],
    ids: &[String],
) -> Training {
    let mut training = Training::default();
    for &p in observed {
        let pair = &bench.pairs[p];
        let outcome = Outcome {
            gpu_model: bench.gpu_model.clone(),
            jobs: vec![ids[pair.a].clone(), ids[pair.b].clone()],
            solo_s: vec![bench.types[pair.a].solo_s, bench.types[pair.b].solo_s],
            colocated_s: pair.colocated_s.to_vec(),
        };
        match recommender.observe_outcome(&outcome) {
            Ok(()) => training.outcomes_observed += 1,
            Err(error) => {
                training.outcomes_rejected += 1;
                training
                    .first_rejection
                    .get_or_insert_with(|| error.to_string());
            }
        }
    }
    training
}
