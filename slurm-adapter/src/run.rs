//! Starting the service: engine, knowledge-base file, node reader, server; and stopping it.

use std::sync::Arc;

use anyhow::Context as _;
use tandem_adapter_core::serve::{serve, wait_for_signal};
use tandem_adapter_core::store::{FileStore, KnowledgeStore as _};
use tandem_adapter_core::{
    Core, CoreConfig, EMBEDDED_ENGINE, EngineState, JobKeys, Leadership, Limits, Shutdown,
};
use tandem_api::Policy;
use tandem_host::{HostConfig, Runtime};

use crate::Options;
use crate::app::{App, Settings};
use crate::nodes;

/// Seed of a new knowledge base (exploration draws from it; the engine has no entropy).
pub const SEED: u64 = 0x7a4d_656d;

/// Engine calls that may wait before more are refused (and the hook fails open).
const ENGINE_QUEUE: usize = 256;

impl Options {
    fn policy(&self) -> Policy {
        Policy {
            objective: self.objective,
            max_jobs_per_gpu: self.max_jobs_per_gpu,
            exploration: 0.0,
            model_caps: Vec::new(),
        }
    }

    fn runtime(&self) -> anyhow::Result<Runtime> {
        let config = HostConfig {
            call_deadline: self.engine_deadline,
            compiled_cache: (!self.compiled_cache.as_os_str().is_empty())
                .then(|| self.compiled_cache.clone()),
            ..HostConfig::default()
        };
        match &self.engine {
            Some(path) => Runtime::from_file(path, config),
            None => Runtime::from_bytes(EMBEDDED_ENGINE, config),
        }
        .context("cannot load the engine component")
    }
}

fn intake_token(options: &Options) -> anyhow::Result<Option<String>> {
    options
        .intake_token_file
        .as_deref()
        .map(|path| {
            let token = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the intake token {}", path.display()))?;
            let token = token.trim().to_owned();
            anyhow::ensure!(
                !token.is_empty(),
                "{}: the intake token is empty",
                path.display()
            );
            Ok(token)
        })
        .transpose()
}

/// Runs the service until SIGTERM or Ctrl-C.
pub async fn run(options: Options) -> anyhow::Result<()> {
    let keys = JobKeys::from_file(&options.id_secret_file)?;
    let intake_token = intake_token(&options)?;
    let runtime = options.runtime()?;
    let policy = options.policy();
    let store = FileStore::new(&options.knowledge);
    let stored = store.load().await.with_context(|| {
        format!(
            "cannot read the knowledge base {}",
            options.knowledge.display()
        )
    })?;
    let (mut recommender, resumed) = match stored {
        Some(s) => {
            tracing::info!(
                file = %options.knowledge.display(),
                version = %s.version,
                "resuming from the stored knowledge base"
            );
            (
                // Under the training deadline: a knowledge base holding reported peaks refits
                // the memory model as it loads.
                tandem_adapter_core::engine::load_for_decisions(&runtime, &s.engine)?,
                Some((s.version, s.adapter)),
            )
        }
        None => {
            tracing::info!("no stored knowledge base; starting from the bundled seed profiles");
            (runtime.bootstrap(&policy, SEED)?, None)
        }
    };
    recommender.set_policy(&policy)?;
    let core = Arc::new(Core::start(CoreConfig {
        engine: EngineState::new(runtime, recommender),
        keys,
        // Slurm has one controller, so the service is always alone.
        leadership: Arc::new(Leadership::alone()),
        intake_token,
        store: Some(Box::new(store)),
        stored: resumed,
        limits: Limits {
            decision_wait: options.decision_timeout,
            ..Limits::default()
        },
        queue: ENGINE_QUEUE,
    })?);
    let app = Arc::new(App::new(
        Arc::clone(&core),
        Settings {
            gpu_memory: options.gpu_memory.clone(),
            default_gpu_memory_mib: options.default_gpu_memory_mib,
            policy,
            mps_percentage: options.mps_percentage,
            pending_ttl: options.pending_ttl,
            model_dir: options.model_dir.clone(),
        },
    ));

    let (trigger, shutdown) = Shutdown::new();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        let _ = trigger.send(true);
    });

    // The nodes once before serving, so the first submission sees the cluster; a failure is
    // retried by the refresher (the hook fails open meanwhile: /readyz says not ready).
    let reader = Arc::clone(&app);
    let scontrol = options.scontrol.clone();
    let refresh = options.node_refresh;
    let read_nodes = move || {
        let app = Arc::clone(&reader);
        let scontrol = scontrol.clone();
        async move {
            match nodes::read(&scontrol).await {
                Ok(nodes) => {
                    let gpus = app.set_nodes(&nodes);
                    tracing::debug!(nodes = nodes.len(), gpus, "read the GPU nodes from Slurm");
                }
                Err(error) => tracing::warn!(%error, "cannot read the nodes from Slurm"),
            }
            app.sweep();
        }
    };
    read_nodes().await;
    let mut stop_refresh = shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(refresh) => read_nodes().await,
                () = stop_refresh.wait() => break,
            }
        }
    });

    let router = tandem_adapter_core::http::router(core, app);
    serve(router, options.listen, None, shutdown).await
}
