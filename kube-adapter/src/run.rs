//! Starting the adapter: engine, store, watchers, election, server; and stopping it cleanly.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tandem_api::Policy;
use tandem_host::{HostConfig, Runtime};

use crate::app::{App, ClusterFile, Source};
use crate::engine::Engine;
use crate::http::{Limits, router};
use crate::identity::JobKeys;
use crate::leader::{self, Leadership};
use crate::store::KnowledgeStore;
use crate::watch::{self, spawn_until};
use crate::{Options, Shutdown};

/// The engine component this binary was built with.
pub static EMBEDDED_ENGINE: &[u8] = include_bytes!(env!("TANDEM_ENGINE_COMPONENT"));

/// Seed of a new knowledge base (exploration draws from it; the engine has no entropy).
const SEED: u64 = 0x7a4d_656d;

/// How often a follower checks whether the leader stored new knowledge.
const FOLLOW_EVERY: Duration = Duration::from_secs(2);

/// How long in-flight requests may finish after a shutdown signal.
const DRAIN: Duration = Duration::from_secs(10);

/// Runs the adapter until SIGTERM or Ctrl-C.
pub async fn run(options: Options) -> anyhow::Result<()> {
    // kube's client and the TLS server share rustls; pick its crypto once for the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let keys = JobKeys::from_file(&options.id_secret_file)?;
    let intake_token = options
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
        .transpose()?;
    let runtime = match &options.engine {
        Some(path) => Runtime::from_file(path, HostConfig::default()),
        None => Runtime::from_bytes(EMBEDDED_ENGINE, HostConfig::default()),
    }
    .context("cannot load the engine component")?;
    let policy = Policy {
        objective: options.objective,
        max_jobs_per_gpu: options.max_jobs_per_gpu,
        exploration: 0.0,
        model_caps: options.model_caps.clone(),
    };
    let limits = Limits {
        max_body_bytes: options.max_body_bytes,
        timeout: options.request_timeout,
    };
    let (trigger, shutdown) = Shutdown::new();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        let _ = trigger.send(true);
    });

    if let Some(path) = &options.cluster_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the cluster file {}", path.display()))?;
        let file: ClusterFile = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a cluster file", path.display()))?;
        let mut recommender = runtime.bootstrap(&policy, SEED)?;
        recommender.set_policy(&policy)?;
        let app = App::new(
            Engine::new(runtime, recommender, Default::default()),
            keys,
            options.resource.clone(),
            Arc::new(Leadership::alone()),
            intake_token,
            None,
            Source::Fixed(file),
            None,
        );
        return serve(Arc::new(app), &options, limits, shutdown).await;
    }

    let config = match &options.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig given and not running in a cluster")?,
    };
    let client = kube::Client::try_from(config)?;
    let store = KnowledgeStore::new(
        client.clone(),
        &options.namespace,
        &options.knowledge_configmap,
    );
    let stored = store
        .load()
        .await
        .context("cannot read the knowledge base from the cluster")?;
    let (mut recommender, profiles, resumed) = match &stored {
        Some(s) => {
            tracing::info!(
                configmap = %options.knowledge_configmap,
                version = %s.version,
                profiles = s.adapter.profiles.len(),
                "resuming from the stored knowledge base"
            );
            (
                runtime.load(&s.engine)?,
                s.adapter.profile_map(),
                Some((s.version.clone(), s.adapter.ledger.clone())),
            )
        }
        None => {
            tracing::info!("no stored knowledge base; starting from the bundled seed profiles");
            (runtime.bootstrap(&policy, SEED)?, Default::default(), None)
        }
    };
    recommender.set_policy(&policy)?;
    let identity = options.identity.clone().unwrap_or_else(default_identity);
    let leadership = Arc::new(Leadership::default());
    let stores = watch::Stores::new();
    let app = Arc::new(App::new(
        Engine::new(runtime, recommender, profiles),
        keys,
        options.resource.clone(),
        Arc::clone(&leadership),
        intake_token,
        Some(store),
        Source::Kubernetes {
            client: client.clone(),
            nodes: stores.nodes.0.clone(),
            pods: stores.pods.0.clone(),
        },
        resumed,
    ));
    watch::spawn(
        Arc::clone(&app),
        client.clone(),
        stores.nodes,
        stores.pods,
        shutdown.clone(),
    );

    let election_app = Arc::clone(&app);
    let leases: Api<Lease> = Api::namespaced(client, &options.namespace);
    let lease = options.lease.clone();
    let election_shutdown = shutdown.clone();
    let election = tokio::spawn(async move {
        leader::run(leases, lease, identity, leadership, election_shutdown, || {
            let app = Arc::clone(&election_app);
            async move {
                if let Err(error) = app.reload().await {
                    tracing::error!(%error, "cannot reload the knowledge base on becoming leader");
                }
            }
        })
        .await;
    });

    let follower = Arc::clone(&app);
    spawn_until(shutdown.clone(), async move {
        loop {
            tokio::time::sleep(FOLLOW_EVERY).await;
            if !follower.leadership.is_leader() {
                match follower.reload().await {
                    Ok(true) => tracing::info!("loaded the knowledge base the leader stored"),
                    Ok(false) => {}
                    Err(error) => tracing::warn!(%error, "cannot follow the knowledge base"),
                }
            }
        }
    });

    let served = serve(app, &options, limits, shutdown).await;
    // Let the election release the Lease, so a successor need not wait for it to expire.
    let _ = tokio::time::timeout(Duration::from_secs(5), election).await;
    served
}

/// Serves a fixed cluster on an already bound listener until `shutdown` (benchmarks and
/// tests start the adapter in-process this way).
pub async fn serve_fixed(
    app: Arc<App>,
    listener: std::net::TcpListener,
    limits: Limits,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let handle = axum_server::Handle::new();
    let drain = handle.clone();
    tokio::spawn(async move {
        shutdown.wait().await;
        drain.graceful_shutdown(Some(DRAIN));
    });
    axum_server::from_tcp(listener)?
        .handle(handle)
        .serve(router(app, limits).into_make_service())
        .await?;
    Ok(())
}

async fn serve(
    app: Arc<App>,
    options: &Options,
    limits: Limits,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let handle = axum_server::Handle::new();
    let drain = handle.clone();
    tokio::spawn(async move {
        shutdown.wait().await;
        drain.graceful_shutdown(Some(DRAIN));
    });
    let service = router(app, limits).into_make_service();
    match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => {
            let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key)
                .await
                .with_context(|| format!("cannot load TLS certificate {}", cert.display()))?;
            tracing::info!(listen = %options.listen, "serving HTTPS");
            axum_server::bind_rustls(options.listen, tls)
                .handle(handle)
                .serve(service)
                .await
        }
        _ => {
            tracing::info!(listen = %options.listen, "serving HTTP");
            axum_server::bind(options.listen)
                .handle(handle)
                .serve(service)
                .await
        }
    }
    .with_context(|| format!("cannot serve on {}", options.listen))?;
    tracing::info!("stopped");
    Ok(())
}

/// The host name, as a replica identity outside a pod.
fn default_identity() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "tandem-kube-adapter".to_owned())
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
