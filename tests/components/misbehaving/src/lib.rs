//! A deliberately misbehaving engine component, for the host's sandbox tests.
//!
//! It implements the `plugin` world of `wit/current` and otherwise behaves: it remembers the
//! ids of observed profiles (its whole state, saved as one id per line) and `recommend` reports
//! them back as unplaced jobs with the reason `known`, so a test can see whether state
//! survived a rebuild; `synthesize` always answers `invalid-input`; its cluster view is only
//! counted (`update-cluster` answers how many GPUs it holds, `score-all` scores each 50). A job
//! id triggers misbehaviour in `recommend`, `score-all` and `choose-gpu`:
//! - `loop`: spins forever (the host's deadline must interrupt it);
//! - `alloc`: allocates without bound (the host's memory cap must stop it);
//! - `panic`: panics (the host must report a typed panic with the message);
//! - `recurse`: recurses without end (the host's stack limit must stop it).
//!
//! A job observed with a profile measured on GPU model `loop` spins too (in `score-all` and
//! `choose-gpu`), and one observed on GPU model `panic` panics there: adapters key job ids, so
//! their tests reach the misbehaviour through the intake. Two more models spoil the state
//! itself: once a job was observed on `unsaveable`, `save` panics; a snapshot that holds a job
//! observed on `unloadable` is refused by `load`.

use std::cell::RefCell;
use std::hint::black_box;

use bindings::exports::tandem::engine::engine::{self as wit_engine, GuestRecommender};
use bindings::tandem::engine::types as wit;

#[expect(unsafe_code, reason = "wit-bindgen's generated canonical-ABI glue")]
mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit/current",
        world: "plugin",
    });

    use super::Component;
    export!(Component);
}

struct Component;

impl wit_engine::Guest for Component {
    type Recommender = Recommender;

    fn engine_version() -> String {
        "misbehaving-test-guest".into()
    }

    fn synthesize(
        _ground_truth: Vec<wit::Series>,
        _points_per_gap: u32,
        _bounds: Vec<Option<(f64, f64)>>,
    ) -> Result<wit::Synthesis, wit::Error> {
        Err(wit::Error::InvalidInput(
            "the misbehaving guest synthesizes nothing".into(),
        ))
    }
}

struct Recommender(RefCell<Vec<String>>, RefCell<u32>);

fn wrap(ids: Vec<String>) -> wit_engine::Recommender {
    std::panic::set_hook(Box::new(|info| {
        bindings::log(wit::LogLevel::Error, &format!("guest panicked: {info}"));
    }));
    wit_engine::Recommender::new(Recommender(RefCell::new(ids), RefCell::new(0)))
}

/// Misbehaves as the module docs say for `job`.
fn misbehave(job: &str) {
    match job {
        "loop" => {
            let mut spins = 0_u64;
            loop {
                spins = black_box(spins.wrapping_add(1));
            }
        }
        "alloc" => {
            let mut hoard = Vec::new();
            loop {
                hoard.push(black_box(vec![1_u8; 1 << 20]));
            }
        }
        "panic" => panic!("deliberate panic for the sandbox tests"),
        "recurse" => {
            black_box(deeper(0));
        }
        _ => {}
    }
}

/// Recursion the optimizer cannot fold into a loop: the next level is called through an
/// opaque pointer (no inlining, no tail call) and `depth` is needed after it returns, so each
/// level takes a frame of the native stack. It ends only at `u64::MAX`, far past any stack.
fn deeper(depth: u64) -> u64 {
    if depth == u64::MAX {
        return depth;
    }
    let next: fn(u64) -> u64 = black_box(deeper);
    next(depth + 1).wrapping_mul(3) ^ depth
}

impl Recommender {
    /// Misbehaves for `job` by its id, or as the GPU model it was observed on (`loop`,
    /// `panic`) says.
    fn judge(&self, job: &str) {
        misbehave(job);
        for how in ["loop", "panic"] {
            let marked = format!("{how}:{job}");
            if self.0.borrow().contains(&marked) {
                misbehave(how);
            }
        }
    }
}

impl GuestRecommender for Recommender {
    fn create(_policy: wit::Policy, _seed: u64) -> Result<wit_engine::Recommender, wit::Error> {
        Ok(wrap(Vec::new()))
    }

    fn bootstrap(policy: wit::Policy, seed: u64) -> Result<wit_engine::Recommender, wit::Error> {
        Self::create(policy, seed)
    }

    fn predict(
        &self,
        _group: Vec<wit::Job>,
        _gpu: wit::GpuSpec,
    ) -> Result<wit::Prediction, wit::Error> {
        Err(wit::Error::Infeasible(
            "the misbehaving guest predicts nothing".into(),
        ))
    }

    fn describe(&self) -> wit::KnowledgeSummary {
        wit::KnowledgeSummary {
            profiles: u32::try_from(self.0.borrow().len()).unwrap_or(u32::MAX),
            seed_points: 0,
            outcomes: 0,
            residual_observations: 0,
            memory_rows: 0,
            memory_margin_pct: 0.0,
            speed_workloads: 0,
            clusters: Vec::new(),
            pairs: Vec::new(),
        }
    }

    fn set_policy(&self, _policy: wit::Policy) -> Result<(), wit::Error> {
        Ok(())
    }

    fn observe_profile(&self, job: String, p: wit::Profile) -> Result<wit::Assignment, wit::Error> {
        let entry = if matches!(
            p.gpu_model.as_str(),
            "loop" | "panic" | "unsaveable" | "unloadable"
        ) {
            format!("{}:{job}", p.gpu_model)
        } else {
            job
        };
        self.0.borrow_mut().push(entry);
        Ok(wit::Assignment {
            cluster: 0,
            uncertainty: 0.0,
        })
    }

    fn observe_outcome(&self, _o: wit::Outcome) -> Result<(), wit::Error> {
        Ok(())
    }

    fn recommend(
        &self,
        queue: Vec<wit::Job>,
        _gpus: Vec<wit::Gpu>,
    ) -> Result<wit::Recommendation, wit::Error> {
        for job in &queue {
            misbehave(&job.id);
        }
        Ok(wit::Recommendation {
            placements: Vec::new(),
            unplaced: self
                .0
                .borrow()
                .iter()
                .map(|id| wit::Unplaced {
                    job: id.clone(),
                    reason: "known".into(),
                })
                .collect(),
        })
    }

    fn filter(&self, _job: wit::Job, _gpus: Vec<wit::Gpu>) -> Result<Vec<wit::Fit>, wit::Error> {
        Ok(Vec::new())
    }

    fn observe_memory(
        &self,
        _job: String,
        _declared: wit::ModelSummary,
        _gpu: wit::GpuSpec,
        _peak_mem_mib: u32,
    ) -> Result<(), wit::Error> {
        Ok(())
    }

    fn observe_speed(
        &self,
        _job: String,
        _gpu_model: String,
        _work_per_s: f64,
    ) -> Result<(), wit::Error> {
        Ok(())
    }

    fn estimate(
        &self,
        _job: wit::Job,
        _gpus: Vec<wit::GpuSpec>,
    ) -> Result<Vec<wit::Estimate>, wit::Error> {
        Ok(Vec::new())
    }

    fn score(
        &self,
        _job: wit::Job,
        _gpus: Vec<wit::Gpu>,
    ) -> Result<Vec<wit::GpuScore>, wit::Error> {
        Ok(Vec::new())
    }

    fn update_cluster(
        &self,
        changes: Vec<wit::ClusterChange>,
    ) -> Result<wit::ClusterSummary, wit::Error> {
        let mut gpus = *self.1.borrow();
        for change in changes {
            match change {
                wit::ClusterChange::SetGpu(_) => gpus += 1,
                wit::ClusterChange::RemoveGpu(_) => gpus = gpus.saturating_sub(1),
                wit::ClusterChange::Clear => gpus = 0,
                wit::ClusterChange::Bind(_) | wit::ClusterChange::Unbind(_) => {}
            }
        }
        *self.1.borrow_mut() = gpus;
        Ok(wit::ClusterSummary {
            gpus,
            nodes: 0,
            states: 0,
            handles: gpus,
        })
    }

    fn score_all(&self, job: wit::Job) -> Result<Vec<u8>, wit::Error> {
        self.judge(&job.id);
        Ok(vec![50; *self.1.borrow() as usize])
    }

    fn explain(&self, job: wit::Job, gpus: Vec<u32>) -> Result<Vec<String>, wit::Error> {
        self.judge(&job.id);
        Ok(vec![String::new(); gpus.len()])
    }

    fn choose_gpu(&self, job: wit::Job, _node: String) -> Result<wit::Choice, wit::Error> {
        self.judge(&job.id);
        Ok(wit::Choice {
            gpu: Some(0),
            score: 50,
            reason: String::new(),
        })
    }

    fn forget_stalest(&self, count: u32) -> Vec<String> {
        // Its ids in the order they were observed: the first are the stalest.
        let mut ids = self.0.borrow_mut();
        let count = ids.len().min(count as usize);
        ids.drain(..count).collect()
    }

    fn save(&self) -> Vec<u8> {
        let ids = self.0.borrow();
        if ids.iter().any(|id| id.starts_with("unsaveable:")) {
            panic!("deliberate panic in save for the sandbox tests");
        }
        ids.join("\n").into_bytes()
    }

    fn load(state: Vec<u8>) -> Result<wit_engine::Recommender, wit::Error> {
        let text = String::from_utf8(state).map_err(|e| wit::Error::InvalidInput(e.to_string()))?;
        if text.lines().any(|id| id.starts_with("unloadable:")) {
            return Err(wit::Error::InvalidInput(
                "deliberately refused snapshot for the sandbox tests".into(),
            ));
        }
        Ok(wrap(text.lines().map(str::to_owned).collect()))
    }
}
