//! The Tandem engine as a WebAssembly component.
//!
//! This crate is glue only: it implements the `plugin` world of `wit/current` by converting
//! the canonical-ABI types wit-bindgen generates to [`tandem_api`] types and calling
//! [`tandem_engine`]. Built for `wasm32-unknown-unknown` (`cargo xtask component`) it becomes
//! the component every Tandem host loads; it imports nothing but the host's `log` function.
//!
//! A panic inside the engine is reported through `log` at error level (so the host can tell a
//! panic from other traps and show its message) before the guest aborts.

mod convert;

use std::cell::RefCell;
use std::sync::Once;

use bindings::exports::tandem::engine::engine::{self as wit_engine, GuestRecommender};
use bindings::tandem::engine::types as wit;

/// wit-bindgen's bindings of the `plugin` world, generated ahead of time and checked in
/// (`cargo test -p tandem-xtask --test bindings` checks them against the WIT).
#[expect(
    unsafe_code,
    clippy::allow_attributes,
    unused_qualifications,
    reason = "wit-bindgen's generated canonical-ABI glue"
)]
mod bindings {
    include!("bindings.rs");

    use super::Component;
    export!(Component);
}

// linfa's k-means pulls in `getrandom`, which refuses to build for wasm32-unknown-unknown
// unless a source is registered. The engine never asks for OS entropy (every RNG is seeded by
// the host), so the registered source only ever reports "unsupported".
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod no_entropy {
    fn unsupported(_: &mut [u8]) -> Result<(), getrandom::Error> {
        Err(getrandom::Error::UNSUPPORTED)
    }

    // `allow`, not `expect`: whether `unsafe_code` fires inside another crate's macro depends
    // on the compiler (Debian's rustc-web does not flag it), and an unmet `expect` warns.
    #[allow(
        unsafe_code,
        reason = "the registration macro defines an extern symbol"
    )]
    mod register {
        getrandom::register_custom_getrandom!(super::unsupported);
    }
}

/// Forwards panics to the host's log before the abort turns them into a trap.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            bindings::log(
                wit::LogLevel::Error,
                &format!("{}{info}", tandem_api::PANIC_PREFIX),
            );
        }));
    });
}

/// The component's entry point.
struct Component;

impl wit_engine::Guest for Component {
    type Recommender = Recommender;

    fn engine_version() -> String {
        tandem_engine::engine_version().to_owned()
    }

    fn synthesize(
        ground_truth: Vec<wit::Series>,
        points_per_gap: u32,
        bounds: Vec<Option<(f64, f64)>>,
    ) -> WitResult<wit::Synthesis> {
        install_panic_hook();
        let ground_truth = convert::all(ground_truth);
        Ok(tandem_engine::synthesize(&ground_truth, points_per_gap, &bounds)?.into())
    }
}

/// The `recommender` resource: one engine behind a `RefCell`, because the canonical ABI hands
/// methods `&self` while observations change the knowledge base.
struct Recommender(RefCell<tandem_engine::Recommender>);

impl Recommender {
    fn wrap(engine: tandem_engine::Recommender) -> wit_engine::Recommender {
        wit_engine::Recommender::new(Self(RefCell::new(engine)))
    }
}

type WitResult<T> = Result<T, wit::Error>;

impl GuestRecommender for Recommender {
    fn create(policy: wit::Policy, seed: u64) -> WitResult<wit_engine::Recommender> {
        install_panic_hook();
        let engine = tandem_engine::Recommender::new(policy.into(), seed)?;
        Ok(Self::wrap(engine))
    }

    fn bootstrap(policy: wit::Policy, seed: u64) -> WitResult<wit_engine::Recommender> {
        install_panic_hook();
        let engine = tandem_engine::Recommender::bootstrap(policy.into(), seed)?;
        Ok(Self::wrap(engine))
    }

    fn predict(&self, group: Vec<wit::Job>, gpu: wit::GpuSpec) -> WitResult<wit::Prediction> {
        let prediction = self.0.borrow().predict(&convert::all(group), &gpu.into())?;
        Ok(prediction.into())
    }

    fn describe(&self) -> wit::KnowledgeSummary {
        self.0.borrow().describe().into()
    }

    fn set_policy(&self, policy: wit::Policy) -> WitResult<()> {
        Ok(self.0.borrow_mut().set_policy(policy.into())?)
    }

    fn observe_profile(&self, job: String, p: wit::Profile) -> WitResult<wit::Assignment> {
        let assignment = self.0.borrow_mut().observe_profile(&job, p.into())?;
        Ok(assignment.into())
    }

    fn observe_outcome(&self, o: wit::Outcome) -> WitResult<()> {
        Ok(self.0.borrow_mut().observe_outcome(&o.into())?)
    }

    fn observe_memory(
        &self,
        job: String,
        declared: wit::ModelSummary,
        gpu: wit::GpuSpec,
        peak_mem_mib: u32,
    ) -> WitResult<()> {
        Ok(self
            .0
            .borrow_mut()
            .observe_memory(&job, &declared.into(), &gpu.into(), peak_mem_mib)?)
    }

    fn observe_speed(&self, job: String, gpu_model: String, work_per_s: f64) -> WitResult<()> {
        Ok(self
            .0
            .borrow_mut()
            .observe_speed(&job, &gpu_model, work_per_s)?)
    }

    fn estimate(&self, job: wit::Job, gpus: Vec<wit::GpuSpec>) -> WitResult<Vec<wit::Estimate>> {
        let estimates = self.0.borrow().estimate(&job.into(), &convert::all(gpus))?;
        Ok(convert::all(estimates))
    }

    fn recommend(
        &self,
        queue: Vec<wit::Job>,
        gpus: Vec<wit::Gpu>,
    ) -> WitResult<wit::Recommendation> {
        let queue = convert::all(queue);
        let gpus = convert::all(gpus);
        Ok(self.0.borrow().recommend(&queue, &gpus)?.into())
    }

    fn filter(&self, job: wit::Job, gpus: Vec<wit::Gpu>) -> WitResult<Vec<wit::Fit>> {
        let fits = self.0.borrow().filter(&job.into(), &convert::all(gpus))?;
        Ok(convert::all(fits))
    }

    fn score(&self, job: wit::Job, gpus: Vec<wit::Gpu>) -> WitResult<Vec<wit::GpuScore>> {
        let scores = self.0.borrow().score(&job.into(), &convert::all(gpus))?;
        Ok(convert::all(scores))
    }

    fn update_cluster(&self, changes: Vec<wit::ClusterChange>) -> WitResult<wit::ClusterSummary> {
        let changes = convert::all(changes);
        Ok(self.0.borrow_mut().update_cluster(&changes)?.into())
    }

    fn score_all(&self, job: wit::Job) -> WitResult<Vec<u8>> {
        Ok(self.0.borrow_mut().score_all(&job.into())?)
    }

    fn explain(&self, job: wit::Job, gpus: Vec<u32>) -> WitResult<Vec<String>> {
        Ok(self.0.borrow_mut().explain(&job.into(), &gpus)?)
    }

    fn choose_gpu(&self, job: wit::Job, node: String) -> WitResult<wit::Choice> {
        Ok(self.0.borrow_mut().choose_gpu(&job.into(), &node)?.into())
    }

    fn forget_stalest(&self, count: u32) -> Vec<String> {
        self.0.borrow_mut().forget_stalest(count)
    }

    fn save(&self) -> Vec<u8> {
        self.0.borrow().save()
    }

    fn load(state: Vec<u8>) -> WitResult<wit_engine::Recommender> {
        install_panic_hook();
        Ok(Self::wrap(tandem_engine::Recommender::load(&state)?))
    }
}
