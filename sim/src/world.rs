//! The discrete-event loop: arrivals, finishes, profiling windows and OOMs, in time order.
//!
//! Between two events every running job progresses at a constant rate (its type's solo
//! throughput on the GPU's model times its speed in its current group), so the next event is
//! found exactly and no time step is involved. Events at one instant are handled together,
//! then the policy decides once.

use std::time::Instant;

use tandem_catalog::{Cluster, GpuSlot, Trace};

use crate::error::{Error, Result};
use crate::inputs::check_inputs;
use crate::metrics::{Collector, JobRecord, PolicyReport};
use crate::policy::{
    GpuView, JobId, Known, MAX_GROUP, Observed, Policy, QueuedJob, Resident, Start, View,
};
use crate::settings::Settings;
use crate::truth::Truth;

/// Where a job is.
#[derive(Debug, Clone, PartialEq)]
enum Status {
    /// Waiting (not yet arrived, or queued).
    Waiting,
    /// Running on `gpus`; `fails_at` is set when its group cannot run (it makes no progress
    /// and is resubmitted then).
    Running {
        gpus: Vec<usize>,
        fails_at: Option<f64>,
    },
    /// Finished.
    Done,
}

#[derive(Debug, Clone)]
struct JobState {
    job_type: usize,
    gpus: u32,
    steps: f64,
    arrival_s: f64,
    status: Status,
    steps_left: f64,
    /// Steps per second now.
    rate: f64,
    first_start_s: Option<f64>,
    attempt_start_s: f64,
    alone: bool,
    /// Whether it shared its GPU at some time in its current attempt.
    shared: bool,
    /// GPU models it ran out of memory on while alone: it never starts on them again.
    failed_models: Vec<usize>,
    /// The model of its current attempt, when it started alone and will run out of memory
    /// there (a job failing beside others, or alone after they left, is not excluded).
    oom_alone_on: Option<usize>,
    /// Whether its current attempt will fail because its group needs more memory than the GPU
    /// has (not only because a pair in it was never measured).
    oom_over_memory: bool,
}

#[derive(Debug, Clone)]
struct GpuState {
    slot: GpuSlot,
    model: usize,
    jobs: Vec<JobId>,
    /// Start of the current busy period (some job on it), if busy.
    busy_since: Option<f64>,
    /// Solo seconds of the jobs that finished in the current busy period.
    period_solo_s: f64,
    /// Jobs that finished in the current busy period.
    period_jobs: u32,
    /// The jobs progressing together since `segment_start_s`.
    segment: Vec<JobId>,
    /// When they started progressing together.
    segment_start_s: f64,
}

/// The state of a profiling window per job type.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Profiling {
    NotStarted,
    Until(f64),
    Done,
}

struct World<'a> {
    truth: &'a Truth,
    known: Known,
    settings: &'a Settings,
    now: f64,
    jobs: Vec<JobState>,
    gpus: Vec<GpuState>,
    /// Queued jobs, in arrival order.
    queue: Vec<JobId>,
    /// Running jobs (progressing or failing), by id: events only ever concern them, and a
    /// replay holds far fewer than its trace.
    running: std::collections::BTreeSet<JobId>,
    next_arrival: usize,
    profiling: Vec<Profiling>,
    collector: Collector,
}

/// Replays `trace` on `cluster` under `policy`, with outcomes from `truth`. The history (a
/// seeded share of the measured pairs, see [`Settings::history_share`]) is taught first.
/// `progress` is told the share of jobs finished, now and then.
pub fn simulate(
    truth: &Truth,
    cluster: &Cluster,
    trace: &Trace,
    settings: &Settings,
    policy: &mut dyn Policy,
    progress: &mut dyn FnMut(f64),
) -> Result<PolicyReport> {
    settings.check()?;
    check_inputs(truth, cluster, trace)?;
    let started = Instant::now();
    let mut world = World::new(truth, cluster, trace, settings);
    for observed in history(truth, &world.gpus, settings) {
        policy.learn(&observed)?;
    }
    if settings.profile_window_s == 0.0 {
        for t in 0..world.profiling.len() {
            world.profiling[t] = Profiling::Done;
            policy.profiled(t, truth.types()[t].profile.as_ref())?;
        }
    }
    let total = world.jobs.len();
    let mut finished = 0;
    let mut reported = 0;
    while let Some(next) = world.next_event() {
        world.advance(next);
        finished += world.handle_events(policy)?;
        if !world.queue.is_empty() && world.has_room() {
            world.decide(policy)?;
        }
        if finished * 100 / total > reported {
            reported = finished * 100 / total;
            progress(finished as f64 / total as f64);
        }
    }
    if finished < total {
        return Err(Error::Policy {
            policy: policy.name().to_owned(),
            time_s: world.now,
            problem: format!(
                "{} job(s) never started: the policy left them queued on an idle cluster",
                total - finished
            ),
        });
    }
    let wall_s = started.elapsed().as_secs_f64();
    let gpus = world.gpus.len();
    Ok(world.collector.report(policy.name(), gpus, wall_s))
}

/// The history every policy is told: a seeded share of each cluster model's measured pairs,
/// each as one hour of sharing.
fn history(truth: &Truth, gpus: &[GpuState], settings: &Settings) -> Vec<Observed> {
    use rand::SeedableRng as _;
    use rand::seq::SliceRandom as _;
    let mut models: Vec<usize> = gpus.iter().map(|g| g.model).collect();
    models.sort_unstable();
    models.dedup();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(settings.seed ^ 0x4849_5354);
    let mut observed = Vec::new();
    for model in models {
        let mut pairs = truth.pairs_on(model);
        pairs.shuffle(&mut rng);
        let keep = (settings.history_share * pairs.len() as f64).round() as usize;
        observed.extend(pairs.into_iter().take(keep).map(|(a, b, sa, sb)| Observed {
            model,
            types: [a, b],
            speeds: [sa, sb],
            seconds: 3600.0,
        }));
    }
    observed
}

impl<'a> World<'a> {
    fn new(truth: &'a Truth, cluster: &Cluster, trace: &Trace, settings: &'a Settings) -> Self {
        let jobs = trace
            .jobs
            .iter()
            .map(|job| JobState {
                // Checked by `check_inputs`.
                job_type: truth.job_type(&job.job_type).unwrap_or_default(),
                gpus: job.gpus,
                steps: job.steps,
                arrival_s: job.arrival_s,
                status: Status::Waiting,
                steps_left: job.steps,
                rate: 0.0,
                first_start_s: None,
                attempt_start_s: 0.0,
                alone: false,
                failed_models: Vec::new(),
                oom_alone_on: None,
                oom_over_memory: false,
                shared: false,
            })
            .collect::<Vec<_>>();
        let gpus: Vec<GpuState> = cluster
            .gpus()
            .into_iter()
            .map(|slot| GpuState {
                model: truth.model(&slot.model).unwrap_or_default(),
                slot,
                jobs: Vec::new(),
                busy_since: None,
                period_solo_s: 0.0,
                period_jobs: 0,
                segment: Vec::new(),
                segment_start_s: 0.0,
            })
            .collect();
        let memory_known = truth.types().iter().all(|t| t.profile.is_some());
        let total_memory: f64 = gpus
            .iter()
            .map(|g| f64::from(truth.models()[g.model].memory_mib))
            .sum();
        Self {
            truth,
            known: Known::of(truth),
            settings,
            now: 0.0,
            collector: Collector::new(jobs.len(), memory_known.then_some(total_memory)),
            jobs,
            gpus,
            queue: Vec::new(),
            running: std::collections::BTreeSet::new(),
            next_arrival: 0,
            profiling: vec![Profiling::NotStarted; truth.types().len()],
        }
    }

    /// The time of the next event, if any is left.
    fn next_event(&self) -> Option<f64> {
        let mut next = f64::INFINITY;
        if let Some(job) = self.jobs.get(self.next_arrival) {
            next = next.min(job.arrival_s);
        }
        for job in self.running.iter().map(|&id| &self.jobs[id]) {
            if let Status::Running { fails_at, .. } = &job.status {
                let at = match fails_at {
                    Some(t) => *t,
                    None if job.rate > 0.0 => self.now + job.steps_left / job.rate,
                    None => f64::INFINITY,
                };
                next = next.min(at);
            }
        }
        for state in &self.profiling {
            if let Profiling::Until(t) = state {
                next = next.min(*t);
            }
        }
        next.is_finite().then_some(next.max(self.now))
    }

    /// Moves time to `to`, progressing every running job.
    fn advance(&mut self, to: f64) {
        let dt = to - self.now;
        if dt > 0.0 {
            for &id in &self.running {
                let job = &mut self.jobs[id];
                if matches!(job.status, Status::Running { fails_at: None, .. }) {
                    job.steps_left -= job.rate * dt;
                }
            }
            let busy = self.gpus.iter().filter(|g| !g.jobs.is_empty()).count();
            let memory = self.memory_in_use();
            self.collector
                .interval(self.now, dt, busy, self.queue.len(), memory);
        }
        self.now = to;
    }

    /// Memory of the progressing jobs, MiB, when every type's is known.
    fn memory_in_use(&self) -> Option<f64> {
        self.collector.tracks_memory().then(|| {
            self.running
                .iter()
                .map(|&id| &self.jobs[id])
                .filter(|j| matches!(j.status, Status::Running { fails_at: None, .. }))
                .filter_map(|j| self.truth.types()[j.job_type].profile.as_ref())
                .map(|p| f64::from(p.mem_used_mib))
                .sum()
        })
    }

    /// Handles every event due now; returns how many jobs finished.
    fn handle_events(&mut self, policy: &mut dyn Policy) -> Result<usize> {
        let now = self.now;
        // In id order, as the outcome of an instant must not depend on start order.
        let running: Vec<JobId> = self.running.iter().copied().collect();
        // OOMs.
        for &id in &running {
            if let Status::Running {
                fails_at: Some(t), ..
            } = &self.jobs[id].status
                && *t <= now
            {
                self.fail(id)?;
            }
        }
        // Finishes: a job whose work is done, up to rounding.
        let mut finished = 0;
        for &id in &running {
            let job = &self.jobs[id];
            if matches!(job.status, Status::Running { fails_at: None, .. })
                && job.steps_left <= job.steps * 1e-9
            {
                self.finish(id, policy)?;
                finished += 1;
            }
        }
        // Profiling windows.
        for t in 0..self.profiling.len() {
            if let Profiling::Until(until) = self.profiling[t]
                && until <= now
            {
                self.profiling[t] = Profiling::Done;
                policy.profiled(t, self.truth.types()[t].profile.as_ref())?;
            }
        }
        // Arrivals.
        while let Some(job) = self.jobs.get(self.next_arrival)
            && job.arrival_s <= now
        {
            self.enqueue(self.next_arrival);
            self.next_arrival += 1;
        }
        Ok(finished)
    }

    /// Puts a job in the queue at its place by arrival (a resubmitted job goes back near the
    /// head: it keeps its original submission time).
    fn enqueue(&mut self, id: JobId) {
        let key = (self.jobs[id].arrival_s, id);
        let at = self
            .queue
            .partition_point(|&q| (self.jobs[q].arrival_s, q) < key);
        self.queue.insert(at, id);
    }

    /// Whether some GPU could take a job: an idle one, or one whose residents all share.
    fn has_room(&self) -> bool {
        self.gpus.iter().any(|g| {
            g.jobs.is_empty()
                || (g.jobs.len() < MAX_GROUP && g.jobs.iter().all(|&j| self.shareable(j)))
        })
    }

    fn profiled(&self, job_type: usize) -> bool {
        self.profiling[job_type] == Profiling::Done
    }

    fn shareable(&self, id: JobId) -> bool {
        let job = &self.jobs[id];
        job.gpus == 1
            && !job.alone
            && self.profiled(job.job_type)
            && matches!(job.status, Status::Running { fails_at: None, .. })
    }

    fn view_gpus(&self) -> Vec<GpuView> {
        self.gpus
            .iter()
            .map(|g| GpuView {
                id: g.slot.id.clone(),
                node: g.slot.node.clone(),
                model: g.model,
                residents: g
                    .jobs
                    .iter()
                    .map(|&id| Resident {
                        id,
                        job_type: self.jobs[id].job_type,
                        steps_left: self.jobs[id].steps_left.max(0.0),
                        shareable: self.shareable(id),
                    })
                    .collect(),
            })
            .collect()
    }

    fn decide(&mut self, policy: &mut dyn Policy) -> Result<()> {
        let queue: Vec<QueuedJob> = self
            .queue
            .iter()
            .take(self.settings.window)
            .map(|&id| {
                let job = &self.jobs[id];
                QueuedJob {
                    id,
                    job_type: job.job_type,
                    gpus: job.gpus,
                    arrival_s: job.arrival_s,
                    steps: job.steps,
                    alone: job.alone,
                    profiled: self.profiled(job.job_type),
                    failed_models: job.failed_models.clone(),
                }
            })
            .collect();
        let gpus = self.view_gpus();
        let view = View {
            now_s: self.now,
            queue: &queue,
            gpus: &gpus,
            known: &self.known,
        };
        let clock = Instant::now();
        let starts = policy.decide(&view)?;
        self.collector
            .decision(clock.elapsed().as_secs_f64(), starts.len());
        for start in starts {
            self.start(&start, policy)?;
        }
        Ok(())
    }

    fn broken(&self, policy: &dyn Policy, problem: String) -> Error {
        Error::Policy {
            policy: policy.name().to_owned(),
            time_s: self.now,
            problem,
        }
    }

    /// Starts a job where the policy asked, after checking the cluster's rules.
    fn start(&mut self, start: &Start, policy: &mut dyn Policy) -> Result<()> {
        let id = start.job;
        let Some(position) = self.queue.iter().position(|&q| q == id) else {
            return Err(self.broken(policy, format!("job {id} is not queued")));
        };
        let job = &self.jobs[id];
        let name = &self.truth.types()[job.job_type].name;
        let mut gpus = start.gpus.clone();
        gpus.sort_unstable();
        gpus.dedup();
        if gpus.len() != start.gpus.len() || gpus.len() != job.gpus as usize {
            return Err(self.broken(
                policy,
                format!(
                    "job {id} ({name}) needs {} distinct GPU(s), was given {:?}",
                    job.gpus, start.gpus
                ),
            ));
        }
        if let Some(&bad) = gpus.iter().find(|&&g| g >= self.gpus.len()) {
            return Err(self.broken(policy, format!("GPU index {bad} does not exist")));
        }
        let model = self.gpus[gpus[0]].model;
        if gpus.iter().any(|&g| self.gpus[g].model != model) {
            return Err(self.broken(
                policy,
                format!("job {id} ({name}) was given GPUs of different models"),
            ));
        }
        if job.failed_models.contains(&model) {
            return Err(self.broken(
                policy,
                format!(
                    "job {id} ({name}) already ran out of memory alone on a {}",
                    self.truth.models()[model].name
                ),
            ));
        }
        let Some(tput) = self.truth.throughput(job.job_type, model) else {
            return Err(self.broken(
                policy,
                format!(
                    "job {id} ({name}) has no measured throughput on {}",
                    self.truth.models()[model].name
                ),
            ));
        };
        // A job that joined a GPU earlier in this decision and is failing with an OOM closes
        // it; the policy could not know, so a later start there waits for the next decision.
        if gpus.iter().any(|&g| {
            self.gpus[g].jobs.iter().any(|&j| {
                matches!(
                    self.jobs[j].status,
                    Status::Running {
                        fails_at: Some(_),
                        ..
                    }
                )
            })
        }) {
            return Ok(());
        }
        let must_be_idle = job.gpus > 1 || job.alone || !self.profiled(job.job_type);
        for &g in &gpus {
            let gpu = &self.gpus[g];
            if gpu.jobs.is_empty() {
                continue;
            }
            if must_be_idle {
                return Err(self.broken(
                    policy,
                    format!(
                        "job {id} ({name}) must run alone (multi-GPU, resubmitted after an OOM, or not yet profiled) but {} is busy",
                        gpu.slot.id
                    ),
                ));
            }
            if gpu.jobs.len() >= MAX_GROUP || !gpu.jobs.iter().all(|&j| self.shareable(j)) {
                return Err(self.broken(
                    policy,
                    format!(
                        "job {id} ({name}) may not join {}: it is full or closed",
                        gpu.slot.id
                    ),
                ));
            }
        }

        self.queue.remove(position);
        let now = self.now;
        let job_type = self.jobs[id].job_type;
        if self.profiling[job_type] == Profiling::NotStarted && self.settings.profile_window_s > 0.0
        {
            self.profiling[job_type] = Profiling::Until(now + self.settings.profile_window_s);
        }
        let fails = if gpus.len() == 1 {
            let g = gpus[0];
            let mut group: Vec<usize> =
                self.progressing(g).map(|j| self.jobs[j].job_type).collect();
            group.push(job_type);
            // Alone too: a job whose peak on this model exceeds its memory fails.
            let oom = self.truth.oom(model, &group);
            self.jobs[id].oom_alone_on = (oom.is_some() && group.len() == 1).then_some(model);
            self.jobs[id].oom_over_memory =
                oom.is_some() && self.truth.over_memory(model, &group).is_some();
            oom.map(|_| now + self.settings.oom_after_s)
        } else {
            None
        };
        {
            let job = &mut self.jobs[id];
            job.first_start_s.get_or_insert(now);
            job.attempt_start_s = now;
            job.shared = false;
            job.rate = tput * f64::from(job.gpus);
            job.status = Status::Running {
                gpus: gpus.clone(),
                fails_at: fails,
            };
        }
        self.running.insert(id);
        for &g in &gpus {
            let gpu = &mut self.gpus[g];
            if gpu.busy_since.is_none() {
                gpu.busy_since = Some(now);
                gpu.period_solo_s = 0.0;
                gpu.period_jobs = 0;
            }
            gpu.jobs.push(id);
        }
        if fails.is_none() && gpus.len() == 1 {
            self.regroup(gpus[0], policy)?;
        }
        Ok(())
    }

    /// The jobs of GPU `g` that make progress (not failing).
    fn progressing(&self, g: usize) -> impl Iterator<Item = JobId> + '_ {
        self.gpus[g]
            .jobs
            .iter()
            .copied()
            .filter(|&j| matches!(self.jobs[j].status, Status::Running { fails_at: None, .. }))
    }

    /// The progressing group of GPU `g` changed: report the co-location that ended, then set
    /// the new speeds.
    fn regroup(&mut self, g: usize, policy: &mut dyn Policy) -> Result<()> {
        let ended = std::mem::take(&mut self.gpus[g].segment);
        self.report_pair(g, &ended, policy)?;
        let model = self.gpus[g].model;
        let group: Vec<JobId> = self.progressing(g).collect();
        let types: Vec<usize> = group.iter().map(|&j| self.jobs[j].job_type).collect();
        let Some(speeds) = self.truth.speeds(model, &types) else {
            // A group that cannot run fails instead of progressing, so this is a bug.
            return Err(self.broken(
                policy,
                format!("the group on {} cannot run", self.gpus[g].slot.id),
            ));
        };
        for (&j, speed) in group.iter().zip(speeds) {
            let tput = self
                .truth
                .throughput(self.jobs[j].job_type, model)
                .unwrap_or_default();
            let job = &mut self.jobs[j];
            job.rate = tput * speed;
            job.shared |= group.len() > 1;
        }
        let gpu = &mut self.gpus[g];
        gpu.segment = group;
        gpu.segment_start_s = self.now;
        Ok(())
    }

    /// Reports the pair that shared GPU `g` until now, if it shared long enough.
    fn report_pair(&mut self, g: usize, pair: &[JobId], policy: &mut dyn Policy) -> Result<()> {
        let seconds = self.now - self.gpus[g].segment_start_s;
        if let [a, b] = *pair
            && seconds >= self.settings.min_outcome_s
            && seconds > 0.0
        {
            let model = self.gpus[g].model;
            let types = [self.jobs[a].job_type, self.jobs[b].job_type];
            if let Some((sa, sb)) = self.truth.pair(model, types[0], types[1]) {
                self.collector.outcome();
                policy.learn(&Observed {
                    model,
                    types,
                    speeds: [sa, sb],
                    seconds,
                })?;
            }
        }
        Ok(())
    }

    /// A job of a group that cannot run fails with an OOM and goes back to the queue, to run
    /// alone; its progress is lost.
    fn fail(&mut self, id: JobId) -> Result<()> {
        self.running.remove(&id);
        let Status::Running { gpus, .. } =
            std::mem::replace(&mut self.jobs[id].status, Status::Waiting)
        else {
            return Ok(());
        };
        // Failing alone (not beside others) means this model is too small for it.
        let job = &mut self.jobs[id];
        if let Some(model) = job.oom_alone_on.take() {
            job.failed_models.push(model);
        }
        job.steps_left = job.steps;
        job.rate = 0.0;
        job.alone = true;
        let over_memory = std::mem::take(&mut job.oom_over_memory);
        self.collector.oom(over_memory);
        for g in gpus {
            self.leave(g, id);
        }
        self.enqueue(id);
        Ok(())
    }

    /// Removes a job from GPU `g`, closing its busy period if it became idle.
    fn leave(&mut self, g: usize, id: JobId) {
        let now = self.now;
        let gpu = &mut self.gpus[g];
        gpu.jobs.retain(|&j| j != id);
        if gpu.jobs.is_empty()
            && let Some(since) = gpu.busy_since.take()
            && gpu.period_jobs >= 2
        {
            self.collector
                .packing_saving((gpu.period_solo_s - (now - since)) / gpu.period_solo_s);
        }
    }

    fn finish(&mut self, id: JobId, policy: &mut dyn Policy) -> Result<()> {
        let now = self.now;
        self.running.remove(&id);
        let Status::Running { gpus, .. } =
            std::mem::replace(&mut self.jobs[id].status, Status::Done)
        else {
            return Ok(());
        };
        let job = self.jobs[id].clone();
        let model = self.gpus[gpus[0]].model;
        let solo_s = self
            .known
            .solo_s(job.job_type, model, job.steps, job.gpus)
            .unwrap_or_default();
        let run_s = now - job.attempt_start_s;
        let first_start_s = job.first_start_s.unwrap_or(job.attempt_start_s);
        self.collector.finished(
            job.arrival_s,
            first_start_s,
            now,
            job.shared.then(|| (run_s - solo_s) / solo_s),
        );
        self.collector.record(JobRecord {
            job: id,
            job_type: self.truth.types()[job.job_type].name.clone(),
            gpus: job.gpus,
            arrival_s: job.arrival_s,
            first_start_s,
            final_start_s: job.attempt_start_s,
            finish_s: now,
            gpu_model: self.truth.models()[model].name.clone(),
            solo_s,
            shared: job.shared,
        });
        if let Profiling::Until(_) = self.profiling[job.job_type] {
            // Its run was shorter than the window: the profile covers the whole run.
            self.profiling[job.job_type] = Profiling::Done;
            policy.profiled(
                job.job_type,
                self.truth.types()[job.job_type].profile.as_ref(),
            )?;
        }
        if gpus.len() == 1 {
            let g = gpus[0];
            let gpu = &mut self.gpus[g];
            gpu.period_solo_s += solo_s;
            gpu.period_jobs += 1;
            self.leave(g, id);
            self.regroup(g, policy)?;
        } else {
            for g in gpus {
                self.leave(g, id);
            }
        }
        Ok(())
    }
}
