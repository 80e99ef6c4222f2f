//! Starting a Kubernetes front-end: engine, store, watchers, election, server; and stopping it
//! cleanly.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use kube::Api;
use tandem_adapter_core::serve::{Tls, serve, wait_for_signal};
use tandem_adapter_core::{
    Core, CoreConfig, Frontend, Leadership, Limits, SchedulerAuth, Shutdown, resume_or_bootstrap,
    resume_or_bootstrap_keyed, startup,
};
use tandem_api::Policy;

use crate::Options;
use crate::app::{App, ClusterFile, Source};
use crate::follow;
use crate::store::ConfigMapStore;
use crate::watch;

/// Engine calls that may wait for the engine before more are refused (and fail open).
const ENGINE_QUEUE: usize = 1024;

impl Options {
    /// The limits requests and engine calls run under.
    pub fn limits(&self) -> Limits {
        Limits {
            max_body_bytes: self.max_body_bytes,
            max_inflight_body_bytes: self.max_inflight_body_bytes,
            request_timeout: self.request_timeout,
            decision_wait: self.decision_timeout,
            observation_wait: self.request_timeout,
            intake_items_per_minute: self.core.intake_items_per_minute,
        }
    }

    /// The engine's policy.
    pub fn policy(&self) -> Policy {
        self.core.policy(self.model_caps.clone())
    }

    /// Who may call the scheduler verbs.
    pub fn scheduler_auth(&self) -> anyhow::Result<SchedulerAuth> {
        Ok(SchedulerAuth {
            client_certificates: self.client_ca.is_some(),
            token: startup::read_token(self.scheduler_token_file.as_deref(), "scheduler token")?,
        })
    }
}

/// A started adapter: the core, the front-end state the watchers feed (or a fixed cluster),
/// and how to serve them. Every Kubernetes front-end (kube-scheduler's extender in
/// `tandem-kube-adapter`, Volcano's in `tandem-volcano-adapter`) starts the same way and serves its own verbs over the same
/// [`App`], so a cluster running several keeps one knowledge base under one Lease.
pub struct Started {
    /// The shared core.
    pub core: Arc<Core>,
    /// The Kubernetes view: watchers, GPU records, bind assumptions.
    pub app: Arc<App>,
    /// Fires on SIGTERM or Ctrl-C.
    pub shutdown: Shutdown,
    listen: std::net::SocketAddr,
    tls: Option<Tls>,
    election: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("listen", &self.listen)
            .finish_non_exhaustive()
    }
}

impl Started {
    /// Serves the core's endpoints and `frontend`'s verbs until shutdown, then lets the
    /// election release the Lease.
    pub async fn serve<F: Frontend>(self, frontend: Arc<F>) -> anyhow::Result<()> {
        tracing::info!(frontend = F::TYPE, "serving");
        let router = tandem_adapter_core::http::router(self.core, frontend);
        let served = serve(router, self.listen, self.tls, self.shutdown).await;
        if let Some(election) = self.election {
            // Let the election release the Lease, so a successor need not wait for it to expire.
            let _ = tokio::time::timeout(Duration::from_secs(5), election).await;
        }
        served
    }
}

/// Starts what every Kubernetes front-end needs: the engine (from the stored knowledge base or
/// the seed), the ConfigMap store, the watchers, the election and the follower; or, with
/// `--cluster-file`, an engine over a fixed cluster with nothing stored.
pub async fn start(options: &Options) -> anyhow::Result<Started> {
    // kube's client and the TLS server share rustls; pick its crypto once for the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let keys = options.core.keys()?;
    let placements = Arc::new(options.placements()?);
    let intake_token = options.core.intake_token()?;
    let runtime = options.core.runtime(options.engine_deadline)?;
    let policy = options.policy();
    let (trigger, shutdown) = Shutdown::new();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        let _ = trigger.send(true);
    });
    let tls = Tls::from_files(
        options.tls_cert.as_deref(),
        options.tls_key.as_deref(),
        options.client_ca.as_deref(),
    );
    let scheduler_auth = options.scheduler_auth()?;

    if let Some(path) = &options.cluster_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the cluster file {}", path.display()))?;
        let file: ClusterFile = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a cluster file", path.display()))?;
        let (engine, _) = resume_or_bootstrap(runtime, None, &policy).await?;
        let core = CoreConfig::new(engine, keys)
            .intake_token(intake_token)
            .limits(options.limits())
            .queue(ENGINE_QUEUE)
            .start()?
            .with_scheduler_auth(scheduler_auth);
        let app = App::new(
            Arc::new(core),
            options.resource.clone(),
            options.scheduler_timeout,
            Source::Fixed(file),
        )
        .with_costs(options.costs())
        .with_placements(placements);
        return Ok(Started {
            core: Arc::clone(&app.core),
            app: Arc::new(app),
            shutdown,
            listen: options.listen,
            tls,
            election: None,
        });
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
    let profilers = crate::intake::profiler_auth(
        &client,
        &options.profiler_service_accounts,
        &options.profiler_token_audience,
    );
    let store = ConfigMapStore::new(
        client.clone(),
        &options.namespace,
        &options.knowledge_configmap,
    );
    let (engine, stored) = resume_or_bootstrap_keyed(runtime, Some(&store), &policy, &keys).await?;
    let identity = follow::replica_identity(options.identity.as_deref(), "tandem-kube-adapter");
    let leadership = Arc::new(Leadership::default());
    let mut core = CoreConfig::new(engine, keys)
        .leadership(Arc::clone(&leadership))
        .intake_token(intake_token)
        .store(Box::new(store))
        .resumed(stored)
        .limits(options.limits())
        .queue(ENGINE_QUEUE)
        .start()?
        .with_scheduler_auth(scheduler_auth);
    if let Some(profilers) = profilers {
        core = core.with_intake_auth(profilers);
    }
    let core = Arc::new(core);
    let stores = watch::Stores::new();
    let app = Arc::new(
        App::new(
            Arc::clone(&core),
            options.resource.clone(),
            options.scheduler_timeout,
            Source::Kubernetes {
                client: client.clone(),
                nodes: stores.nodes.0.clone(),
                pods: stores.pods.0.clone(),
            },
        )
        .with_costs(options.costs())
        .with_placements(placements),
    );
    // A node's profiler posts profiles of the pods the watcher sees on its node.
    let locator = Arc::clone(&app);
    core.locate_jobs_with(Arc::new(move |job: &str, node: &str| {
        locator.runs_on(job, node)
    }));
    watch::spawn(
        Arc::clone(&app),
        client.clone(),
        stores.nodes,
        stores.pods,
        shutdown.clone(),
    );

    let election = follow::elect(
        follow::Election {
            leases: Api::namespaced(client, &options.namespace),
            lease: options.lease.clone(),
            identity,
        },
        Arc::clone(&core),
        Arc::clone(&app),
        shutdown.clone(),
    );
    follow::spawn_follower(Arc::clone(&core), Arc::clone(&app), shutdown.clone());

    Ok(Started {
        core,
        app,
        shutdown,
        listen: options.listen,
        tls,
        election: Some(election),
    })
}
