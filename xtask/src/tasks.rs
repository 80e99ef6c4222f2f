//! The tasks of `cargo xtask`: each one a function the binary calls after parsing arguments.
//!
//! Every task runs its child cargo from the workspace root, with [`tandem_toolchain::process::fresh_cargo`]'s
//! environment plus the caller's `CARGO_TARGET_DIR`, if one was set.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result};

use crate::background::BackgroundBuild;
use crate::kube::{KUBE_BIN_DIR_VAR, KubeBinaries, ensure_kube_binaries};
use crate::kube_plugin::{
    PLUGIN_SCHEDULER_VAR, Profile, ensure_plugin_scheduler, ensure_plugin_scheduler_linking,
};
use crate::process::{display, fresh_cargo, run};
use crate::slurm::ensure_slurm_packages;
use crate::toolchain::{WasmToolchain, ensure_toolchain};
use crate::volcano::{VC_SCHEDULER_VAR, VolcanoBuild, ensure_vc_scheduler, volcano_source};
use tandem_toolchain::{GuestBuild, build_component};

/// The engine guest, built by `cargo xtask component`.
pub const ENGINE_PACKAGE: &str = "tandem-engine-component";

/// The workspace the tasks run in.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    /// `$CARGO_TARGET_DIR` as the caller set it, passed on to child cargos.
    target_dir_override: Option<PathBuf>,
}

impl Workspace {
    /// The workspace at `root`, honouring the current `CARGO_TARGET_DIR` (a relative one is
    /// taken relative to the current directory, as cargo does).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let target_dir_override = std::env::var_os("CARGO_TARGET_DIR")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .map(|dir| std::path::absolute(&dir).unwrap_or(dir));
        Self {
            root: root.into(),
            target_dir_override,
        }
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The cargo target directory: `$CARGO_TARGET_DIR`, else `<root>/target`.
    pub fn target_dir(&self) -> PathBuf {
        self.target_dir_override
            .clone()
            .unwrap_or_else(|| self.root.join("target"))
    }

    /// A fresh cargo running in the workspace root, with `args`.
    pub fn cargo<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cargo = fresh_cargo();
        cargo.current_dir(&self.root).args(args);
        if let Some(dir) = &self.target_dir_override {
            cargo.env("CARGO_TARGET_DIR", dir);
        }
        cargo
    }
}

/// `cargo xtask toolchain`: ensures the wasm32 toolchain and returns it.
pub fn toolchain() -> Result<WasmToolchain> {
    ensure_toolchain()
}

/// `cargo xtask component`: builds the engine component into `out_dir` (default
/// `<target>/components`) and returns its path. Guests share `<target>/wasm-guests` with the
/// build scripts.
pub fn component(workspace: &Workspace, out_dir: Option<PathBuf>) -> Result<PathBuf> {
    let target_dir = workspace.target_dir();
    let build = GuestBuild {
        package: ENGINE_PACKAGE.to_owned(),
        workspace_root: workspace.root().to_path_buf(),
        target_dir: target_dir.join("wasm-guests"),
        out_dir: out_dir.unwrap_or_else(|| target_dir.join("components")),
    };
    build_component(&build)
}

/// `cargo xtask kube-bins`: builds (if missing) the Kubernetes binaries of the end-to-end tests
/// and returns them.
pub fn kube_bins() -> Result<KubeBinaries> {
    ensure_kube_binaries()
}

/// What the node tier runs besides the control plane.
#[derive(Debug, Clone)]
pub struct NodeBins {
    /// The kubelet.
    pub kubelet: PathBuf,
    /// The directory with containerd, its runc shim and ctr.
    pub containerd_dir: PathBuf,
    /// The test and sandbox images, as OCI archives.
    pub images: [crate::oci::Archive; 2],
}

/// `cargo xtask node-bins`: installs the node tier's Debian packages, builds (if missing) the
/// kubelet and containerd, and writes the test images into `<node_dir()>/images`.
pub fn node_bins() -> Result<NodeBins> {
    crate::node::ensure_node_packages()?;
    let containerd_dir = crate::node::ensure_containerd()?;
    let kubelet = crate::kube::ensure_kubelet()?;
    let images = crate::node::write_test_images(&crate::node::node_dir().join("images"))?;
    Ok(NodeBins {
        kubelet,
        containerd_dir,
        images,
    })
}

/// `cargo xtask e2e-bins`: builds (if missing) every program of another project the
/// end-to-end tiers start: Kubernetes' control plane and kubelet, helm, containerd (with the
/// node's Debian packages and test images) and vc-scheduler. `tandem-kube-scheduler` is not among
/// them: it links this workspace's library, which cargo builds.
///
/// Each is tried even when one before it failed (they are independent); the error names every
/// one that failed.
pub fn e2e_bins(workspace: &Workspace) -> Result<()> {
    let mut failed = Vec::new();
    match kube_bins() {
        Ok(kube) => eprintln!(
            "kube-apiserver, kube-scheduler, etcd: {}",
            kube.dir().display()
        ),
        Err(error) => failed.push(("kube-bins", error)),
    }
    match crate::helm::ensure_helm() {
        Ok(helm) => eprintln!("helm: {}", helm.display()),
        Err(error) => failed.push(("helm", error)),
    }
    match vc_scheduler(workspace) {
        Ok(volcano) => eprintln!("vc-scheduler: {}", volcano.scheduler.display()),
        Err(error) => failed.push(("vc-scheduler", error)),
    }
    match node_bins() {
        Ok(node) => eprintln!(
            "kubelet: {}; containerd: {}",
            node.kubelet.display(),
            node.containerd_dir.display()
        ),
        Err(error) => failed.push(("node-bins", error)),
    }
    if failed.is_empty() {
        return Ok(());
    }
    for (what, error) in &failed {
        eprintln!("error: {what}: {error:#}");
    }
    let names: Vec<&str> = failed.iter().map(|(what, _)| *what).collect();
    anyhow::bail!("could not build {}", names.join(", "))
}

/// `cargo xtask vc-scheduler`: builds (if missing) Volcano's scheduler from the source
/// [`volcano_source`] finds (`$TANDEM_VOLCANO_SRC`, the vendor copy, or a clone) and returns it.
pub fn vc_scheduler(workspace: &Workspace) -> Result<VolcanoBuild> {
    ensure_vc_scheduler(&volcano_source(workspace.root())?)
}

/// The size of the file at `path`, in bytes.
pub fn file_size(path: &Path) -> Result<u64> {
    Ok(fs::metadata(path)
        .with_context(|| format!("could not stat {}", path.display()))?
        .len())
}

/// One step of the gate: cargo arguments and extra environment.
struct Step {
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
}

/// The CI gate before the end-to-end tiers, in order. Clippy and the docs see every feature,
/// so the end-to-end suites are linted although `cargo test` leaves them out.
const GATE: &[Step] = &[
    Step {
        args: &["fmt", "--all", "--check"],
        env: &[],
    },
    Step {
        args: &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ],
        env: &[],
    },
    Step {
        args: &["doc", "--workspace", "--no-deps", "--all-features"],
        env: &[("RUSTDOCFLAGS", "-Dwarnings")],
    },
    Step {
        args: &["test", "--workspace"],
        env: &[],
    },
];

/// The package of the end-to-end tiers: one test target per tier, named as the tier, behind
/// its `e2e` feature so that a plain `cargo test` never builds them.
pub const E2E_PACKAGE: &str = "tandem-e2e";

/// The `cargo test` that builds the test targets of `tiers`, and none of them runs.
/// `--workspace` with a feature that adds no dependency (`e2e` is empty) resolves every
/// dependency's features exactly as the gate's `cargo test --workspace` did, so only the test
/// targets compile; `--package` would resolve them anew and rebuild the wasmtime stack. The C
/// ABI's `cycle` bench is built too: its library comes with it, static library included, for
/// the plugin scheduler to link.
fn e2e_build_args(tiers: &[Tier]) -> Vec<String> {
    let mut args: Vec<String> = ["test", "--workspace", "--features"]
        .map(str::to_owned)
        .to_vec();
    args.push(format!("{E2E_PACKAGE}/e2e"));
    for tier in tiers {
        args.extend(["--test".to_owned(), tier.name.to_owned()]);
    }
    args.extend(
        [
            "--bench",
            "cycle",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ]
        .map(str::to_owned),
    );
    args
}

/// The `cargo build` of the workspace's programs `tiers` start, each built once; `None` when
/// they start none. With `--tests` and the feature of [`e2e_build_args`], cargo resolves
/// features as the test build did (dev-dependencies included), so the programs link from the
/// dependencies already built: without it, it resolves them anew and rebuilds about a hundred
/// crates (minutes).
fn programs_build_args(tiers: &[Tier]) -> Option<Vec<String>> {
    let mut programs: Vec<&str> = tiers
        .iter()
        .flat_map(|tier| tier.programs)
        .copied()
        .collect();
    programs.sort_unstable();
    programs.dedup();
    if programs.is_empty() {
        return None;
    }
    let mut args: Vec<String> = ["build", "--workspace", "--features"]
        .map(str::to_owned)
        .to_vec();
    args.extend([format!("{E2E_PACKAGE}/e2e"), "--tests".to_owned()]);
    for program in programs {
        args.extend(["--bin".to_owned(), program.to_owned()]);
    }
    Some(args)
}

/// What the end-to-end test build produced: the test executables by tier, and the static
/// library of the plugin's C ABI.
#[derive(Debug, Clone, Default)]
struct E2eBuild {
    tests: BTreeMap<String, PathBuf>,
    capi_library: Option<PathBuf>,
}

/// Builds the test targets of `tiers` in one cargo run, then the programs they start; returns
/// the test executables by tier.
fn build_e2e_tests(workspace: &Workspace, tiers: &[Tier]) -> Result<E2eBuild> {
    let mut cargo = workspace.cargo(e2e_build_args(tiers));
    eprintln!("==> {}", display_as_cargo(&cargo));
    let output = cargo
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::from(std::io::stderr()))
        .output()
        .context("could not start cargo")?;
    ensure_success(&cargo, output.status)?;
    let built = e2e_artifacts(&String::from_utf8_lossy(&output.stdout))?;
    for tier in tiers {
        anyhow::ensure!(
            built.tests.contains_key(tier.name),
            "cargo built no test executable for tier {}",
            tier.name
        );
    }
    if let Some(args) = programs_build_args(tiers) {
        // Beside the test executables (their `deps/`'s parent), where the tiers find them.
        run_shown(workspace.cargo(args))?;
    }
    Ok(built)
}

fn ensure_success(cargo: &Command, status: std::process::ExitStatus) -> Result<()> {
    anyhow::ensure!(
        status.success(),
        "`{}` failed ({status})",
        display_as_cargo(cargo)
    );
    Ok(())
}

/// The tiers' test executables in cargo's JSON messages, by target (tier) name, and the C
/// ABI's static library.
fn e2e_artifacts(messages: &str) -> Result<E2eBuild> {
    let mut built = E2eBuild::default();
    let capi_target = crate::kube_plugin::CAPI_PACKAGE.replace('-', "_");
    for line in messages.lines().filter(|line| line.starts_with('{')) {
        let message: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("cargo printed {line}"))?;
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        if message["target"]["name"] == *capi_target {
            let library = message["filenames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_str)
                .find(|file| file.ends_with(".a"));
            if let Some(library) = library {
                built.capi_library = Some(PathBuf::from(library));
            }
        }
        // `path+file:///ws/tests/e2e#tandem-e2e@0.1.0`
        let package = message["package_id"]
            .as_str()
            .and_then(|id| id.rsplit_once('#'))
            .and_then(|(_, rest)| rest.split_once('@'))
            .map(|(name, _)| name);
        let is_test = package == Some(E2E_PACKAGE)
            && message["profile"]["test"] == true
            && message["target"]["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|kind| kind == "test"));
        let (true, Some(target), Some(executable)) = (
            is_test,
            message["target"]["name"].as_str(),
            message["executable"].as_str(),
        ) else {
            continue;
        };
        built
            .tests
            .insert(target.to_owned(), PathBuf::from(executable));
    }
    Ok(built)
}

/// What a tier's scenarios run against, built or installed before they start, each found by
/// them through its variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// etcd, kube-apiserver and kube-scheduler, built from the Kubernetes module.
    ControlPlane,
    /// The `helm` binary.
    Helm,
    /// `tandem-kube-scheduler`: kube-scheduler with the framework plugin linked in.
    PluginScheduler,
    /// Volcano's `vc-scheduler`, built from its source.
    VcScheduler,
    /// The node's programs (containerd, runc, the kubelet) and `tandem-node`.
    Nodes,
    /// Slurm's Debian packages and the SPANK plugin slurmd loads.
    Slurm,
}

/// A tier of end-to-end tests: scenarios against real scheduler processes that `cargo test`
/// alone never builds, the test target of [`E2E_PACKAGE`] named as the tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    /// The name `cargo xtask e2e` takes.
    pub name: &'static str,
    /// What it starts, for `--help` and the log.
    pub what: &'static str,
    needs: &'static [Need],
    /// The workspace's programs its scenarios start (found beside the test executable).
    programs: &'static [&'static str],
}

/// The end-to-end tiers, in the order `cargo xtask test` runs them: those whose programs the
/// background build finishes first come first (Kubernetes' control plane, then none from Go for
/// Slurm), so that they run while vc-scheduler, containerd and the kubelet still compile.
pub const TIERS: &[Tier] = &[
    Tier {
        name: "kube",
        what: "etcd, kube-apiserver and kube-scheduler with the Tandem extender",
        needs: &[Need::ControlPlane],
        programs: &["tandem-kube-adapter"],
    },
    Tier {
        name: "kube-plugin",
        what: "etcd, kube-apiserver and tandem-kube-scheduler (the Tandem framework plugin)",
        needs: &[Need::ControlPlane, Need::PluginScheduler],
        programs: &[],
    },
    Tier {
        name: "helm",
        what: "the Helm chart: helm lint and template of every mode, a server-side dry run and \
               RBAC reviews against kube-apiserver with RBAC, helm install running \
               tandem-kube-scheduler as its pod",
        needs: &[Need::ControlPlane, Need::Helm, Need::PluginScheduler],
        programs: &[],
    },
    Tier {
        name: "slurm",
        what: "munged, slurmctld and slurmd from Debian with Tandem's SPANK plugin and job_submit.lua",
        needs: &[Need::Slurm],
        programs: &["tandem-slurm-adapter"],
    },
    Tier {
        name: "volcano",
        what: "etcd, kube-apiserver and vc-scheduler (Volcano) with the Tandem extender",
        needs: &[Need::ControlPlane, Need::VcScheduler],
        programs: &["tandem-volcano-adapter"],
    },
    Tier {
        name: "node",
        what: "real nodes (containerd with NRI, runc, the kubelet; fake GPUs) with tandem-node, \
               pods placed through tandem-kube-scheduler, the extender and vc-scheduler",
        needs: &[
            Need::ControlPlane,
            Need::PluginScheduler,
            Need::VcScheduler,
            Need::Nodes,
        ],
        programs: &["tandem-kube-adapter", "tandem-volcano-adapter"],
    },
];

impl Tier {
    /// The tier called `name`.
    pub fn named(name: &str) -> Result<Tier> {
        TIERS
            .iter()
            .find(|tier| tier.name == name)
            .copied()
            .ok_or_else(|| {
                let names: Vec<&str> = TIERS.iter().map(|tier| tier.name).collect();
                anyhow::anyhow!(
                    "no end-to-end tier named `{name}` (tiers: {})",
                    names.join(", ")
                )
            })
    }

    /// Whether the tier's scenarios run against `need`.
    fn needs(&self, need: Need) -> bool {
        self.needs.contains(&need)
    }
}

/// `cargo xtask test`: ensures the toolchain, then runs the gate (format, import cycles,
/// clippy, docs, the unit and integration tests — every fuzz target's seeds and kept corpus
/// replayed among them, `fuzz/tests/replay.rs` — then every end-to-end tier (the framework
/// plugin's Go code is formatted, vetted and unit-tested where its scheduler is built, before
/// the first tier that runs it), printing each command and stopping at the first failure. Exploring with the instrumented fuzz targets is
/// `cargo xtask fuzz`'s, not the gate's: its build of every crate again would double the
/// gate's compile time.
///
/// The tiers' Go programs ([`e2e_bins`]) build in a child of this program (`cargo xtask
/// e2e-bins`, niced, its log in the target directory) while the cargo steps run: it must be
/// called from the xtask binary.
pub fn test(workspace: &Workspace) -> Result<()> {
    let toolchain = ensure_toolchain()?;
    eprintln!("==> wasm32 toolchain: {toolchain}");
    // The SPANK plugin's bindings are generated from Slurm's headers by every workspace build.
    ensure_slurm_packages()?;
    let background = BackgroundBuild::start(&workspace.target_dir().join("e2e-bins.log"))?;
    for (index, step) in GATE.iter().enumerate() {
        if index == 1 {
            eprintln!("==> import cycles between modules");
            cycles(workspace)?;
            eprintln!("==> references in the documentation");
            docs(workspace)?;
            eprintln!("==> what the dependencies may be (deny.toml)");
            crate::deny::check(workspace.root())?;
        }
        let mut cargo = workspace.cargo(step.args);
        let mut shown = String::new();
        for (name, value) in step.env {
            cargo.env(name, value);
            shown.push_str(&format!("{name}={value} "));
        }
        shown.push_str(&display_as_cargo(&cargo));
        eprintln!("==> {shown}");
        run(&mut cargo).with_context(|| format!("gate step `{shown}` failed"))?;
    }
    // The tiers do not wait for the whole background build: each waits (on the build's lock)
    // for just the programs it runs, so the first tiers overlap the last Go builds.
    e2e(workspace, TIERS, &[])?;
    background.finish();
    eprintln!("==> gate passed");
    Ok(())
}

/// `cargo xtask e2e`: runs the given end-to-end tiers. Their test targets are built first, in
/// one cargo run that reuses the dependencies the gate built (`--workspace`), then the
/// workspace's programs they start; each tier then runs its test executable itself, in the
/// package's directory. What a tier runs against is built (if missing) before it, as a step of
/// its own: the first builds take minutes and should not look like a hung test. `test_args`
/// go to each tier's test harness.
pub fn e2e(workspace: &Workspace, tiers: &[Tier], test_args: &[String]) -> Result<()> {
    let built = build_e2e_tests(workspace, tiers)?;
    for tier in tiers {
        eprintln!("==> end-to-end tier `{}`: {}", tier.name, tier.what);
        let mut env: Vec<(&str, PathBuf)> = Vec::new();
        if tier.needs(Need::ControlPlane) {
            let binaries = ensure_kube_binaries()?;
            let dir = binaries.dir();
            eprintln!(
                "==> kube-apiserver, kube-scheduler, etcd: {}",
                dir.display()
            );
            env.push((KUBE_BIN_DIR_VAR, dir.to_path_buf()));
        }
        if tier.needs(Need::Helm) {
            let helm = crate::helm::ensure_helm()?;
            eprintln!("==> helm: {}", helm.display());
            env.push((crate::helm::HELM_BIN_VAR, helm));
        }
        if tier.needs(Need::PluginScheduler) {
            let binary = match &built.capi_library {
                Some(library) => ensure_plugin_scheduler_linking(workspace.root(), library)?,
                None => ensure_plugin_scheduler(
                    workspace.root(),
                    &workspace.target_dir(),
                    Profile::Dev,
                )?,
            };
            eprintln!("==> tandem-kube-scheduler: {}", binary.display());
            env.push((PLUGIN_SCHEDULER_VAR, binary));
        }
        if tier.needs(Need::VcScheduler) {
            let build = vc_scheduler(workspace)?;
            eprintln!("==> vc-scheduler: {}", build.scheduler.display());
            env.push((VC_SCHEDULER_VAR, build.scheduler));
        }
        if tier.needs(Need::Nodes) {
            let node = node_bins()?;
            eprintln!(
                "==> kubelet: {}; containerd: {}",
                node.kubelet.display(),
                node.containerd_dir.display()
            );
            // The node component the scenarios run on every node.
            run_shown(workspace.cargo(["build", "--package", "tandem-node"]))?;
            env.push((
                NODE_BIN_VAR,
                workspace.target_dir().join("debug").join("tandem-node"),
            ));
        }
        if tier.needs(Need::Slurm) {
            ensure_slurm_packages()?;
            // The plugin slurmd loads; the suite finds it beside the service binary.
            run_shown(workspace.cargo(["build", "--package", "tandem-slurm-spank"]))?;
        }
        let executable = &built.tests[tier.name];
        let mut test = Command::new(executable);
        // Where `cargo test` runs a package's tests: its directory.
        test.current_dir(workspace.root().join("tests/e2e"))
            .args(test_args);
        // A scenario fails with an error value whose message says what went wrong; with
        // RUST_BACKTRACE set, anyhow would print a backtrace after it that fills the tail of
        // the log CI keeps. Panics keep their backtraces; RUST_LIB_BACKTRACE, when set, wins.
        if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
            test.env("RUST_LIB_BACKTRACE", "0");
        }
        let mut shown = String::new();
        for (name, value) in &env {
            test.env(name, value);
            shown.push_str(&format!("{name}={} ", value.display()));
        }
        shown.push_str(&display(&test));
        eprintln!("==> {shown}");
        run(&mut test).with_context(|| format!("end-to-end tier `{}` failed", tier.name))?;
    }
    Ok(())
}

/// The variable the node tier's scenarios find `tandem-node` through.
pub const NODE_BIN_VAR: &str = "TANDEM_NODE_BIN";

/// `cargo xtask docs`: checks that every relative link and repository path in the README, the
/// Markdown docs and the `--help` sources names something that exists ([`crate::docs`]).
pub fn docs(workspace: &Workspace) -> Result<()> {
    let files = crate::docs::documents(workspace.root())?.len();
    let broken = crate::docs::check(workspace.root())?;
    for reference in &broken {
        eprintln!("{reference}");
    }
    anyhow::ensure!(
        broken.is_empty(),
        "{} reference(s) in the documentation name nothing (listed above)",
        broken.len()
    );
    eprintln!("every link and repository path in {files} documents exists");
    Ok(())
}

/// `cargo xtask cycles`: checks every crate of the workspace for modules that import each
/// other in a circle; prints what it checked, and each cycle found.
pub fn cycles(workspace: &Workspace) -> Result<()> {
    let reports = crate::cycles::check_workspace(workspace.root())?;
    let mut found = 0;
    for report in &reports {
        for cycle in &report.cycles {
            eprintln!("{}: {cycle}", report.root.display());
            found += 1;
        }
    }
    let modules: usize = reports.iter().map(|report| report.modules).sum();
    anyhow::ensure!(
        found == 0,
        "{found} import cycle(s) between modules (listed above); imports between sibling \
         modules must point one way"
    );
    eprintln!(
        "no import cycles in {} crates ({modules} modules)",
        reports.len()
    );
    Ok(())
}

/// `cargo xtask demo`: ensures the toolchain, then replays the built-in demo trace in the
/// simulator under Tandem and every baseline, printing the comparison and writing
/// `tandem-report.html` (plots) in the repository root.
///
/// Built in the workspace's `demo` profile: a new user's first build, from empty caches, is
/// most of the demo's time, so that profile drops debug information and leaves Cranelift
/// unoptimized, which shortens the build by minutes and costs seconds when the engine component
/// is compiled at start. The demo replays in seconds either way (speed is measured by `cargo
/// xtask bench`, in release).
///
/// The engine component is built here, beside cargo's build of the CLI, into the guest target
/// directory the CLI's build script uses: that build script starts only once every crate it
/// waits on is compiled, and the component (the standard library for wasm32 included) is the
/// longest single step of a first build, which would otherwise leave a core idle. The wasm32
/// toolchain is bootstrapped on that side too (the host crates do not need it), under its lock.
pub fn demo(workspace: &Workspace) -> Result<()> {
    std::thread::scope(|scope| {
        let component = scope.spawn(|| component(workspace, None));
        let demo = run_shown(workspace.cargo([
            "run",
            "--profile",
            DEMO_PROFILE,
            "--package",
            "tandem-cli",
            "--",
            "simulate",
            "--report",
            "tandem-report.html",
        ]));
        // A failed component build fails the CLI's build script with the same error, which
        // cargo has shown; joining only keeps the thread from outliving the demo.
        let _ = component.join();
        demo
    })
}

/// The cargo profile of `cargo xtask demo`; the workspace's root `Cargo.toml` defines it.
const DEMO_PROFILE: &str = "demo";

/// `cargo xtask bench`: runs the benchmarks of `tandem-tests` (engine calls, the simulator's
/// 15,000-job replay), then the extender load benchmark of `tandem-kube-adapter`, then its
/// throughput benchmark against a real kube-scheduler (the Kubernetes binaries are built first,
/// if missing, as for the tests).
pub fn bench(workspace: &Workspace) -> Result<()> {
    run_shown(workspace.cargo(["bench", "--package", "tandem-tests"]))?;
    run_shown(workspace.cargo([
        "bench",
        "--package",
        "tandem-kube-adapter",
        "--bench",
        "extender",
    ]))?;
    let binaries = ensure_kube_binaries()?;
    let mut scheduler = workspace.cargo([
        "bench",
        "--package",
        "tandem-kube-adapter",
        "--bench",
        "scheduler",
    ]);
    scheduler.env(KUBE_BIN_DIR_VAR, binaries.dir());
    run_shown(scheduler)
}

fn run_shown(mut cargo: Command) -> Result<()> {
    let shown = display_as_cargo(&cargo);
    eprintln!("==> {shown}");
    run(&mut cargo).with_context(|| format!("`{shown}` failed"))
}

/// `cargo <args>`: the full path of `$CARGO` only makes the line longer.
fn display_as_cargo(cargo: &Command) -> String {
    let mut shown = Command::new("cargo");
    shown.args(cargo.get_args());
    display(&shown)
}

/// The gate as shell-like lines, for tests.
#[cfg(test)]
fn gate_commands() -> Vec<String> {
    GATE.iter()
        .map(|step| {
            let env = step
                .env
                .iter()
                .map(|(name, value)| format!("{name}={value}"));
            let cargo = std::iter::once("cargo".to_owned());
            let args = step.args.iter().map(|arg| (*arg).to_owned());
            env.chain(cargo).chain(args).collect::<Vec<_>>().join(" ")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_runs_format_then_clippy_then_docs_then_tests() {
        assert_eq!(
            gate_commands(),
            [
                "cargo fmt --all --check",
                "cargo clippy --workspace --all-targets --all-features -- -D warnings",
                "RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --all-features",
                "cargo test --workspace",
            ]
        );
    }

    /// Every scheduler a tier starts runs against the API server, so a tier that needs one
    /// needs the control plane too; only Slurm's tier needs neither.
    #[test]
    fn schedulers_come_with_a_control_plane() {
        for tier in TIERS {
            if tier.needs(Need::PluginScheduler)
                || tier.needs(Need::VcScheduler)
                || tier.needs(Need::Nodes)
                || tier.needs(Need::Helm)
            {
                assert!(tier.needs(Need::ControlPlane), "{}", tier.name);
            }
            assert_eq!(
                tier.needs(Need::ControlPlane),
                !tier.needs(Need::Slurm),
                "{}",
                tier.name
            );
        }
    }

    #[test]
    fn each_tier_is_a_test_target_built_with_the_programs_it_starts() {
        let tiers: Vec<Tier> = ["kube", "slurm", "node"]
            .into_iter()
            .map(|name| Tier::named(name).unwrap())
            .collect();
        assert_eq!(
            e2e_build_args(&tiers).join(" "),
            "test --workspace --features tandem-e2e/e2e --test kube --test slurm --test node \
             --bench cycle --no-run --message-format=json-render-diagnostics"
        );
        // Each program once, whichever tiers start it.
        assert_eq!(
            programs_build_args(&tiers).unwrap().join(" "),
            "build --workspace --features tandem-e2e/e2e --tests --bin tandem-kube-adapter \
             --bin tandem-slurm-adapter --bin tandem-volcano-adapter"
        );
        assert_eq!(programs_build_args(&[Tier::named("helm").unwrap()]), None);
        let error = Tier::named("kubernetes").unwrap_err().to_string();
        assert!(
            error.contains("`kubernetes`") && error.contains("kube"),
            "{error}"
        );
    }

    #[test]
    fn test_executables_and_the_capi_library_are_found_in_cargos_messages() {
        let messages = r#"{"reason":"compiler-artifact","package_id":"path+file:///ws/tests/e2e#tandem-e2e@0.1.0","manifest_path":"/ws/tests/e2e/Cargo.toml","target":{"name":"kube","kind":["test"]},"profile":{"test":true},"executable":"/t/debug/deps/kube-1"}
{"reason":"compiler-artifact","package_id":"path+file:///ws/tests/e2e#tandem-e2e@0.1.0","manifest_path":"/ws/tests/e2e/Cargo.toml","target":{"name":"tandem_e2e","kind":["lib"]},"profile":{"test":false},"executable":null}
{"reason":"compiler-artifact","package_id":"path+file:///ws/kube-adapter#tandem-kube-adapter@0.1.0","manifest_path":"/ws/kube-adapter/Cargo.toml","target":{"name":"tandem-kube-adapter","kind":["bin"]},"profile":{"test":false},"executable":"/t/debug/tandem-kube-adapter"}
{"reason":"compiler-artifact","package_id":"path+file:///ws/kube-plugin/capi#tandem-kube-capi@0.1.0","manifest_path":"/ws/kube-plugin/capi/Cargo.toml","target":{"name":"tandem_kube_capi","kind":["staticlib","rlib"]},"profile":{"test":false},"filenames":["/t/debug/deps/libtandem_kube_capi-2.a","/t/debug/deps/libtandem_kube_capi-2.rlib"],"executable":null}
{"reason":"build-finished","success":true}"#;
        let built = e2e_artifacts(messages).unwrap();
        assert_eq!(
            built.capi_library.as_deref(),
            Some(Path::new("/t/debug/deps/libtandem_kube_capi-2.a"))
        );
        assert_eq!(built.tests.len(), 1);
        assert_eq!(built.tests["kube"], Path::new("/t/debug/deps/kube-1"));
    }

    #[test]
    fn child_cargos_run_in_the_root_without_the_outer_build_scripts_environment() {
        let workspace = Workspace {
            root: PathBuf::from("/ws"),
            target_dir_override: Some(PathBuf::from("/cache/target")),
        };
        let cargo = workspace.cargo(["bench"]);
        assert_eq!(cargo.get_current_dir(), Some(Path::new("/ws")));
        let target = cargo
            .get_envs()
            .find(|(name, _)| *name == "CARGO_TARGET_DIR")
            .and_then(|(_, value)| value);
        assert_eq!(target, Some(std::ffi::OsStr::new("/cache/target")));
        assert_eq!(workspace.target_dir(), Path::new("/cache/target"));
    }
}
