//! Tandem itself: the engine component in the loop, through `tandem-host`.
//!
//! The engine sees what it would see in a real cluster and nothing else. A job type is a
//! recurring workload known by a keyed id (HMAC of its name with a secret drawn from the seed);
//! each job is an instance of it, `<workload>~<job>`, so instances share what was learned about
//! their workload. A type's profile reaches the engine (`observe-profile`) when its profiling
//! window ends, if the catalog measured one. Jobs that may not share yet (type not profiled,
//! resubmitted after an OOM) go to the engine under an id of their own with no profile: the
//! engine knows nothing of them but their declared model, so it lets nobody join them. It
//! shares a declared job before it is profiled, which the world does not allow: a job placed
//! beside others is offered the idle GPUs alone, in a second `recommend`.
//! Every co-location the simulator reports becomes an `observe-outcome`; every decision is one
//! `recommend` over the head of the queue and the GPUs that can take a job. Multi-GPU jobs run
//! alone, first-fit; the engine places single GPUs.
//!
//! Heterogeneity: the solo throughputs every scheduler knows (the history of each type's solo
//! runs) reach the engine as `observe-speed` reports, and every job carries its work left (steps),
//! so the engine places each job where it runs fastest. The blind variant reports no speeds:
//! the engine then takes GPUs in the order given, as Tandem did before it knew GPU models apart.
//!
//! Memory: where the catalog gives a type's declared model, its jobs carry it
//! (`job.declared`), and the engine's guard keeps them off GPUs their predicted memory would
//! overflow. The undeclared variant withholds it: the guard has nothing to go on before a
//! job's first OOM (the simulator never reports a measured peak to the engine).

use std::collections::HashMap;

use tandem_api::{Gpu, GpuSpec, Job, Objective, Outcome, Policy as EnginePolicy, Profile};
use tandem_host::{Recommender, Runtime};

use super::api::{GpuView, Known, Observed, Policy, QueuedJob, Start, View};
use super::baselines::{Board, shareable};
use crate::error::{Error, Result};

/// Tandem under one objective.
#[derive(Debug)]
pub struct Tandem {
    name: String,
    engine: Recommender,
    /// Keyed workload id of each job type.
    workloads: Vec<String>,
    /// Names of the GPU models, as the engine sees them.
    models: Vec<GpuSpec>,
    /// Whether the engine is told speeds and work (heterogeneity-aware).
    aware: bool,
    /// Declared model of each job type, passed with its jobs (`None` when withheld).
    declared: Vec<Option<tandem_api::ModelSummary>>,
}

impl Tandem {
    /// Jobs per GPU at most: the catalogs measured pairs.
    pub const MAX_JOBS_PER_GPU: u32 = 2;

    /// A fresh engine (bootstrapped knowledge base) under `objective`.
    pub fn new(runtime: &Runtime, objective: Objective, known: &Known, seed: u64) -> Result<Self> {
        Self::with_awareness(runtime, objective, known, seed, true, true)
    }

    /// The heterogeneity-blind variant: the engine is told no speeds and no work.
    pub fn blind(
        runtime: &Runtime,
        objective: Objective,
        known: &Known,
        seed: u64,
    ) -> Result<Self> {
        Self::with_awareness(runtime, objective, known, seed, false, true)
    }

    /// The variant without declared models: the memory guard has nothing to go on.
    pub fn undeclared(
        runtime: &Runtime,
        objective: Objective,
        known: &Known,
        seed: u64,
    ) -> Result<Self> {
        Self::with_awareness(runtime, objective, known, seed, true, false)
    }

    fn with_awareness(
        runtime: &Runtime,
        objective: Objective,
        known: &Known,
        seed: u64,
        aware: bool,
        declare: bool,
    ) -> Result<Self> {
        let name = format!(
            "tandem-{}{}",
            match objective {
                Objective::Balanced => "balanced",
                Objective::MinSlowdown => "min-slowdown",
                Objective::MaxPacking => "max-packing",
            },
            match (aware, declare) {
                (true, true) => "",
                (false, _) => "-blind",
                (true, false) => "-undeclared",
            }
        );
        let policy = EnginePolicy {
            objective,
            max_jobs_per_gpu: Self::MAX_JOBS_PER_GPU,
            exploration: 0.0,
            model_caps: Vec::new(),
        };
        let engine = runtime
            .bootstrap(&policy, seed)
            .map_err(|source| Error::Engine {
                policy: name.clone(),
                source,
            })?;
        let secret: Vec<u8> = seed.to_le_bytes().repeat(4);
        let mut tandem = Self {
            workloads: known
                .types
                .iter()
                .map(|t| tandem_wire::identity::keyed_id(&secret, &t.name))
                .collect(),
            models: known
                .models
                .iter()
                .map(|m| GpuSpec::new(m.name.clone(), m.memory_mib))
                .collect(),
            engine,
            name,
            aware,
            declared: known
                .types
                .iter()
                .map(|t| t.declared.clone().filter(|_| declare))
                .collect(),
        };
        if aware {
            for (t, job_type) in known.types.iter().enumerate() {
                for (m, throughput) in job_type.throughput.iter().enumerate() {
                    let Some(speed) = *throughput else { continue };
                    tandem
                        .engine
                        .observe_speed(&tandem.workloads[t], &tandem.models[m].model, speed)
                        .map_err(|e| tandem.engine_error(e))?;
                }
            }
        }
        Ok(tandem)
    }

    /// The work left to tell the engine, when it is heterogeneity-aware.
    fn work(&self, steps: f64) -> Option<f64> {
        self.aware.then_some(steps)
    }

    /// `job` as the engine sees it: an instance of its type's workload once the world lets it
    /// share, else a job of its own the engine knows nothing of but its declared model.
    fn engine_job(&self, job: &QueuedJob) -> Job {
        let id = if shareable(job) {
            format!("{}~{}", self.workloads[job.job_type], job.id)
        } else {
            format!("new-{}", job.id)
        };
        Job {
            submitted_at_s: job.arrival_s,
            work: self.work(job.steps),
            declared: self.declared[job.job_type].clone(),
            ..Job::new(id)
        }
    }

    /// `gpu` as the engine sees it, its residents instances of their types' workloads.
    fn engine_gpu(&self, gpu: &GpuView) -> Gpu {
        Gpu {
            id: gpu.id.clone(),
            node: gpu.node.clone(),
            spec: self.models[gpu.model].clone(),
            residents: gpu
                .residents
                .iter()
                .map(|r| Job {
                    work: self.work(r.steps_left),
                    declared: self.declared[r.job_type].clone(),
                    ..Job::new(format!("{}~{}", self.workloads[r.job_type], r.id))
                })
                .collect(),
        }
    }

    /// Starts jobs the world makes run alone (`waiting`: placed by the engine beside others)
    /// on the GPUs still idle, one per GPU, asking the engine again as long as it starts one.
    /// The engine may share a declared job before its type is profiled, which the world does
    /// not allow; among idle GPUs only, its guard still keeps the job off the models its
    /// declared memory would overflow, and the job does not wait for a busy GPU to empty.
    fn start_alone(
        &mut self,
        view: &View<'_>,
        board: &mut Board,
        mut waiting: Vec<&QueuedJob>,
    ) -> Result<Vec<Start>> {
        let mut starts = Vec::new();
        while !waiting.is_empty() {
            let idle: Vec<usize> = (0..view.gpus.len())
                .filter(|&g| board.count[g] == 0)
                .collect();
            if idle.is_empty() {
                break;
            }
            let gpus: Vec<Gpu> = idle
                .iter()
                .map(|&g| self.engine_gpu(&view.gpus[g]))
                .collect();
            let queue: Vec<Job> = waiting.iter().map(|q| self.engine_job(q)).collect();
            let recommendation = self
                .engine
                .recommend(&queue, &gpus)
                .map_err(|e| self.engine_error(e))?;
            let before = starts.len();
            for placement in recommendation.placements {
                let Some(at) = gpus.iter().position(|gpu| gpu.id == placement.gpu) else {
                    continue;
                };
                let g = idle[at];
                // The first job of the placement that may run there; the others wait for the
                // next question.
                let first = placement.jobs.iter().find_map(|id| {
                    let i = queue.iter().position(|job| &job.id == id)?;
                    waiting[i]
                        .may_run_on(view.known, view.gpus[g].model)
                        .then_some(i)
                });
                if let Some(i) = first {
                    starts.push(board.place(g, waiting[i]));
                }
            }
            if starts.len() == before {
                break;
            }
            waiting.retain(|q| starts[before..].iter().all(|s| s.job != q.id));
        }
        Ok(starts)
    }

    fn engine_error(&self, source: tandem_host::Error) -> Error {
        Error::Engine {
            policy: self.name.clone(),
            source,
        }
    }
}

impl Policy for Tandem {
    fn name(&self) -> &str {
        &self.name
    }

    fn learn(&mut self, observed: &Observed) -> Result<()> {
        let [a, b] = observed.types;
        let length = observed.seconds;
        // What a profiler beside the pair reports: while sharing for `length` seconds, each did
        // the work of `length × speed` seconds alone.
        let outcome = Outcome {
            gpu_model: self.models[observed.model].model.clone(),
            jobs: vec![
                format!("{}~a", self.workloads[a]),
                format!("{}~b", self.workloads[b]),
            ],
            solo_s: vec![length * observed.speeds[0], length * observed.speeds[1]],
            colocated_s: vec![length, length],
        };
        self.engine
            .observe_outcome(&outcome)
            .map_err(|e| self.engine_error(e))
    }

    fn profiled(&mut self, job_type: usize, profile: Option<&Profile>) -> Result<()> {
        if let Some(profile) = profile {
            self.engine
                .observe_profile(&self.workloads[job_type], profile)
                .map_err(|e| self.engine_error(e))?;
        }
        Ok(())
    }

    fn decide(&mut self, view: &View<'_>) -> Result<Vec<Start>> {
        let mut board = Board::of(view.gpus);
        let mut starts = Vec::new();
        let mut queue = Vec::new();
        let mut job_of: HashMap<String, &QueuedJob> = HashMap::new();
        for job in view.queue {
            // Multi-GPU jobs, and jobs that ran out of memory alone (restarted on a model they
            // did not fail on, as a host would), go first-fit.
            if job.gpus > 1 || !job.failed_models.is_empty() {
                starts.extend(board.first_fit(job, view.known));
                continue;
            }
            let engine_job = self.engine_job(job);
            job_of.insert(engine_job.id.clone(), job);
            queue.push(engine_job);
        }
        if queue.is_empty() {
            return Ok(starts);
        }
        let mut gpus = Vec::new();
        let mut gpu_of: HashMap<&str, usize> = HashMap::new();
        for (g, gpu) in view.gpus.iter().enumerate() {
            let open = board.count[g] == 0
                || (board.count[g] < Self::MAX_JOBS_PER_GPU as usize && board.open[g]);
            if !open {
                continue;
            }
            gpu_of.insert(gpu.id.as_str(), g);
            gpus.push(self.engine_gpu(gpu));
        }
        if gpus.is_empty() {
            return Ok(starts);
        }
        let recommendation = self
            .engine
            .recommend(&queue, &gpus)
            .map_err(|e| self.engine_error(e))?;
        // Jobs the world makes run alone that the engine placed beside others.
        let mut beside: Vec<&QueuedJob> = Vec::new();
        for placement in recommendation.placements {
            let Some(&g) = gpu_of.get(placement.gpu.as_str()) else {
                continue;
            };
            for id in &placement.jobs {
                let Some(&q) = job_of.get(id) else { continue };
                // The engine does not know where a type's throughput was measured, nor where
                // a job already ran out of memory; a job placed where it cannot run stays
                // queued.
                if !q.may_run_on(view.known, view.gpus[g].model) {
                    continue;
                }
                // The world profiles a new type alone before it may share; the engine shares
                // a declared job before it is profiled, so such a placement starts only what
                // the world allows.
                if !shareable(q) {
                    if board.count[g] > 0 || placement.jobs.len() > 1 {
                        beside.push(q);
                        continue;
                    }
                } else if board.count[g] > 0 && !board.open[g] {
                    // A job that must run alone started there in this decision.
                    continue;
                }
                starts.push(board.place(g, q));
            }
        }
        starts.extend(self.start_alone(view, &mut board, beside)?);
        Ok(starts)
    }
}
