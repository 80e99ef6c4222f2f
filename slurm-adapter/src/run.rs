//! Starting the service: engine, knowledge-base file, node reader, server; and stopping it.

use std::sync::Arc;

use tandem_adapter_core::serve::{serve, wait_for_signal};
use tandem_adapter_core::store::FileStore;
use tandem_adapter_core::{Core, CoreConfig, Leadership, Limits, Shutdown, resume_or_bootstrap};

use crate::Options;
use crate::app::{App, Settings};
use crate::nodes;

/// Engine calls that may wait before more are refused (and the hook fails open).
const ENGINE_QUEUE: usize = 256;

/// Runs the service until SIGTERM or Ctrl-C.
pub async fn run(options: Options) -> anyhow::Result<()> {
    let keys = options.core.keys()?;
    let intake_token = options.core.intake_token()?;
    let runtime = options.core.runtime(options.engine_deadline)?;
    let policy = options.core.policy(Vec::new());
    let store = FileStore::new(&options.knowledge);
    let (engine, stored) = resume_or_bootstrap(runtime, Some(&store), &policy).await?;
    let core = Arc::new(Core::start(CoreConfig {
        engine,
        keys,
        // Slurm has one controller, so the service is always alone.
        leadership: Arc::new(Leadership::alone()),
        intake_token,
        store: Some(Box::new(store)),
        stored,
        limits: Limits {
            decision_wait: options.decision_timeout,
            ..Limits::default()
        },
        queue: ENGINE_QUEUE,
        inline: false,
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
            model_file_limit: options.model_file_limit,
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
