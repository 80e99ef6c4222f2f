//! A throwaway Kubernetes control plane for the end-to-end tests: real `etcd`,
//! `kube-apiserver` and `kube-scheduler` processes on loopback ports, and no kubelet.
//!
//! The binaries come from `tandem_xtask::kube` (built from published Go modules and cached
//! outside the tree). Everything else lives in a temporary directory: etcd's data, the
//! apiserver's self-signed serving certificate, the service-account key, the token file, the
//! kubeconfig, the scheduler configuration and one log file per process.
//!
//! Each cluster has its own placement key pair ([`Cluster::placement_key`] for the scheduler
//! paths, [`Cluster::placement_public_key`] for the nodes), as the Helm chart generates one per
//! release: the suites start Tandem's schedulers with it, check the signatures they write
//! ([`Cluster::placement_verifier`]), and place pods the way Tandem would
//! ([`Cluster::create_placed`]).
//!
//! Without a kube-controller-manager and kubelets, the apiserver is set up the way Kubernetes'
//! own scheduler integration tests set it up: admission plugins that wait for a controller are
//! off, and Nodes are plain objects whose status the tests write (see [`create_gpu_node`]).
//! Scheduled pods are bound (`spec.nodeName` set) and then stay `Pending` forever: nothing
//! runs them.
//!
//! This module knows nothing of the adapters: it is a cluster, and a guard for processes
//! ([`spawn_logged`]) the adapters' tests also use for the adapters themselves.

use std::fmt;
use std::fs::{self, File};
use std::io::{Read as _, Seek as _, SeekFrom};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::{Binding, Namespace, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use tandem_wire::{Placement, Signer, Verifier};
use tandem_xtask::kube::KubeBinaries;

use crate::tls::MutualTls;

/// The bearer token of the tests' user, a member of `system:masters` (the apiserver authorizes
/// everything anyway: `--authorization-mode=AlwaysAllow`).
pub const TOKEN: &str = "tandem-e2e-token";

/// The placeholder in a scheduler configuration that [`Cluster::start`] replaces with the path
/// of the kubeconfig it writes.
pub const KUBECONFIG_PLACEHOLDER: &str = "{{KUBECONFIG}}";

/// The placeholder in a scheduler configuration that [`Cluster::start`] replaces with the path
/// of the cluster's placement private key ([`Cluster::placement_key`]): the framework plugin's
/// `placementKeyFile`.
pub const PLACEMENT_KEY_PLACEHOLDER: &str = "{{PLACEMENT_KEY}}";

/// The scheduler name of the pods [`Cluster::create_placed`] makes: no scheduler serves it, so
/// the pod waits for the Binding the test posts.
pub const PLACED_SCHEDULER: &str = "tandem-e2e-placed";

/// A `KubeSchedulerConfiguration` for [`Cluster::start`]: the scheduler's client limits of
/// `deploy/helm/tandem/templates/extender-scheduler.yaml`, no leader election, and, with `extender_port`, the
/// Tandem extender on that port configured as the deploy files configure it, over plain HTTP.
pub fn scheduler_config(extender_port: Option<u16>) -> String {
    scheduler_config_with(extender_port.map(|port| Extender {
        port,
        tls: None,
        ignorable: true,
    }))
}

/// How [`scheduler_config_with`] has kube-scheduler reach the Tandem extender.
pub struct Extender<'a> {
    /// The adapter's port on loopback.
    pub port: u16,
    /// Mutual TLS with these files (`enableHTTPS` and `tlsConfig`, the chart's default); plain
    /// HTTP without.
    pub tls: Option<&'a MutualTls>,
    /// The extender's `ignorable`: whether the scheduler goes on without it when it fails.
    pub ignorable: bool,
}

/// [`scheduler_config`] with the extender reached as `extender` says.
pub fn scheduler_config_with(extender: Option<Extender<'_>>) -> String {
    let mut config = format!(
        "\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {KUBECONFIG_PLACEHOLDER}
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
"
    );
    if let Some(Extender {
        port,
        tls,
        ignorable,
    }) = extender
    {
        let scheme = if tls.is_some() { "https" } else { "http" };
        config.push_str(&format!(
            "\
extenders:
- urlPrefix: {scheme}://127.0.0.1:{port}/
  filterVerb: filter
  prioritizeVerb: prioritize
  bindVerb: bind
  weight: 10
  httpTimeout: 2s
  nodeCacheCapable: true
  ignorable: {ignorable}
  managedResources:
  - name: nvidia.com/gpu
    ignoredByScheduler: true
"
        ));
        if let Some(tls) = tls {
            config.push_str(&format!(
                "  enableHTTPS: true
  tlsConfig:
    caFile: {}
    certFile: {}
    keyFile: {}
",
                tls.file("ca.crt").display(),
                tls.file("scheduler.crt").display(),
                tls.file("scheduler.key").display(),
            ));
        }
    }
    config
}

/// The placement private key's file in the cluster's directory.
const PLACEMENT_KEY_FILE: &str = "placement.key";

/// The placement public key's file in the cluster's directory.
const PLACEMENT_PUBLIC_KEY_FILE: &str = "placement.pub";

/// How long each component may take to become healthy. The apiserver needs a few seconds on
/// an idle machine; tests run concurrently on two cores, so leave room.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a process may take to exit after SIGTERM before it gets SIGKILL.
const TERMINATION_GRACE: Duration = Duration::from_secs(5);

/// How many lines of each log a failure quotes.
const LOG_TAIL_LINES: usize = 40;

/// A component of the cluster; each logs to `<dir>/<name>.log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// `etcd`.
    Etcd,
    /// `kube-apiserver`.
    ApiServer,
    /// `kube-scheduler`.
    Scheduler,
}

impl Component {
    /// The component's name, which is also its log file's stem.
    pub fn name(self) -> &'static str {
        match self {
            Self::Etcd => "etcd",
            Self::ApiServer => "kube-apiserver",
            Self::Scheduler => "kube-scheduler",
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the apiserver authorizes requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Authorization {
    /// Everything authenticated is allowed: the tests need no roles.
    AlwaysAllow,
    /// Roles and bindings decide (the apiserver bootstraps the default ClusterRoles).
    Rbac,
}

impl Authorization {
    fn mode(self) -> &'static str {
        match self {
            Self::AlwaysAllow => "AlwaysAllow",
            Self::Rbac => "RBAC",
        }
    }
}

/// A running control plane. Dropping it stops its processes (scheduler, apiserver, etcd: the
/// reverse of the start order) and removes its directory, unless `TANDEM_E2E_KEEP` is set (then
/// the directory's path is printed, for reading the logs).
pub struct Cluster {
    /// Started processes, in start order.
    processes: Vec<(Component, ChildProcess)>,
    server_url: String,
    kubeconfig: PathBuf,
    /// The secure port of the scheduler last started.
    scheduler_port: Option<u16>,
    /// The cluster's placement key, whose private and public halves are written in `dir`.
    placement: Signer,
    /// Declared last: removed only after the processes that use it are gone.
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts etcd, kube-apiserver and kube-scheduler, each waited for until healthy.
    ///
    /// `scheduler_config` is a `KubeSchedulerConfiguration` YAML; every
    /// [`KUBECONFIG_PLACEHOLDER`] in it is replaced with the path of the cluster's kubeconfig
    /// (use it for `clientConnection.kubeconfig`, and set `leaderElection.leaderElect: false`).
    /// Errors name the component that failed and quote the tail of its log.
    pub async fn start(scheduler_config: &str) -> Result<Self> {
        let mut cluster = Self::start_control_plane().await?;
        cluster.start_scheduler(scheduler_config).await?;
        Ok(cluster)
    }

    /// Starts etcd and kube-apiserver only: objects can be created before a scheduler runs
    /// ([`Cluster::start_scheduler`]), as a throughput benchmark needs.
    pub async fn start_control_plane() -> Result<Self> {
        Self::start_control_plane_for_nodes(&[]).await
    }

    /// [`Cluster::start_control_plane`] for real kubelets named `nodes` (see
    /// [`crate::nodes`]): the apiserver runs in a mount namespace of its own whose
    /// `/etc/hosts` maps each node name to 127.0.0.1, and reaches kubelets by host name — so
    /// pod logs come through it as `kubectl logs` gets them, and nothing dials a non-loopback
    /// address. The host's `/etc/hosts` is untouched.
    pub async fn start_control_plane_for_nodes(nodes: &[&str]) -> Result<Self> {
        Self::start_control_plane_with(nodes, Authorization::AlwaysAllow).await
    }

    /// [`Cluster::start_control_plane`] with the apiserver authorizing by RBAC, as a real
    /// cluster does: the tests' own user is in `system:masters`, anyone else (a service
    /// account's token, say) gets what its roles grant.
    pub async fn start_control_plane_with_rbac() -> Result<Self> {
        Self::start_control_plane_with(&[], Authorization::Rbac).await
    }

    async fn start_control_plane_with(
        nodes: &[&str],
        authorization: Authorization,
    ) -> Result<Self> {
        let binaries = binaries().await?;
        let dir = tempfile::Builder::new()
            .prefix("tandem-e2e-")
            .tempdir()
            .context("could not create the cluster's temporary directory")?;
        let (placement, private) = Signer::generate()
            .map_err(|e| anyhow::anyhow!("cannot generate the placement key: {e}"))?;
        fs::write(dir.path().join(PLACEMENT_KEY_FILE), private)?;
        fs::write(
            dir.path().join(PLACEMENT_PUBLIC_KEY_FILE),
            placement.public_key_pem(),
        )?;
        let mut cluster = Self {
            processes: Vec::new(),
            server_url: String::new(),
            kubeconfig: dir.path().join("kubeconfig"),
            scheduler_port: None,
            placement,
            dir,
        };
        let etcd_url = cluster.start_etcd(&binaries).await?;
        cluster
            .start_apiserver(&binaries, &etcd_url, nodes, authorization)
            .await?;
        Ok(cluster)
    }

    /// Starts etcd and returns its client URL.
    async fn start_etcd(&mut self, binaries: &KubeBinaries) -> Result<String> {
        let [client_port, peer_port] = free_ports()?;
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = Command::new(&binaries.etcd);
        etcd.arg("--name=tandem-e2e")
            .arg(format!("--data-dir={}", self.dir().join("etcd").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=tandem-e2e={peer_url}"))
            // A test cluster's data is thrown away: fsync only slows every write down.
            .arg("--unsafe-no-fsync")
            .arg("--log-level=warn");
        self.spawn(Component::Etcd, etcd)?;
        let http = insecure_http_client()?;
        let health = format!("{client_url}/health");
        self.wait_until(Component::Etcd, || {
            let request = http.get(&health);
            async move {
                let response = request.send().await.ok()?;
                let body = response.text().await.ok()?;
                body.contains(r#""health":"true""#).then_some(())
            }
        })
        .await?;
        Ok(client_url)
    }

    async fn start_apiserver(
        &mut self,
        binaries: &KubeBinaries,
        etcd_url: &str,
        nodes: &[&str],
        authorization: Authorization,
    ) -> Result<()> {
        let dir = self.dir().to_path_buf();

        // The service-account token signer: an ECDSA P-256 key, as the apiserver's own test
        // server uses. The signing key may be PKCS#8 ("PRIVATE KEY"), but the verification
        // key file may not: it takes public keys, or private keys only as PKCS#1/SEC1
        // ("data does not contain any valid RSA or ECDSA public keys" for PKCS#8, client-go
        // keyutil.ParsePublicKeysPEM). So the public key goes into a file of its own.
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .context("could not generate the service-account key")?;
        let sa_key = dir.join("service-account.key");
        fs::write(&sa_key, key.serialize_pem())?;
        let sa_public_key = dir.join("service-account.pub");
        fs::write(&sa_public_key, key.public_key_pem())?;
        // token,user,uid,"group1,group2"
        let tokens = dir.join("tokens.csv");
        fs::write(
            &tokens,
            format!("{TOKEN},tandem-e2e,tandem-e2e-uid,\"system:masters\"\n"),
        )?;

        let port = free_port()?;
        let mut apiserver = Command::new(&binaries.apiserver);
        apiserver
            .arg(format!("--etcd-servers={etcd_url}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            // Without --tls-cert-file the apiserver writes a self-signed serving certificate
            // here; clients skip verification.
            .arg(format!("--cert-dir={}", dir.join("pki").display()))
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!(
                "--service-account-signing-key-file={}",
                sa_key.display()
            ))
            .arg(format!(
                "--service-account-key-file={}",
                sa_public_key.display()
            ))
            .arg("--service-cluster-ip-range=10.0.0.0/24")
            // AlwaysAllow turns anonymous requests off, hence the token.
            .arg(format!("--authorization-mode={}", authorization.mode()))
            .arg(format!("--token-auth-file={}", tokens.display()))
            // Each of these waits for a kube-controller-manager controller (the service-account
            // token controller; node lifecycle, which removes the not-ready taint; priority
            // classes; PV protection), as in Kubernetes' scheduler integration tests.
            .arg(
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition,Priority,\
                 StorageObjectInUseProtection",
            )
            // No Endpoints for the `kubernetes` service: nothing in the cluster calls it, and
            // the lease reconciler would write every few seconds.
            .arg("--endpoint-reconciler-type=none")
            // One client, a few requests: API priority and fairness only adds goroutines.
            .arg("--enable-priority-and-fairness=false");
        if !nodes.is_empty() {
            apiserver = self.with_node_hosts(apiserver, nodes)?;
        }
        self.spawn(Component::ApiServer, apiserver)?;

        self.server_url = format!("https://127.0.0.1:{port}");
        let http = insecure_http_client()?;
        let readyz = format!("{}/readyz", self.server_url);
        self.wait_until(Component::ApiServer, || {
            let request = http.get(&readyz).bearer_auth(TOKEN);
            async move {
                let response = request.send().await.ok()?;
                response.status().is_success().then_some(())
            }
        })
        .await?;

        fs::write(&self.kubeconfig, kubeconfig_yaml(&self.server_url))
            .with_context(|| format!("could not write {}", self.kubeconfig.display()))?;
        Ok(())
    }

    /// `apiserver` run in a private mount namespace where `/etc/hosts` maps `nodes` to
    /// 127.0.0.1, reaching kubelets by those names.
    fn with_node_hosts(&self, apiserver: Command, nodes: &[&str]) -> Result<Command> {
        let hosts = self.dir().join("hosts");
        let mut text = String::from("127.0.0.1 localhost\n");
        for node in nodes {
            text.push_str(&format!("127.0.0.1 {node}\n"));
        }
        fs::write(&hosts, text).with_context(|| format!("could not write {}", hosts.display()))?;
        let mut wrapped = Command::new("unshare");
        wrapped
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount --bind "$0" /etc/hosts && exec "$@""#)
            .arg(&hosts)
            .arg(apiserver.get_program())
            .args(apiserver.get_args())
            .arg("--kubelet-preferred-address-types=Hostname");
        Ok(wrapped)
    }

    /// Starts kube-scheduler with `scheduler_config` (see [`Cluster::start`]) and waits until
    /// it is ready (its informers synced).
    pub async fn start_scheduler(&mut self, config: &str) -> Result<()> {
        let binaries = binaries().await?;
        self.start_scheduler_binary(&binaries.scheduler, config)
            .await
    }

    /// [`Cluster::start_scheduler`] with another kube-scheduler binary (one with extra
    /// framework plugins, such as `tandem-kube-scheduler`).
    pub async fn start_scheduler_binary(&mut self, binary: &Path, config: &str) -> Result<()> {
        let config_path = self.dir().join("kube-scheduler.yaml");
        let kubeconfig = self.kubeconfig.display().to_string();
        let placement_key = self.placement_key().display().to_string();
        fs::write(
            &config_path,
            config
                .replace(KUBECONFIG_PLACEHOLDER, &kubeconfig)
                .replace(PLACEMENT_KEY_PLACEHOLDER, &placement_key),
        )?;
        let port = free_port()?;
        let mut scheduler = Command::new(binary);
        scheduler
            .arg(format!("--config={}", config_path.display()))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            // Its serving endpoint would authenticate and authorize by delegating to the
            // apiserver; without --authentication-kubeconfig/--authorization-kubeconfig it
            // only warns, and the health endpoints need neither when always allowed (nor
            // does the CPU profile the scheduler benchmark can take).
            .arg("--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*");
        self.spawn(Component::Scheduler, scheduler)?;
        self.scheduler_port = Some(port);

        // /readyz rather than /healthz: it also waits for the informers' caches to sync, so
        // a pod created right after start is seen.
        let http = insecure_http_client()?;
        let readyz = format!("https://127.0.0.1:{port}/readyz");
        self.wait_until(Component::Scheduler, || {
            let request = http.get(&readyz);
            async move {
                let response = request.send().await.ok()?;
                response.status().is_success().then_some(())
            }
        })
        .await
    }

    /// Starts `command` for `component`, logging to `<dir>/<component>.log`.
    fn spawn(&mut self, component: Component, command: Command) -> Result<()> {
        let log = self.log_path(component);
        let process =
            spawn_logged(command, &log).with_context(|| format!("could not start {component}"))?;
        self.processes.push((component, process));
        Ok(())
    }

    /// Polls `probe` every 25 ms until it answers `Some`, failing when `component` exits or
    /// [`STARTUP_TIMEOUT`] passes; the error quotes the tail of the component's log.
    async fn wait_until<F, Fut>(&mut self, component: Component, mut probe: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<()>>,
    {
        let started = Instant::now();
        loop {
            if probe().await.is_some() {
                return Ok(());
            }
            let process = self
                .process_mut(component)
                .with_context(|| format!("{component} was never started"))?;
            if let Some(status) = process.exit_status() {
                bail!(
                    "{component} exited ({status}) before it was healthy; its log ends with:\n{}",
                    self.log_tail(component, LOG_TAIL_LINES)
                );
            }
            if started.elapsed() > STARTUP_TIMEOUT {
                bail!(
                    "{component} was not healthy after {STARTUP_TIMEOUT:?}; its log ends with:\n{}",
                    self.log_tail(component, LOG_TAIL_LINES)
                );
            }
            // Often enough that the time to ready, which the scheduler benchmark reports, is
            // not rounded up by a tenth of a second.
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The process id of `component`, while it runs: for reading its memory from `/proc`.
    pub fn pid(&mut self, component: Component) -> Option<u32> {
        let process = self.process_mut(component)?;
        process.is_running().then(|| process.id())
    }

    /// The scheduler's metrics endpoint (HTTPS, self-signed), once one was started.
    pub fn scheduler_metrics_url(&self) -> Option<String> {
        self.scheduler_url("/metrics")
    }

    /// The scheduler's metrics as text, read with its self-signed certificate accepted.
    pub async fn scheduler_metrics(&self) -> Result<String> {
        let url = self
            .scheduler_metrics_url()
            .context("no scheduler was started")?;
        Ok(insecure_http_client()?
            .get(url)
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?)
    }

    /// `path` on the scheduler's secure port, if one was started.
    pub fn scheduler_url(&self, path: &str) -> Option<String> {
        self.scheduler_port
            .map(|port| format!("https://127.0.0.1:{port}{path}"))
    }

    /// Stops `component` (SIGTERM, then SIGKILL after the grace period), so that it can be
    /// started again.
    pub fn stop(&mut self, component: Component) {
        if let Some(at) = self.processes.iter().position(|(c, _)| *c == component) {
            let (_, mut process) = self.processes.remove(at);
            process.terminate(TERMINATION_GRACE);
        }
    }

    fn process_mut(&mut self, component: Component) -> Option<&mut ChildProcess> {
        self.processes
            .iter_mut()
            .find(|(started, _)| *started == component)
            .map(|(_, process)| process)
    }

    /// The kubeconfig the scheduler and the tests use (token auth, TLS verification off).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The apiserver's URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The apiserver's self-signed serving certificate and the CA that signed it (PEM, both in
    /// one file, as the apiserver writes them): what a pod's `ca.crt` would hold.
    pub fn serving_certificates(&self) -> PathBuf {
        self.dir().join("pki").join("apiserver.crt")
    }

    /// The bearer token the apiserver accepts ([`TOKEN`]).
    pub fn token(&self) -> &str {
        TOKEN
    }

    /// The cluster's placement private key (PEM, PKCS#8 Ed25519), what Tandem's schedulers sign
    /// placements with: the extender's and the Volcano adapter's `--placement-key`, the
    /// framework plugin's `placementKeyFile` ([`PLACEMENT_KEY_PLACEHOLDER`]).
    pub fn placement_key(&self) -> PathBuf {
        self.dir().join(PLACEMENT_KEY_FILE)
    }

    /// The public half of [`Cluster::placement_key`] (PEM `PUBLIC KEY`), what nodes verify
    /// placements with (`tandem-node --placement-keys`).
    pub fn placement_public_key(&self) -> PathBuf {
        self.dir().join(PLACEMENT_PUBLIC_KEY_FILE)
    }

    /// The arguments that give an adapter the cluster's placement key.
    pub fn placement_args(&self) -> [std::ffi::OsString; 2] {
        ["--placement-key".into(), self.placement_key().into()]
    }

    /// The cluster's placement key, to sign placements as Tandem's schedulers do.
    pub fn placement_signer(&self) -> &Signer {
        &self.placement
    }

    /// A verifier of the cluster's placement key, as a node holds it.
    pub fn placement_verifier(&self) -> Verifier {
        Verifier::from_pem(self.placement.public_key_pem().as_bytes())
            .expect("a signer's public key reads back")
    }

    /// The annotations of Tandem's placement of the pod with UID `uid` on `gpus`
    /// (`<node>/<index>`), with `reserved_mib` on a one-GPU placement, signed with the
    /// cluster's key.
    pub fn placement_annotations(
        &self,
        uid: &str,
        gpus: &[&str],
        reserved_mib: Option<u32>,
    ) -> Result<std::collections::BTreeMap<String, String>> {
        let gpus: Vec<String> = gpus.iter().map(|gpu| (*gpu).to_owned()).collect();
        let placement = Placement::decided(&gpus, reserved_mib)?;
        Ok(self.placement.signed(uid, placement).annotations())
    }

    /// Creates `pod`, a pod placed earlier as a test writes it (its node and Tandem's
    /// `tandem.dev/gpu`, and `tandem.dev/gpu-memory-mib` if any, set), as one of Tandem's
    /// schedulers would have placed it: created for no scheduler ([`PLACED_SCHEDULER`]) without
    /// them, then bound to its node with the placement signed with the cluster's key on its
    /// Binding, which the API server copies onto the pod — one write, as Tandem binds. Returns
    /// the bound pod.
    pub async fn create_placed(&self, pods: &Api<Pod>, pod: &Pod) -> Result<Pod> {
        let mut pod = pod.clone();
        let annotations = pod.metadata.annotations.get_or_insert_default();
        let gpus = annotations
            .remove(tandem_wire::GPU_ANNOTATION)
            .context("a placed pod names its GPUs (tandem.dev/gpu)")?;
        let reserved_mib = annotations
            .remove(tandem_wire::MEMORY_ANNOTATION)
            .map(|mib| mib.parse::<u32>())
            .transpose()
            .context("tandem.dev/gpu-memory-mib is not MiB")?;
        let gpus: Vec<&str> = gpus.split(',').map(str::trim).collect();
        let node = gpus
            .first()
            .and_then(|gpu| gpu.rsplit_once('/'))
            .map(|(node, _)| node.to_owned())
            .context("a placement names at least one GPU, as <node>/<index>")?;
        let spec = pod.spec.get_or_insert_default();
        spec.node_name = None;
        // No scheduler may take it before the Binding comes.
        spec.scheduler_name = Some(PLACED_SCHEDULER.to_owned());
        let created = pods.create(&PostParams::default(), &pod).await?;
        let name = created.metadata.name.clone().unwrap_or_default();
        let uid = created.metadata.uid.clone().unwrap_or_default();
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                uid: Some(uid.clone()),
                annotations: Some(self.placement_annotations(&uid, &gpus, reserved_mib)?),
                ..ObjectMeta::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node),
                ..ObjectReference::default()
            },
        };
        pods.create_subresource::<Binding, serde_json::Value>(
            "binding",
            &name,
            &PostParams::default(),
            &binding,
        )
        .await
        .with_context(|| format!("could not bind the placed pod {name}"))?;
        Ok(pods.get(&name).await?)
    }

    /// The cluster's temporary directory (logs, configuration, etcd's data).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Where `component` logs (stdout and stderr).
    pub fn log_path(&self, component: Component) -> PathBuf {
        self.dir().join(format!("{component}.log"))
    }

    /// Everything `component` has logged so far (empty if it was never started).
    pub fn logs(&self, component: Component) -> String {
        fs::read(self.log_path(component))
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// The last `lines` lines `component` logged.
    pub fn log_tail(&self, component: Component, lines: usize) -> String {
        tail(&self.log_path(component), lines)
    }

    /// The tail of every component's log, headed by its name: for failure messages.
    pub fn log_tails(&self) -> String {
        self.processes
            .iter()
            .map(|(component, _)| {
                format!(
                    "----- {component} ({}) -----\n{}",
                    self.log_path(*component).display(),
                    self.log_tail(*component, LOG_TAIL_LINES)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Whether `component` is still running.
    pub fn is_running(&mut self, component: Component) -> bool {
        self.process_mut(component)
            .is_some_and(ChildProcess::is_running)
    }

    /// A client of the apiserver, from the kubeconfig [`Cluster::kubeconfig_path`].
    pub async fn client(&self) -> Result<Client> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)
            .with_context(|| format!("could not read {}", self.kubeconfig.display()))?;
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .context("the kubeconfig the cluster wrote does not load")?;
        // The serving certificate is self-signed (the kubeconfig says so too).
        config.accept_invalid_certs = true;
        install_crypto_provider();
        Client::try_from(config).context("could not build a Kubernetes client")
    }
}

/// The Kubernetes binaries; the first call may build them (minutes), so not on the runtime's
/// threads.
async fn binaries() -> Result<KubeBinaries> {
    tokio::task::spawn_blocking(KubeBinaries::from_env)
        .await
        .context("the task building the Kubernetes binaries panicked")?
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Scheduler, then apiserver, then etcd: each stops while what it talks to is still up,
        // so the logs end with its shutdown, not with connection errors.
        while let Some((_, mut process)) = self.processes.pop() {
            process.terminate(TERMINATION_GRACE);
        }
        if std::env::var_os("TANDEM_E2E_KEEP").is_some() {
            self.dir.disable_cleanup(true);
            eprintln!("TANDEM_E2E_KEEP: kept {}", self.dir().display());
        }
    }
}

/// The kubeconfig of the tests' user for the apiserver at `server`.
fn kubeconfig_yaml(server: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: tandem-e2e
  cluster:
    server: {server}
    insecure-skip-tls-verify: true
users:
- name: tandem-e2e
  user:
    token: {TOKEN}
contexts:
- name: tandem-e2e
  context:
    cluster: tandem-e2e
    user: tandem-e2e
current-context: tandem-e2e
"
    )
}

/// Installs rustls' ring provider as the process default, once. The workspace builds rustls
/// with no provider chosen (reqwest's `rustls-no-provider`, kube without `ring`/`aws-lc-rs`),
/// so every process installs one before its first TLS client: this one is the tests'.
pub fn install_crypto_provider() {
    // An error means one is installed already: fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// An HTTP client for the cluster's endpoints: self-signed certificates accepted, short
/// timeouts (a starting server may accept a connection and answer late).
pub fn insecure_http_client() -> Result<reqwest::Client> {
    install_crypto_provider();
    reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .context("could not build an HTTP client")
}

/// A loopback port nobody listens on right now, below the kernel's ephemeral range.
///
/// The kernel takes ports from its ephemeral range by itself, for every bind to port 0 and for
/// the source port of every outgoing connection: a port found there and released can be taken
/// by any process's next connection before our component binds it, and the component then
/// fails with "Address already in use". Below that range only an explicit bind takes a port, so
/// only another test could; each process starts its walk at an offset drawn from its pid, and
/// moves on after each port it hands out.
pub fn free_port() -> Result<u16> {
    let [port] = free_ports()?;
    Ok(port)
}

/// `N` distinct free loopback ports, as [`free_port`].
pub fn free_ports<const N: usize>() -> Result<[u16; N]> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = quiet_port_range()?;
    let span = u32::from(high - low);
    let start = std::process::id().wrapping_mul(7_919) % span;
    let mut ports = [0; N];
    for port in &mut ports {
        *port = (0..span)
            .map(|_| {
                let offset = (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
                low + u16::try_from(offset).expect("the offset is below a u16 span")
            })
            .find(|&port| TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok())
            .with_context(|| format!("no free loopback port in {low}..{high}"))?;
    }
    Ok(ports)
}

/// The ports [`free_ports`] picks from: from 10,000 up to the start of the kernel's ephemeral
/// range (`net.ipv4.ip_local_port_range`), or to 32,768, Linux's default start, if that cannot
/// be read.
fn quiet_port_range() -> Result<(u16, u16)> {
    const LOW: u16 = 10_000;
    let ephemeral_start = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    ensure!(
        ephemeral_start > LOW + 1_000,
        "the kernel's ephemeral ports start at {ephemeral_start}, leaving too few below them \
         for the tests' servers (they pick from {LOW} up): raise net.ipv4.ip_local_port_range"
    );
    Ok((LOW, ephemeral_start))
}

/// The last `lines` lines of the file at `path` (at most its last 64 KiB are read).
pub fn tail(path: &Path, lines: usize) -> String {
    const WINDOW: u64 = 64 * 1024;
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let length = file.metadata()?.len();
        file.seek(SeekFrom::Start(length.saturating_sub(WINDOW)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(error) => format!("(could not read {}: {error})", path.display()),
    }
}

/// A child process in a process group of its own, logging to a file; dropping it stops the
/// whole group (SIGTERM, a grace period, SIGKILL) and reaps it, so a failing test leaves no
/// process behind.
#[derive(Debug)]
pub struct ChildProcess {
    child: Child,
    /// What was run, for messages.
    program: String,
    log: PathBuf,
    /// Set once the child is reaped: its pid (and group id) may be reused from then on, so no
    /// signal is sent after that.
    status: Option<ExitStatus>,
}

/// Starts `command` in a new process group with stdin from `/dev/null` and stdout and stderr
/// appended to `log` (created if missing).
pub fn spawn_logged(mut command: Command, log: &Path) -> Result<ChildProcess> {
    let file = File::options()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("could not open {}", log.display()))?;
    let stderr = file.try_clone()?;
    let program = command.get_program().to_string_lossy().into_owned();
    // Its own group: the group can be signalled as a whole (the process and anything it
    // starts), and a Ctrl-C on the terminal of `cargo test` does not reach it directly.
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(stderr);
    let child = command
        .spawn()
        .with_context(|| format!("could not start {program}"))?;
    Ok(ChildProcess {
        child,
        program,
        log: log.to_path_buf(),
        status: None,
    })
}

impl ChildProcess {
    /// The process id, which is also its process group id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The file it logs to.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// Whether it is still running (an exited child is reaped here).
    pub fn is_running(&mut self) -> bool {
        self.exit_status().is_none()
    }

    /// Its exit status, if it has exited.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            // An error here (ECHILD) cannot happen for our own unreaped child; treat it as
            // still running.
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// SIGKILLs the whole group at once and reaps the process: a crash, as far as anyone
    /// talking to it can tell.
    pub fn kill_now(&mut self) {
        if self.exit_status().is_none() {
            self.signal_group("KILL");
        }
        self.reap();
    }

    /// SIGTERMs the group, waits up to `grace` for the process to exit, then SIGKILLs the
    /// group; reaps the process either way.
    pub fn terminate(&mut self, grace: Duration) {
        if self.exit_status().is_some() {
            return;
        }
        self.signal_group("TERM");
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exit_status().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "{} (pid {}) ignored SIGTERM for {grace:?}: SIGKILL",
            self.program,
            self.id()
        );
        self.kill_now();
    }

    /// `kill -<signal> -- -<pgid>`. The `kill` program, because this workspace forbids
    /// `unsafe` (libc's `kill`) and needs no signal crate for two signals. Falls back to
    /// SIGKILL of the process alone if `kill` cannot be run.
    fn signal_group(&mut self, signal: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg("--")
            .arg(format!("-{}", self.id()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !sent {
            let _ = self.child.kill();
        }
    }

    fn reap(&mut self) {
        if self.status.is_none() {
            self.status = self.child.wait().ok();
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.terminate(TERMINATION_GRACE);
    }
}

/// Makes sure namespace `name` exists (creating it if not).
pub async fn ensure_namespace(client: &Client, name: &str) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => Ok(()),
        // Created meanwhile by someone else: just as good.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error).with_context(|| format!("could not create namespace {name}")),
    }
}

/// Creates a schedulable GPU node as a GPU operator's feature discovery would describe it: 64
/// CPUs, 256 GiB, 110 pods, `gpu_count` `nvidia.com/gpu`, labels `nvidia.com/gpu.product` and
/// `nvidia.com/gpu.memory` (MiB), and a `Ready` condition.
///
/// Without a kubelet, the test writes the status, in the create request: the apiserver keeps
/// the status a Node is created with (unlike most kinds, whose create drops it; scheduler_perf
/// and kwok rely on this too). The returned node is checked to show the GPUs as allocatable,
/// so a future apiserver that drops it fails here, not as a pod that never schedules.
pub async fn create_gpu_node(
    client: &Client,
    name: &str,
    gpu_count: u32,
    product_label: &str,
    memory_mib: u32,
) -> Result<Node> {
    let resources = json!({
        "cpu": "64",
        "memory": "256Gi",
        "pods": "110",
        "nvidia.com/gpu": gpu_count.to_string(),
    });
    let status = json!({
        "capacity": resources,
        "allocatable": resources,
        "conditions": [{
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "tandem-e2e: no kubelet, the test says so",
        }],
    });
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": product_label,
                "nvidia.com/gpu.memory": memory_mib.to_string(),
            },
        },
        "status": status,
    }))?;
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .create(&PostParams::default(), &node)
        .await
        .with_context(|| format!("could not create node {name}"))?;
    let allocatable = node
        .status
        .as_ref()
        .and_then(|status| status.allocatable.as_ref());
    ensure!(
        allocatable.and_then(|resources| resources.get("nvidia.com/gpu"))
            == Some(&Quantity(gpu_count.to_string())),
        "node {name} does not show its GPUs as allocatable: {allocatable:?}"
    );
    Ok(node)
}

/// Waits until pod `ns/pod` is bound to a node, and returns the node's name; `None` if
/// `timeout` passes first (or the pod does not exist). Polls every 100 ms.
pub async fn wait_for_binding(
    client: &Client,
    ns: &str,
    pod: &str,
    timeout: Duration,
) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(found)) = pods.get_opt(pod).await
            && let Some(node) = found.spec.and_then(|spec| spec.node_name)
        {
            return Some(node);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
