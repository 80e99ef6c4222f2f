//! The plugin's core and what runs beside the scheduling cycle: the engine thread, the
//! knowledge base kept in ConfigMaps under the Lease's writer, the intake node profilers post
//! to, and learning from finished pods — the same core, store, election and intake as the
//! extender's ([`tandem_kube_common`]), on a small tokio runtime of the plugin's own.
//!
//! The knowledge base has one writer, elected with a Lease (the extender's by default), not
//! kube-scheduler's leader: replicas that do not hold it follow what the writer stores.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use futures::StreamExt as _;
use kube::runtime::{WatchStreamExt as _, watcher};
use tandem_adapter_core::serve::{Tls, serve_listener, serve_listener_tls};
use tandem_adapter_core::startup::{load_engine, read_token};
use tandem_adapter_core::store::KnowledgeStore;
use tandem_adapter_core::{
    Core, CoreConfig, Frontend, JobKeys, Leadership, Limits, Shutdown, resume_or_bootstrap_keyed,
};
use tandem_kube_common::app::App;
use tandem_kube_common::follow;
use tandem_kube_common::lean::LeanPod;
use tandem_kube_common::store::ConfigMapStore;
use tandem_kube_common::watch::spawn_until;

use crate::Error;
use crate::config::{Config, Connection};

/// Engine calls that may wait for the engine: the scheduling cycle asks one at a time, the
/// intake a few more.
const ENGINE_QUEUE: usize = 256;

/// The core and the runtime its tasks run on; dropping it stops them.
pub struct Served {
    runtime: Option<tokio::runtime::Runtime>,
    core: Arc<Core>,
    client: Option<kube::Client>,
    stop: tokio::sync::watch::Sender<bool>,
    shutdown: Shutdown,
}

impl std::fmt::Debug for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Served")
            .field("store", &self.client.is_some())
            .finish_non_exhaustive()
    }
}

/// The intake's front-end: the plugin's verbs are kube-scheduler's extension points, not
/// routes, so it serves the core's endpoints alone.
struct Intake;

impl Frontend for Intake {
    const TYPE: &'static str = "kube-scheduler framework plugin";
    const VERBS: &'static [&'static str] = &[];

    fn routes(self: Arc<Self>) -> Router {
        Router::new()
    }

    fn is_ready(&self) -> bool {
        true
    }
}

impl Served {
    /// Starts the core: the engine (from the stored knowledge base, when `connection` reaches
    /// the API server and one is stored; from the seed profiles otherwise), the store, and the
    /// intake if `config` asks for it. Without a connection nothing is stored and this replica
    /// is the only writer (tests).
    pub fn start(config: &Config, connection: Option<Connection>) -> Result<Self, Error> {
        // kube's client and the intake's TLS share rustls; pick its crypto once for the process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let keys = JobKeys::from_file(&config.id_secret_file).map_err(Error::Secret)?;
        let intake_token = read_token(config.intake_token_file.as_deref(), "intake token")
            .map_err(|e| Error::Token(e.into()))?;
        let engine = load_engine(
            config.engine.as_deref(),
            Duration::from_millis(config.engine_deadline_ms),
            config.compiled_cache.as_deref().unwrap_or(Path::new("")),
        )
        .map_err(|e| Error::Start {
            what: "the engine",
            source: e.into(),
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tandem-plugin")
            .enable_all()
            .build()
            .map_err(|e| Error::Start {
                what: "the plugin's runtime",
                source: e.into(),
            })?;
        let policy = config.policy();
        let (core, client) = runtime.block_on(async {
            let client = match connection {
                Some(connection) => Some(connection.client().await?),
                None => None,
            };
            let store = client.as_ref().map(|client| {
                ConfigMapStore::new(
                    client.clone(),
                    &config.namespace,
                    &config.knowledge_config_map,
                )
            });
            let (engine, stored) = resume_or_bootstrap_keyed(
                engine,
                store.as_ref().map(|s| s as &dyn KnowledgeStore),
                &policy,
                &keys,
            )
            .await
            .map_err(|e| Error::Knowledge(e.into()))?;
            let mut start = CoreConfig::new(engine, keys)
                .intake_token(intake_token)
                .resumed(stored)
                .limits(Limits {
                    intake_items_per_minute: config.intake_items_per_minute,
                    ..Limits::default()
                })
                .queue(ENGINE_QUEUE)
                // Decisions come from the scheduling cycle's thread: run there, not handed to
                // another.
                .inline();
            // With a store, the Lease elects the writer; without one, this replica is alone.
            if let Some(store) = store {
                start = start
                    .store(Box::new(store))
                    .leadership(Arc::new(Leadership::default()));
            }
            let mut core = start.start().map_err(|e| Error::Start {
                what: "the core",
                source: e.into(),
            })?;
            if let Some(client) = &client
                && let Some(profilers) = tandem_kube_common::intake::profiler_auth(
                    client,
                    &config.profiler_accounts()?,
                    &config.profiler_token_audience,
                )
            {
                core = core.with_intake_auth(profilers);
            }
            Ok::<_, Error>((Arc::new(core), client))
        })?;
        core.set_ready();
        let (stop, shutdown) = Shutdown::new();
        let served = Self {
            runtime: Some(runtime),
            core,
            client,
            stop,
            shutdown,
        };
        served.serve_intake(config)?;
        Ok(served)
    }

    /// The core.
    pub fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// Where the plugin's tasks run.
    pub fn handle(&self) -> tokio::runtime::Handle {
        self.runtime().handle().clone()
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .expect("the runtime lives as long as Served")
    }

    /// Runs `work` on the plugin's runtime and waits for it (tests, and calls from the
    /// scheduler's threads that must wait for the core).
    pub fn block_on<T>(&self, work: impl Future<Output = T>) -> T {
        self.runtime().block_on(work)
    }

    /// Serves the core's endpoints on `intakeAddress`, if given: the port is bound here, so an
    /// address already taken fails start-up.
    fn serve_intake(&self, config: &Config) -> Result<(), Error> {
        let Some(address) = config.intake_address else {
            return Ok(());
        };
        let listener = std::net::TcpListener::bind(address).map_err(|e| Error::Intake {
            what: format!("intakeAddress {address}"),
            source: e.into(),
        })?;
        let router = tandem_adapter_core::http::router(Arc::clone(&self.core), Arc::new(Intake));
        let shutdown = self.shutdown.clone();
        let tls = Tls::from_files(
            config.intake_tls_cert_file.as_deref(),
            config.intake_tls_key_file.as_deref(),
            None,
        );
        if let Some(tls) = &tls {
            // Read now, so a certificate that cannot be read fails start-up by name.
            tls.server_config().map_err(|e| Error::Intake {
                what: "its TLS certificate".into(),
                source: e.into(),
            })?;
        }
        self.runtime().spawn(async move {
            let served = match tls {
                Some(tls) => serve_listener_tls(router, listener, tls, shutdown).await,
                None => serve_listener(router, listener, shutdown).await,
            };
            if let Err(error) = served {
                tracing::error!(%error, "the intake stopped");
            }
        });
        tracing::info!(%address, "the intake is listening");
        Ok(())
    }

    /// Starts the election of the knowledge base's writer and the follower: a replica that
    /// does not write loads what the writer stored; the writer learns from the pods that
    /// finished while it did not (the runs `app` holds).
    pub fn spawn(&self, config: &Config, app: &Arc<App>) {
        let _guard = self.runtime().enter();
        // A node's profiler posts profiles of the pods the plugin sees on its node. Weak: the
        // core holds the locator, and the front-end holds the core.
        let locator = Arc::downgrade(app);
        self.core
            .locate_jobs_with(Arc::new(move |job: &str, node: &str| {
                locator.upgrade().is_some_and(|app| app.runs_on(job, node))
            }));
        app.catch_up_soon();
        if let Some(client) = &self.client {
            let election = follow::Election {
                leases: kube::Api::namespaced(client.clone(), &config.namespace),
                lease: config.lease.clone(),
                identity: follow::replica_identity(
                    config.identity.as_deref(),
                    "tandem-kube-scheduler",
                ),
            };
            // Ends with the runtime, which waits a moment for it to release the Lease.
            drop(follow::elect(
                election,
                Arc::clone(&self.core),
                Arc::clone(app),
                self.shutdown.clone(),
            ));
            self.watch_runs(client, app);
        }
        follow::spawn_follower(
            Arc::clone(&self.core),
            Arc::clone(app),
            self.shutdown.clone(),
        );
    }

    /// Watches, for `app`, the pods that started or finished (`status.phase!=Pending`): one
    /// ordered stream of every run, finished ones included (kube-scheduler's pod informer
    /// selects pods that have not finished, `status.phase!=Succeeded,status.phase!=Failed`, so
    /// a pod that finishes leaves it as if deleted, without its final state).
    fn watch_runs(&self, client: &kube::Client, app: &Arc<App>) {
        let config = watcher::Config::default().fields("status.phase!=Pending");
        let events = watcher(kube::Api::<LeanPod>::all(client.clone()), config).default_backoff();
        let app = Arc::clone(app);
        let _guard = self.runtime().enter();
        spawn_until(self.shutdown.clone(), async move {
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                        app.pod_ran(&pod.0);
                    }
                    Ok(watcher::Event::Delete(pod)) => {
                        app.forget_run(pod.0.metadata.uid.as_deref().unwrap_or_default());
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%error, "the watch on pods that ran failed; retrying")
                    }
                }
            }
        });
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(runtime) = self.runtime.take() {
            // Tasks waiting on the API server are abandoned after a moment.
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}
