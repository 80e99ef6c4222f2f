//! Starting the service: engine, knowledge-base file, node reader, server; and stopping it.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tandem_adapter_core::serve::{Tls, serve, wait_for_signal};
use tandem_adapter_core::store::FileStore;
use tandem_adapter_core::{CoreConfig, Limits, Shutdown, resume_or_bootstrap};

use crate::Options;
use crate::app::{App, Settings};
use crate::auth::{Callers, Method, Unmunge};
use crate::nodes;
use crate::options::Auth;
use crate::profilers::{Hosts, MungeProfilers};

/// Engine calls that may wait before more are refused (and the hook fails open).
const ENGINE_QUEUE: usize = 256;

/// Runs the service until SIGTERM or Ctrl-C.
pub async fn run(options: Options) -> anyhow::Result<()> {
    let callers = callers(&options).await?;
    let tls = Tls::from_files(
        options.tls_cert.as_deref(),
        options.tls_key.as_deref(),
        options.client_ca.as_deref(),
    );
    if tls.is_some() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let keys = options.core.keys()?;
    let intake_token = options.core.intake_token()?;
    let runtime = options.core.runtime(options.engine_deadline)?;
    let policy = options.core.policy(Vec::new());
    let store = FileStore::new(&options.knowledge);
    let (engine, stored) = resume_or_bootstrap(runtime, Some(&store), &policy).await?;
    // With MUNGE, a node's profiler may post its own node's profiles with root's credential.
    let hosts: Hosts = Arc::default();
    let profilers = match &callers.method {
        Method::Munge(unmunge) => Some(Arc::new(MungeProfilers::new(
            Arc::clone(unmunge),
            Arc::clone(&hosts),
        ))),
        _ => None,
    };
    // Slurm has one controller, so the service is always alone (the default leadership).
    let mut core = CoreConfig::new(engine, keys)
        .intake_token(intake_token)
        .store(Box::new(store))
        .resumed(stored)
        .limits(Limits {
            decision_wait: options.decision_timeout,
            ..Limits::default()
        })
        .queue(ENGINE_QUEUE)
        .start()?;
    if let Some(profilers) = profilers {
        core = core.with_intake_auth(profilers);
    }
    let core = Arc::new(core);
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
        callers,
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
    let located = Arc::clone(&app);
    core.locate_jobs_with(Arc::new(move |job: &str, node: &str| {
        located.runs_on(job, node)
    }));
    let read_nodes = move || {
        let app = Arc::clone(&reader);
        let scontrol = scontrol.clone();
        let hosts = Arc::clone(&hosts);
        async move {
            match nodes::read(&scontrol).await {
                Ok(nodes) => {
                    let found = nodes::hosts(&nodes).await;
                    *hosts.write() = found;
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
    serve(router, options.listen, tls, shutdown).await
}

/// Who may call the verbs, from the options; refuses to start without a way to tell, unless
/// --insecure-open-verbs says so, and checks that munged answers before serving.
async fn callers(options: &Options) -> anyhow::Result<Callers> {
    let mut slurm_uids = vec![0];
    slurm_uids.extend(&options.slurm_uids);
    let method = match options.auth {
        None => {
            anyhow::ensure!(
                options.insecure_open_verbs,
                "say how job_submit.lua and the SPANK plugin prove they are Slurm: --auth munge \
                 or --auth client-certificate (or --insecure-open-verbs for a test bed)"
            );
            tracing::warn!(
                "--insecure-open-verbs: the Slurm verbs are open to anyone who reaches this port; \
                 any user can take other users' placements, end their jobs in Tandem's view and \
                 poison what it learns. Use --auth munge or --auth client-certificate"
            );
            Method::Open
        }
        Some(Auth::ClientCertificate) => {
            anyhow::ensure!(
                options.client_ca.is_some(),
                "--auth client-certificate needs --tls-cert, --tls-key and --client-ca"
            );
            Method::ClientCertificate
        }
        Some(Auth::Munge) => {
            let unmunge = Unmunge::new(options.unmunge.clone(), options.munge_socket.clone());
            check_munge(options, &unmunge).await?;
            Method::Munge(Arc::new(unmunge))
        }
    };
    Ok(Callers { method, slurm_uids })
}

/// Encodes a credential with `munge` and decodes it: munged answers, and this service can
/// tell who callers are.
async fn check_munge(options: &Options, unmunge: &Unmunge) -> anyhow::Result<()> {
    let mut munge = tokio::process::Command::new(&options.munge);
    munge.arg("--no-input");
    if let Some(socket) = &options.munge_socket {
        munge.arg("--socket").arg(socket);
    }
    let output = tokio::time::timeout(
        Duration::from_secs(5),
        munge
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .with_context(|| format!("{} did not answer within 5 s", options.munge.display()))?
    .with_context(|| format!("cannot run {} (munge)", options.munge.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "--auth munge: {} cannot encode a credential (is munged running?): {}",
        options.munge.display(),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    let credential = String::from_utf8_lossy(&output.stdout);
    let decoded = unmunge
        .decode(&credential)
        .await
        .context("--auth munge: the service cannot decode its own credential")?;
    tracing::info!(
        uid = decoded.uid,
        host = decoded.host,
        slurm_uids = ?options.slurm_uids,
        "callers authenticated with MUNGE"
    );
    Ok(())
}
