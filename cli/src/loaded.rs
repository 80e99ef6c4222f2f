//! A queue file loaded into an engine: what `recommend` and `predict` both start from.
//!
//! The file is read and checked, the engine opened (from a knowledge base, or bootstrapped
//! from the bundled seed profiles), the file's measured speeds reported to it, and every job id
//! keyed (see [`crate::keys`]) before the engine sees it.

use std::path::Path;

use anyhow::Context as _;

use crate::args::{EngineArgs, ObjectiveArg, SecretArgs};
use crate::kb;
use crate::keys::IdKeys;
use crate::queue::{self, QueueFile};

/// A queue file loaded into an engine: the request, and the same with keyed ids.
pub(crate) struct Loaded {
    /// The request as the file gave it (ids unkeyed).
    pub(crate) request: queue::Request,
    /// The engine, policy set and speeds reported.
    pub(crate) recommender: tandem_host::Recommender,
    /// How ids were keyed, to map answers back.
    pub(crate) keys: IdKeys,
    /// The queue, keyed.
    pub(crate) queued: Vec<tandem_api::Job>,
    /// The GPUs, residents keyed.
    pub(crate) gpus: Vec<tandem_api::Gpu>,
}

/// Reads `path`, opens the engine (from `kb` if given) and reports the file's speeds to it.
pub(crate) fn load_queue(
    engine: &EngineArgs,
    path: &Path,
    kb: Option<&Path>,
    secret: &SecretArgs,
    seed: u64,
    objective: Option<ObjectiveArg>,
) -> anyhow::Result<Loaded> {
    let mut queue = QueueFile::read(path)?;
    if let Some(objective) = objective {
        queue.policy.objective = objective.into();
    }
    let speeds = queue.speeds();
    let request = queue.into_request();
    let runtime = engine.runtime()?;
    let (mut recommender, mut keys) = match kb {
        Some(kb) => {
            let opened = kb::open(&runtime, kb, secret.secret_file.as_deref())?;
            (opened.recommender, opened.keys)
        }
        None => (
            runtime.bootstrap(&request.policy, seed)?,
            IdKeys::ephemeral()?,
        ),
    };
    recommender.set_policy(&request.policy)?;
    for (job, model, speed) in speeds {
        recommender
            .observe_speed(&keys.key(&job), &model, speed)
            .with_context(|| {
                format!(
                    "{}: the engine rejected the speeds of `{job}`",
                    path.display()
                )
            })?;
    }
    // The engine sees keyed ids only; answers are mapped back by the callers.
    let key_job = |keys: &mut IdKeys, job: &tandem_api::Job| tandem_api::Job {
        id: keys.key(&job.id),
        ..job.clone()
    };
    let queued: Vec<_> = request
        .queue
        .iter()
        .map(|j| key_job(&mut keys, j))
        .collect();
    let gpus: Vec<_> = request
        .gpus
        .iter()
        .map(|gpu| tandem_api::Gpu {
            residents: gpu
                .residents
                .iter()
                .map(|j| key_job(&mut keys, j))
                .collect(),
            ..gpu.clone()
        })
        .collect();
    Ok(Loaded {
        request,
        recommender,
        keys,
        queued,
        gpus,
    })
}
