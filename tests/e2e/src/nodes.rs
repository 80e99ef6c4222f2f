//! Real Kubernetes nodes on this machine, beside a [`Cluster`]: per node a containerd (with NRI
//! and runc), a kubelet, and fake GPUs — pods really run.
//!
//! The pieces come from `cargo xtask node-bins` ([`tandem_xtask::tasks::node_bins`]: the
//! kubelet of the Kubernetes module the control plane is built from, containerd v2.4.2 built
//! from its module, runc, the CNI plugins and busybox from Debian, and two OCI archives written
//! from busybox — the test image [`TEST_IMAGE`] and the sandbox image). Nothing is pulled: the
//! archives are imported into each containerd, pods use `imagePullPolicy: Never`.
//!
//! Each node has its own directory (containerd's root and state, runc's root, the network
//! namespaces, the kubelet's root, pod logs, the CNI configuration and IPAM state), its own
//! sockets and ports on loopback, its own cgroup root (`/<node>` in every cgroup v1 hierarchy)
//! and its own bridge. A node's GPUs are fake: [`GPUS_PER_NODE`] of them, with UUIDs from
//! [`fake_uuid`], advertised by patching the Node's status (`nvidia.com/gpu`: GPUs × shares, as
//! NVIDIA's device plugin does with time-slicing replicas) and labelled as GPU feature discovery
//! would (`nvidia.com/gpu.count` counts devices). Tandem's node component is told about them
//! through a GPU file ([`Node::gpu_file`]); the device nodes it gives containers
//! (`/dev/nvidia<minor>`, char 195) are created by runc inside the container, whatever the
//! host has.
//!
//! The kube-apiserver must reach the kubelets for pod logs: start the control plane with
//! [`Cluster::start_control_plane_for_nodes`], which runs it in a mount namespace of its own
//! where the node names resolve to 127.0.0.1.
//!
//! The kubelet changes the host: sysctls, fixed directories (`/var/lib/kubelet`,
//! `/var/log/containers`, `/var/log/pods`). [`Nodes`] records them before it starts and puts
//! them back when dropped, after stopping every pod, kubelet, containerd and shim and removing
//! mounts, cgroups and bridges. One set of nodes runs at a time on a machine (a file lock).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::{Event, Node as KubeNode, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, LogParams, Patch, PatchParams};
use serde_json::json;

use crate::cluster::{ChildProcess, Cluster, free_ports, spawn_logged};

pub use tandem_xtask::node::{PAUSE_IMAGE, TEST_IMAGE};

/// GPUs per fake node.
pub const GPUS_PER_NODE: u32 = 4;

/// The extended resource the fake GPUs are advertised as.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// How long a node may take to register and become Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// How long processes get to exit after SIGTERM.
const GRACE: Duration = Duration::from_secs(10);

/// The sysctls the kubelet sets; restored when the nodes stop.
const SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
];

/// Fixed paths the kubelet creates whatever its root directory; removed when the nodes stop
/// if they were not there before (only what was added, for the directories of logs).
const FIXED_DIRS: &[&str] = &["/var/lib/kubelet", "/var/log/containers", "/var/log/pods"];

/// What one node looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// The Node's name (also its host name for the apiserver).
    pub name: String,
    /// The GPU product label (`nvidia.com/gpu.product`), e.g. `Tesla-V100-SXM2-16GB`.
    pub product: String,
    /// Each GPU's memory, in MiB (`nvidia.com/gpu.memory`).
    pub memory_mib: u32,
    /// Units of `nvidia.com/gpu` per GPU (time-slicing `replicas`): how many pods the kubelet
    /// admits per GPU.
    pub shares_per_gpu: u32,
}

impl NodeSpec {
    /// A node of four 16 GiB V100s shared four ways.
    pub fn v100(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            product: "Tesla-V100-SXM2-16GB".to_owned(),
            memory_mib: 16_384,
            shares_per_gpu: 4,
        }
    }
}

/// The UUID of fake GPU `index` of the `ordinal`-th node: shaped like NVML's.
pub fn fake_uuid(ordinal: usize, index: u32) -> String {
    format!("GPU-7a4d{ordinal:04x}-0000-4000-8000-{index:012x}")
}

/// The minor number of fake GPU `index` (reversed, so a test can tell a minor from an index).
pub fn fake_minor(index: u32) -> u32 {
    GPUS_PER_NODE - 1 - index
}

/// The binaries and images of a node, from `cargo xtask node-bins`.
#[derive(Debug, Clone)]
pub struct NodeBinaries {
    /// The kubelet.
    pub kubelet: PathBuf,
    /// containerd, containerd-shim-runc-v2 and ctr.
    pub containerd_dir: PathBuf,
    /// OCI archives to import into every node.
    pub images: Vec<PathBuf>,
}

impl NodeBinaries {
    /// Builds (or finds) them; minutes the first time, so not on the runtime's threads.
    pub async fn ensure() -> Result<Self> {
        let bins = tokio::task::spawn_blocking(tandem_xtask::tasks::node_bins)
            .await
            .context("the task building the node binaries panicked")??;
        Ok(Self {
            kubelet: bins.kubelet,
            containerd_dir: bins.containerd_dir,
            images: bins.images.iter().map(|image| image.path.clone()).collect(),
        })
    }
}

/// One running node.
pub struct Node {
    spec: NodeSpec,
    ordinal: usize,
    dir: PathBuf,
    socket: PathBuf,
    containerd: Option<ChildProcess>,
    kubelet: Option<ChildProcess>,
    component: Option<ChildProcess>,
    component_log: u32,
}

impl Node {
    /// Its spec.
    pub fn spec(&self) -> &NodeSpec {
        &self.spec
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The UUID of its GPU `index`.
    pub fn uuid(&self, index: u32) -> String {
        fake_uuid(self.ordinal, index)
    }

    /// The runtime's NRI socket, which Tandem's node component connects to.
    pub fn nri_socket(&self) -> PathBuf {
        self.dir.join("nri.sock")
    }

    /// The GPU file Tandem's node component reads (`--gpus`), in NVML's terms.
    pub fn gpu_file(&self) -> PathBuf {
        self.dir.join("gpus.json")
    }

    /// The cgroup root of its pods (in every cgroup v1 hierarchy).
    fn cgroup_root(&self) -> String {
        self.spec.name.clone()
    }

    fn bridge(&self) -> String {
        format!("tandem{}", self.ordinal)
    }

    /// Starts Tandem's node component (`binary`, with `args` after the node's own: its name,
    /// NRI socket, GPU file, `cluster`'s kubeconfig and the public key of its placements,
    /// `--placement-keys`, as the chart mounts it) and waits until it has registered with the
    /// runtime (`/readyz` on `listen_port`).
    pub async fn start_component(
        &mut self,
        binary: &Path,
        cluster: &Cluster,
        listen_port: u16,
        args: &[&str],
    ) -> Result<()> {
        self.stop_component();
        self.component_log += 1;
        let log = self
            .dir
            .join(format!("tandem-node-{}.log", self.component_log));
        let mut command = Command::new(binary);
        command
            .args(["--node", &self.spec.name])
            .arg("--nri-socket")
            .arg(self.nri_socket())
            .arg("--gpus")
            .arg(self.gpu_file())
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig_path())
            .arg("--placement-keys")
            .arg(cluster.placement_public_key())
            .args(["--listen", &format!("127.0.0.1:{listen_port}")])
            .args(args)
            .env("RUST_LOG", "tandem_node=debug,info");
        let mut process = spawn_logged(command, &log)?;
        let http = crate::cluster::insecure_http_client()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            ensure!(
                process.is_running(),
                "tandem-node on {} exited:\n{}",
                self.spec.name,
                process.log_tail(40)
            );
            if let Ok(response) = http
                .get(format!("http://127.0.0.1:{listen_port}/readyz"))
                .send()
                .await
                && response.status().is_success()
            {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "tandem-node on {} did not register with containerd:\n{}",
                self.spec.name,
                process.log_tail(40)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.component = Some(process);
        Ok(())
    }

    /// Stops Tandem's node component, if it runs (SIGTERM).
    pub fn stop_component(&mut self) {
        if let Some(mut process) = self.component.take() {
            process.terminate(GRACE);
        }
    }

    /// Kills Tandem's node component at once (SIGKILL), as a crash would.
    pub fn kill_component(&mut self) {
        if let Some(mut process) = self.component.take() {
            process.kill_now();
        }
    }

    /// The node component's log so far (all its runs).
    pub fn component_logs(&self) -> String {
        (1..=self.component_log)
            .map(|run| {
                fs::read_to_string(self.dir.join(format!("tandem-node-{run}.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn log_tails(&mut self) -> String {
        let mut out = String::new();
        for (what, process) in [
            ("containerd", &mut self.containerd),
            ("kubelet", &mut self.kubelet),
            ("tandem-node", &mut self.component),
        ] {
            if let Some(process) = process {
                out.push_str(&format!(
                    "----- {what} on {} ({}) -----\n{}\n",
                    self.spec.name,
                    process.log_path().display(),
                    process.log_tail(30)
                ));
            }
        }
        out
    }
}

/// Nodes started together; dropping them stops everything and restores the host.
pub struct Nodes {
    nodes: Vec<Node>,
    host: HostState,
    binaries: NodeBinaries,
    /// Held while the nodes run: one set of nodes per machine.
    _lock: File,
    /// Declared last: removed only after everything using it stopped.
    dir: tempfile::TempDir,
}

impl Nodes {
    /// Starts a node per spec against `cluster` (started with
    /// [`Cluster::start_control_plane_for_nodes`] naming the same nodes) and waits until every
    /// one is Ready and shows its GPUs.
    pub async fn start(cluster: &Cluster, specs: &[NodeSpec]) -> Result<Self> {
        let binaries = NodeBinaries::ensure().await?;
        let lock_path = std::env::temp_dir().join("tandem-e2e-nodes.lock");
        let lock = File::create(&lock_path)
            .with_context(|| format!("cannot create {}", lock_path.display()))?;
        lock.lock()
            .with_context(|| format!("cannot lock {}", lock_path.display()))?;
        let dir = tempfile::Builder::new()
            .prefix("tandem-nodes-")
            .tempdir()
            .context("cannot create the nodes' directory")?;
        let mut nodes = Self {
            nodes: Vec::new(),
            host: HostState::capture()?,
            binaries,
            _lock: lock,
            dir,
        };
        for (ordinal, spec) in specs.iter().enumerate() {
            let node = nodes
                .start_node(cluster, ordinal, spec.clone())
                .await
                .with_context(|| format!("could not start node {}", spec.name))?;
            nodes.nodes.push(node);
        }
        let client = cluster.client().await?;
        for at in 0..nodes.nodes.len() {
            let result = nodes.advertise_gpus(&client, at).await;
            if let Err(error) = result {
                bail!("{error:#}\n{}", nodes.log_tails());
            }
        }
        Ok(nodes)
    }

    /// The node called `name`.
    pub fn node(&mut self, name: &str) -> Result<&mut Node> {
        self.nodes
            .iter_mut()
            .find(|node| node.spec.name == name)
            .with_context(|| format!("no node {name}"))
    }

    /// Every node.
    pub fn all(&mut self) -> &mut [Node] {
        &mut self.nodes
    }

    /// The tail of every process's log on every node.
    pub fn log_tails(&mut self) -> String {
        self.nodes
            .iter_mut()
            .map(Node::log_tails)
            .collect::<Vec<_>>()
            .join("\n")
    }

    async fn start_node(
        &mut self,
        cluster: &Cluster,
        ordinal: usize,
        spec: NodeSpec,
    ) -> Result<Node> {
        let dir = self.dir.path().join(&spec.name);
        fs::create_dir_all(&dir)?;
        let mut node = Node {
            spec,
            ordinal,
            socket: dir.join("containerd.sock"),
            dir,
            containerd: None,
            kubelet: None,
            component: None,
            component_log: 0,
        };
        create_cgroup_root(&node.cgroup_root())?;
        write_gpu_file(&node)?;
        self.start_containerd(&mut node).await?;
        self.start_kubelet(cluster, &mut node)?;
        Ok(node)
    }

    async fn start_containerd(&self, node: &mut Node) -> Result<()> {
        let dir = &node.dir;
        for sub in [
            "root",
            "state",
            "runc",
            "cni",
            "cni-ipam",
            "nri-plugins",
            "nri-conf",
        ] {
            fs::create_dir_all(dir.join(sub))?;
        }
        let subnet = format!("10.88.{}.0/24", node.ordinal + 1);
        fs::write(
            dir.join("cni/10-tandem.conflist"),
            serde_json::to_string_pretty(&json!({
                "cniVersion": "1.0.0",
                "name": format!("tandem-{}", node.spec.name),
                "plugins": [{
                    "type": "bridge",
                    "bridge": node.bridge(),
                    "isGateway": false,
                    "ipMasq": false,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": subnet}]],
                        "dataDir": dir.join("cni-ipam"),
                    },
                }],
            }))?,
        )?;
        let config = containerd_config(dir, &node.socket);
        let config_path = dir.join("containerd.toml");
        fs::write(&config_path, config)?;
        let mut command = Command::new(self.binaries.containerd_dir.join("containerd"));
        let path = format!(
            "{}:{}",
            self.binaries.containerd_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .arg("--config")
            .arg(&config_path)
            // The shim is found on PATH.
            .env("PATH", path);
        let mut process = spawn_logged(command, &dir.join("containerd.log"))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self
            .ctr(node, &["version"])
            .is_ok_and(|out| out.contains("Server:"))
        {
            ensure!(
                process.is_running(),
                "containerd exited:\n{}",
                process.log_tail(40)
            );
            ensure!(
                Instant::now() < deadline,
                "containerd did not answer:\n{}",
                process.log_tail(40)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        node.containerd = Some(process);
        for image in &self.binaries.images {
            let image = image.display().to_string();
            self.ctr(node, &["-n", "k8s.io", "images", "import", &image])
                .with_context(|| format!("could not import {image}"))?;
        }
        Ok(())
    }

    /// `ctr` against `node`'s containerd; its standard output.
    fn ctr(&self, node: &Node, args: &[&str]) -> Result<String> {
        let output = Command::new(self.binaries.containerd_dir.join("ctr"))
            .arg("--address")
            .arg(&node.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("cannot run ctr")?;
        ensure!(
            output.status.success(),
            "ctr {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    fn start_kubelet(&self, cluster: &Cluster, node: &mut Node) -> Result<()> {
        let dir = &node.dir;
        let [port, healthz] = free_ports()?;
        let config = format!(
            "\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: {port}
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
readOnlyPort: 0
cgroupDriver: cgroupfs
cgroupRoot: /{cgroup}
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://{socket}
imageServiceEndpoint: unix://{socket}
podLogsDir: {logs}
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: \"0%\"
  nodefs.available: \"0%\"
  nodefs.inodesFree: \"0%\"
  imagefs.available: \"0%\"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
enforceNodeAllocatable: []
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
resolvConf: \"\"
serializeImagePulls: false
",
            cgroup = node.cgroup_root(),
            socket = node.socket.display(),
            logs = dir.join("pod-logs").display(),
        );
        let config_path = dir.join("kubelet.yaml");
        fs::write(&config_path, config)?;
        let labels = [
            format!("nvidia.com/gpu.product={}", node.spec.product),
            format!("nvidia.com/gpu.memory={}", node.spec.memory_mib),
            format!("nvidia.com/gpu.count={GPUS_PER_NODE}"),
            "nvidia.com/gpu.present=true".to_owned(),
        ];
        let mut command = Command::new(&self.binaries.kubelet);
        command
            .arg(format!("--config={}", config_path.display()))
            .arg(format!(
                "--kubeconfig={}",
                cluster.kubeconfig_path().display()
            ))
            .arg(format!("--root-dir={}", dir.join("kubelet").display()))
            .arg(format!("--cert-dir={}", dir.join("kubelet-pki").display()))
            .arg(format!("--hostname-override={}", node.spec.name))
            .arg(format!("--node-labels={}", labels.join(",")))
            .arg("--v=2");
        node.kubelet = Some(spawn_logged(command, &dir.join("kubelet.log"))?);
        Ok(())
    }

    /// Waits for node `at` to register, advertises its GPUs and waits until it is Ready with
    /// them allocatable.
    async fn advertise_gpus(&mut self, client: &Client, at: usize) -> Result<()> {
        let name = self.nodes[at].spec.name.clone();
        let shares = GPUS_PER_NODE * self.nodes[at].spec.shares_per_gpu;
        let nodes: Api<KubeNode> = Api::all(client.clone());
        let deadline = Instant::now() + READY_TIMEOUT;
        // A Node object exists only once the kubelet registered: poll.
        loop {
            if nodes.get_opt(&name).await?.is_some() {
                break;
            }
            if let Some(kubelet) = &mut self.nodes[at].kubelet {
                ensure!(
                    kubelet.is_running(),
                    "the kubelet of {name} exited:\n{}",
                    kubelet.log_tail(40)
                );
            }
            ensure!(Instant::now() < deadline, "node {name} never registered");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let patch = json!({"status": {"capacity": {GPU_RESOURCE: shares.to_string()}}});
        nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("could not advertise the GPUs of {name}"))?;
        loop {
            let node = nodes.get(&name).await?;
            let status = node.status.unwrap_or_default();
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            let gpus = status
                .allocatable
                .as_ref()
                .and_then(|a| a.get(GPU_RESOURCE))
                .map(|q| q.0.clone());
            if ready && gpus.as_deref() == Some(shares.to_string().as_str()) {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "node {name} is not Ready with {shares} {GPU_RESOURCE} (ready: {ready}, \
                 allocatable: {gpus:?})"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Removes every pod of `namespace` at once (no grace period) and waits until the
    /// kubelets have stopped their containers and the pods are gone.
    pub async fn delete_pods(client: &Client, namespace: &str) -> Result<()> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        pods.delete_collection(
            &DeleteParams::default().grace_period(0),
            &ListParams::default(),
        )
        .await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !pods.list(&ListParams::default()).await?.items.is_empty() {
            ensure!(
                Instant::now() < deadline,
                "pods of {namespace} were not removed"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(())
    }

    fn teardown(&mut self) {
        for node in &mut self.nodes {
            node.stop_component();
            if let Some(mut kubelet) = node.kubelet.take() {
                kubelet.terminate(GRACE);
            }
            // Containers outlive the kubelet and containerd: stop them through runc, then
            // the shims, then containerd.
            let runc_root = node.dir.join("runc").join("k8s.io");
            kill_containers(&runc_root);
            kill_matching(&node.socket.display().to_string());
            if let Some(mut containerd) = node.containerd.take() {
                containerd.terminate(GRACE);
            }
            kill_matching(&node.socket.display().to_string());
            unmount_under(&node.dir);
            let _ = Command::new("ip")
                .args(["link", "delete", &node.bridge()])
                .stderr(Stdio::null())
                .status();
            remove_cgroup_root(&node.cgroup_root());
        }
        unmount_under(self.dir.path());
        self.host.restore();
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        self.teardown();
        if std::env::var_os("TANDEM_E2E_KEEP").is_some() {
            self.dir.disable_cleanup(true);
            eprintln!("TANDEM_E2E_KEEP: kept {}", self.dir.path().display());
        }
    }
}

/// The command of a test pod's container: prints what it sees of the GPUs — `visible=` the
/// value of `NVIDIA_VISIBLE_DEVICES`, `device=` each NVIDIA GPU device node, `env=` each
/// `CUDA_*` variable — then `seen` alone on a line, then sleeps `seconds` and exits 0.
pub fn gpu_command(seconds: u32) -> Vec<String> {
    let script = format!(
        "echo \"visible=$NVIDIA_VISIBLE_DEVICES\"; \
         for d in $(ls /dev | grep '^nvidia[0-9]'); do echo \"device=/dev/$d\"; done; \
         env | grep '^CUDA_' | while read -r line; do echo \"env=$line\"; done; \
         echo seen; sleep {seconds}"
    );
    vec!["/bin/sh".into(), "-c".into(), script]
}

/// A pod (JSON) asking for `gpus` of [`GPU_RESOURCE`] whose container runs [`gpu_command`]
/// from [`TEST_IMAGE`]; the caller adds labels, annotations, a node or a scheduler.
pub fn gpu_pod(name: &str, gpus: u32, seconds: u32) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main",
                "image": TEST_IMAGE,
                "imagePullPolicy": "Never",
                "command": gpu_command(seconds),
                "resources": {"limits": {GPU_RESOURCE: gpus.to_string()}},
            }],
        },
    })
}

/// What a test pod's container printed about its GPUs ([`gpu_command`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// `NVIDIA_VISIBLE_DEVICES` (empty when unset).
    pub visible: String,
    /// NVIDIA GPU device nodes in the container.
    pub devices: Vec<String>,
    /// `CUDA_*` variables, `NAME=value`.
    pub env: Vec<String>,
}

impl Seen {
    /// Parses a test pod's log.
    pub fn parse(log: &str) -> Self {
        let mut seen = Self::default();
        for line in log.lines() {
            if let Some(value) = line.strip_prefix("visible=") {
                seen.visible = value.to_owned();
            } else if let Some(device) = line.strip_prefix("device=") {
                seen.devices.push(device.to_owned());
            } else if let Some(variable) = line.strip_prefix("env=") {
                seen.env.push(variable.to_owned());
            }
        }
        seen
    }
}

/// What test pod `namespace/name` saw, once it has printed it (waiting up to `timeout` for
/// the pod to run and print).
pub async fn seen(client: &Client, namespace: &str, name: &str, timeout: Duration) -> Result<Seen> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    loop {
        let pod = pods.get_opt(name).await?;
        let phase = pod
            .as_ref()
            .and_then(|pod| pod.status.as_ref())
            .and_then(|status| status.phase.clone());
        if matches!(phase.as_deref(), Some("Running" | "Succeeded" | "Failed"))
            && let Ok(log) = logs(client, namespace, name).await
            && log.lines().any(|line| line == "seen")
        {
            return Ok(Seen::parse(&log));
        }
        if Instant::now() >= deadline {
            let status = pod
                .and_then(|pod| pod.status)
                .map(|status| serde_json::to_string(&status).unwrap_or_default());
            bail!(
                "pod {namespace}/{name} did not print what it sees within {timeout:?}: {status:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

impl Nodes {
    /// Checks that `seen` is exactly GPU `index` of `node`: its UUID and its device node.
    pub fn expect_gpu(&mut self, pod: &str, seen: &Seen, node: &str, index: u32) -> Result<()> {
        let uuid = self.node(node)?.uuid(index);
        let device = format!("/dev/nvidia{}", fake_minor(index));
        ensure!(
            seen.visible == uuid && seen.devices == [device.clone()],
            "{pod} should see {node}/{index} ({uuid}, {device}) and saw {seen:?}"
        );
        Ok(())
    }
}

/// Waits until pod `namespace/name` is bound with Tandem's GPU annotation; returns the node,
/// the GPU index and the pod's annotations. Errors if the node it is bound to is not the one
/// the annotation names.
pub async fn placement(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<(String, u32, BTreeMap<String, String>)> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    loop {
        let pod = pods.get(name).await?;
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let bound = pod.spec.and_then(|spec| spec.node_name);
        if let (Some(gpu), Some(bound)) = (annotations.get("tandem.dev/gpu"), &bound) {
            let (node, index) = gpu
                .rsplit_once('/')
                .with_context(|| format!("{name}'s annotation {gpu} has no index"))?;
            ensure!(
                bound == node,
                "{name} is annotated {gpu} but bound to {bound}"
            );
            return Ok((node.to_owned(), index.parse()?, annotations));
        }
        ensure!(
            Instant::now() < deadline,
            "{name} was not placed by Tandem within {timeout:?} (node {bound:?}, annotations \
             {annotations:?})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The first container of pod `namespace/name`: its id and restart count.
pub async fn container_of(client: &Client, namespace: &str, name: &str) -> Result<(String, i32)> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let status = pods
        .get(name)
        .await?
        .status
        .and_then(|status| status.container_statuses)
        .and_then(|statuses| statuses.into_iter().next())
        .with_context(|| format!("{name} has no container status"))?;
    Ok((
        status.container_id.unwrap_or_default(),
        status.restart_count,
    ))
}

/// Waits until pod `namespace/name` has an event whose message contains `needle`; returns it.
pub async fn event_with(
    client: &Client,
    namespace: &str,
    name: &str,
    needle: &str,
    timeout: Duration,
) -> Result<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    loop {
        let messages: Vec<String> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|event| event.involved_object.name.as_deref() == Some(name))
            .filter_map(|event| event.message)
            .collect();
        if let Some(message) = messages.iter().find(|m| m.contains(needle)) {
            return Ok(message.clone());
        }
        ensure!(
            Instant::now() < deadline,
            "no event of {name} contains {needle:?}: {messages:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// What became of a test pod's container: refused at its creation, or running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// An event of the pod says its container could not be created, with this message.
    Refused(String),
    /// The container ran and printed what it sees ([`gpu_command`]).
    Ran(Seen),
}

/// Waits until test pod `namespace/name` either has an event whose message contains `needle`
/// (its container refused) or has printed what it sees (its container ran), whichever comes
/// first, for up to `timeout`.
pub async fn fate(
    client: &Client,
    namespace: &str,
    name: &str,
    needle: &str,
    timeout: Duration,
) -> Result<Fate> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    loop {
        let messages: Vec<String> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|event| event.involved_object.name.as_deref() == Some(name))
            .filter_map(|event| event.message)
            .collect();
        if let Some(message) = messages.iter().find(|m| m.contains(needle)) {
            return Ok(Fate::Refused(message.clone()));
        }
        if let Ok(log) = logs(client, namespace, name).await
            && log.lines().any(|line| line == "seen")
        {
            return Ok(Fate::Ran(Seen::parse(&log)));
        }
        ensure!(
            Instant::now() < deadline,
            "{name} was neither refused (no event contains {needle:?}: {messages:?}) nor ran \
             within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Tandem's node component's metrics, from its `--listen` port.
pub async fn component_metrics(port: u16) -> Result<String> {
    Ok(crate::cluster::insecure_http_client()?
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?)
}

/// The value of `series` (`name{labels}`, as exposed) in a metrics text; 0 when absent.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Everything a container printed, as `kubectl logs` shows it (through the apiserver and
/// the node's kubelet).
pub async fn logs(client: &Client, namespace: &str, pod: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.logs(pod, &LogParams::default())
        .await
        .with_context(|| format!("could not read the log of {namespace}/{pod}"))
}

/// Waits until pod `namespace/name` is in `phase` (`Running`, `Succeeded`), and returns it.
pub async fn wait_for_phase(
    client: &Client,
    namespace: &str,
    name: &str,
    phase: &str,
    timeout: Duration,
) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    loop {
        let pod = pods.get_opt(name).await?;
        let now = pod
            .as_ref()
            .and_then(|pod| pod.status.as_ref())
            .and_then(|status| status.phase.clone());
        if now.as_deref() == Some(phase) {
            return pod.context("pod vanished");
        }
        if Instant::now() >= deadline {
            let state = pod
                .and_then(|pod| pod.status)
                .map(|status| serde_json::to_string(&status).unwrap_or_default());
            bail!("pod {namespace}/{name} is not {phase} after {timeout:?}: {state:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn containerd_config(dir: &Path, socket: &Path) -> String {
    let d = dir.display();
    format!(
        "\
version = 3
root = '{d}/root'
state = '{d}/state'
disabled_plugins = [
  'io.containerd.snapshotter.v1.btrfs',
  'io.containerd.snapshotter.v1.zfs',
  'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.erofs',
  'io.containerd.tracing.processor.v1.otlp',
]

[grpc]
  address = '{socket}'

[ttrpc]
  address = '{socket}.ttrpc'

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '{PAUSE_IMAGE}'

[plugins.'io.containerd.cri.v1.runtime']
  # Without CAP_SYS_RESOURCE runc cannot lower a process's oom_score_adj.
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '{runc}'
        Root = '{d}/runc'
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['{cni_bin}']
    conf_dir = '{d}/cni'

[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = '{d}/nri.sock'
  plugin_path = '{d}/nri-plugins'
  plugin_config_path = '{d}/nri-conf'
  [plugins.'io.containerd.nri.v1.nri'.default_validator]
    enable = true
",
        socket = socket.display(),
        runc = tandem_xtask::node::RUNC,
        cni_bin = tandem_xtask::node::CNI_BIN_DIR,
    )
}

fn write_gpu_file(node: &Node) -> Result<()> {
    let gpus: Vec<serde_json::Value> = (0..GPUS_PER_NODE)
        .map(|index| {
            json!({
                "index": index,
                "uuid": node.uuid(index),
                "minor": fake_minor(index),
                "name": node.spec.product,
                "memory_mib": node.spec.memory_mib,
            })
        })
        .collect();
    fs::write(
        node.gpu_file(),
        serde_json::to_string_pretty(&json!({"gpus": gpus}))?,
    )?;
    Ok(())
}

/// The cgroup v1 hierarchies (and the unified one, if mounted).
fn cgroup_hierarchies() -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir("/sys/fs/cgroup") else {
        return Vec::new();
    };
    let mut hierarchies: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join("cgroup.procs").exists())
        .collect();
    hierarchies.sort();
    hierarchies
}

/// Creates `/<root>` in every hierarchy (the kubelet finds some missing otherwise), with the
/// cpuset's CPUs and memory nodes copied from the parent (an empty cpuset admits no task).
fn create_cgroup_root(root: &str) -> Result<()> {
    for hierarchy in cgroup_hierarchies() {
        let dir = hierarchy.join(root);
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for file in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(value) = fs::read_to_string(hierarchy.join(file)) {
                fs::write(dir.join(file), value.trim())
                    .with_context(|| format!("cannot write {}", dir.join(file).display()))?;
            }
        }
    }
    Ok(())
}

/// Removes `/<root>` and everything below it from every hierarchy, deepest first.
fn remove_cgroup_root(root: &str) {
    fn remove(dir: &Path) {
        if let Ok(entries) = fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    remove(&entry.path());
                }
            }
        }
        let _ = fs::remove_dir(dir);
    }
    for hierarchy in cgroup_hierarchies() {
        remove(&hierarchy.join(root));
    }
}

/// Kills and deletes every container runc knows under `root`.
fn kill_containers(root: &Path) {
    let Ok(output) = Command::new(tandem_xtask::node::RUNC)
        .arg("--root")
        .arg(root)
        .args(["list", "-q"])
        .stderr(Stdio::null())
        .output()
    else {
        return;
    };
    for id in String::from_utf8_lossy(&output.stdout).split_whitespace() {
        let _ = Command::new(tandem_xtask::node::RUNC)
            .arg("--root")
            .arg(root)
            .args(["delete", "--force", id])
            .stderr(Stdio::null())
            .status();
    }
}

/// SIGKILLs every process whose command line contains `needle` (containerd's shims carry
/// their containerd's socket).
fn kill_matching(needle: &str) {
    let _ = Command::new("pkill")
        .args(["-KILL", "-f", needle])
        .stderr(Stdio::null())
        .status();
    // Killed processes are reaped by init; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Command::new("pgrep")
        .args(["-f", needle])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Unmounts (lazily) every mount at or below `dir`, deepest first.
fn unmount_under(dir: &Path) {
    let Ok(mountinfo) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = dir.display().to_string();
    let mut points: Vec<String> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|point| point.replace("\\040", " "))
        .filter(|point| point.starts_with(&prefix))
        .collect();
    points.sort_by_key(|point| std::cmp::Reverse(point.len()));
    for point in points {
        let _ = Command::new("umount")
            .args(["-l", &point])
            .stderr(Stdio::null())
            .status();
    }
}

/// What the kubelet changes on the host, as it was before.
struct HostState {
    sysctls: BTreeMap<&'static str, String>,
    /// For each fixed directory: `None` if it did not exist, else the names it held.
    dirs: BTreeMap<&'static str, Option<Vec<String>>>,
}

impl HostState {
    fn capture() -> Result<Self> {
        let mut sysctls = BTreeMap::new();
        for name in SYSCTLS {
            let path = Path::new("/proc/sys").join(name);
            if let Ok(value) = fs::read_to_string(&path) {
                sysctls.insert(*name, value.trim().to_owned());
            }
        }
        let dirs = FIXED_DIRS
            .iter()
            .map(|dir| (*dir, list(Path::new(dir))))
            .collect();
        Ok(Self { sysctls, dirs })
    }

    fn restore(&self) {
        for (name, value) in &self.sysctls {
            let path = Path::new("/proc/sys").join(name);
            if fs::read_to_string(&path).is_ok_and(|now| now.trim() != value)
                && let Err(error) = fs::write(&path, value)
            {
                eprintln!("could not restore {}: {error}", path.display());
            }
        }
        for (dir, before) in &self.dirs {
            let dir = Path::new(dir);
            match before {
                None => {
                    unmount_under(dir);
                    let _ = fs::remove_dir_all(dir);
                }
                Some(names) => {
                    for name in list(dir).unwrap_or_default() {
                        if !names.contains(&name) {
                            let path = dir.join(&name);
                            let _ = fs::remove_dir_all(&path).or_else(|_| fs::remove_file(&path));
                        }
                    }
                }
            }
        }
    }
}

fn list(dir: &Path) -> Option<Vec<String>> {
    let entries = fs::read_dir(dir).ok()?;
    let mut names: Vec<String> = entries
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Some(names)
}
