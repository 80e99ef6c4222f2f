//! End to end against a real Slurm: munged, slurmctld and slurmd from Debian's packages (which
//! `cargo xtask e2e slurm` installs), two fake V100 GPUs with gres shards, Tandem's SPANK
//! plugin and job_submit.lua, and tandem-slurm-adapter. Every process started here is stopped
//! when the test ends, passed or not.
//!
//! Run: `cargo xtask e2e slurm` (root: Slurm's daemons run as root here).
//!
//! The service authenticates its callers with MUNGE (`--auth munge`): job_submit.lua and the
//! plugin send a credential with every request, and so does this suite when it reads the
//! placements (as root, Slurm's own). [`attacks`] is what a user of the cluster may try.

mod attacks;
mod mtls;
mod profilers;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use tandem_adapter_core::JobKeys;

const SECRET: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const TOKEN: &str = "e2e-intake-token";

struct Cluster {
    dir: PathBuf,
    port: u16,
    service: Option<Child>,
    /// The SPANK plugin plugstack.conf loads.
    plugin: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_service();
        let _ = Command::new(script())
            .args(["stop", &self.dir.display().to_string()])
            .status();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("slurm/cluster.sh")
}

impl Cluster {
    fn conf(&self) -> PathBuf {
        self.dir.join("etc/slurm.conf")
    }

    fn slurm(&self, program: &str, args: &[&str]) -> std::process::Output {
        Command::new(program)
            .args(args)
            .env("SLURM_CONF", self.conf())
            .current_dir(&self.dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
    }

    /// Starts the service with callers authenticated by MUNGE, and waits until it is ready.
    fn start_service(&mut self) -> anyhow::Result<()> {
        let auth: Vec<OsString> = vec![
            "--auth".into(),
            "munge".into(),
            "--munge-socket".into(),
            self.munge_socket().into(),
        ];
        self.spawn_service(&auth)?;
        wait_for("the service to be ready", Duration::from_secs(60), || {
            Ok(http(self.port, "GET", "/readyz", "")?.0 == 200)
        })
    }

    /// Starts the service with callers authenticated as `auth` says.
    fn spawn_service(&mut self, auth: &[OsString]) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("log/service.log"))?;
        let child = Command::new(tandem_e2e::program("tandem-slurm-adapter")?)
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .arg("--knowledge")
            .arg(self.dir.join("knowledge.kb"))
            .arg("--id-secret-file")
            .arg(self.dir.join("secret"))
            .arg("--intake-token-file")
            .arg(self.dir.join("token"))
            .args(["--node-refresh", "2s"])
            .arg("--model-dir")
            .arg(self.dir.join("models"))
            .args(["--model-file-limit", "1048576"])
            .args(auth)
            // A debug build on a loaded two-core machine: `describe` takes more than the
            // production deadline.
            .args(["--engine-deadline", "3s", "--decision-timeout", "5s"])
            .env("SLURM_CONF", self.conf())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.service = Some(child);
        Ok(())
    }

    fn stop_service(&mut self) {
        if let Some(mut child) = self.service.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// Submits a batch job; its standard output goes to `<dir>/<out>.out`.
    fn sbatch(&self, args: &[&str], out: &str, script: &str) -> std::process::Output {
        let out = self.dir.join(format!("{out}.out"));
        let out = format!("--output={}", out.display());
        let wrap = format!("--wrap={script}");
        let mut all: Vec<&str> = vec!["--parsable", &out];
        all.extend(args);
        all.push(&wrap);
        self.slurm("sbatch", &all)
    }

    fn job_id(output: &std::process::Output) -> anyhow::Result<u32> {
        ensure!(
            output.status.success(),
            "sbatch failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8_lossy(&output.stdout).trim().parse()?)
    }

    fn state(&self, job: u32) -> String {
        let out = self.slurm("squeue", &["-h", "-j", &job.to_string(), "-o", "%T"]);
        let state = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if state.is_empty() {
            "GONE".into()
        } else {
            state
        }
    }

    fn munge_socket(&self) -> PathBuf {
        self.dir.join("munge/munge.socket")
    }

    /// A fresh MUNGE credential for `method path` with `body`, made as `user` (root when
    /// `None`): what job_submit.lua and the plugin send.
    fn credential(
        &self,
        user: Option<&str>,
        method: &str,
        path: &str,
        body: &str,
    ) -> anyhow::Result<String> {
        let payload = format!("{method} {path}\n{body}");
        let mut command = match user {
            None => Command::new("munge"),
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--", "munge"]);
                c
            }
        };
        let output = command
            .arg("--socket")
            .arg(self.munge_socket())
            .args(["-s", &payload])
            .output()?;
        ensure!(
            output.status.success(),
            "munge as {user:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8(output.stdout)?.trim().to_owned())
    }

    /// A Slurm verb as `user` would send it (with a credential made for it); (status, body).
    fn verb_as(
        &self,
        user: Option<&str>,
        method: &str,
        path: &str,
        body: &str,
    ) -> anyhow::Result<(u16, String)> {
        let credential = self.credential(user, method, path, body)?;
        request(
            self.port,
            method,
            path,
            body,
            &[&format!("MUNGE {credential}")],
        )
    }

    fn placements(&self) -> anyhow::Result<serde_json::Value> {
        let (status, body) = self.verb_as(None, "GET", "/v1/slurm/placements", "")?;
        ensure!(status == 200, "placements: {status} {body}");
        Ok(serde_json::from_str(&body)?)
    }

    fn placement_of(&self, job: u32) -> anyhow::Result<serde_json::Value> {
        let all = self.placements()?;
        all["placements"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["slurm_job"].as_u64() == Some(u64::from(job)))
            .cloned()
            .with_context(|| format!("no placement for job {job}: {all}"))
    }
}

/// One HTTP/1.0 request to the service with the intake's token; (status, body).
fn http(port: u16, method: &str, path: &str, body: &str) -> anyhow::Result<(u16, String)> {
    request(port, method, path, body, &[&format!("Bearer {TOKEN}")])
}

/// One HTTP/1.0 request to the service with these `Authorization` values (none for an
/// empty list); (status, body).
fn request(
    port: u16,
    method: &str,
    path: &str,
    body: &str,
    authorization: &[&str],
) -> anyhow::Result<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    exchange(&mut stream, method, path, body, authorization)
}

/// Writes one HTTP/1.0 request on `stream` and reads its answer; (status, body).
fn exchange(
    stream: &mut (impl std::io::Read + std::io::Write),
    method: &str,
    path: &str,
    body: &str,
    authorization: &[&str],
) -> anyhow::Result<(u16, String)> {
    // The Slurm verbs take `key=value` lines, the intake JSON.
    let content = if path.starts_with("/v1/slurm/") {
        "text/plain"
    } else {
        "application/json"
    };
    let headers: String = authorization
        .iter()
        .map(|value| format!("Authorization: {value}\r\n"))
        .collect();
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\n{headers}Content-Type: {content}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => {}
        // A TLS server that closes without close_notify, after its whole answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !answer.is_empty() => {}
        Err(e) => return Err(e.into()),
    }
    let answer = String::from_utf8(answer)?;
    let (head, body) = answer.split_once("\r\n\r\n").context("not HTTP")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .context("no status")?
        .parse()?;
    Ok((status, body.to_owned()))
}

fn wait_for(
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < limit {
        match done() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    bail!("timed out after {limit:?} waiting for {what} (last error: {last:?})")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn plugin_path() -> PathBuf {
    std::env::var_os("TANDEM_SPANK_PLUGIN").map_or_else(
        || tandem_e2e::program_path("tandem-slurm-adapter").with_file_name("libtandem_slurm.so"),
        PathBuf::from,
    )
}

fn start() -> anyhow::Result<Cluster> {
    let plugin = plugin_path();
    ensure!(
        plugin.exists(),
        "{} is missing: build it with `cargo build -p tandem-slurm-spank` (cargo xtask e2e slurm does)",
        plugin.display()
    );
    let dir = std::env::temp_dir().join(format!("tandem-slurm-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("log"))?;
    // The suite's users must not read the service's secrets.
    use std::os::unix::fs::PermissionsExt as _;
    for (name, text) in [("secret", SECRET), ("token", TOKEN)] {
        std::fs::write(dir.join(name), text)?;
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o600))?;
    }
    // The clients load the plugin as the user who runs them: a copy where every user can read
    // it (the build's directory may be a home of root's).
    let plugin = {
        let copy = dir.join("libtandem_slurm.so");
        std::fs::copy(&plugin, &copy)?;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))?;
        copy
    };
    let mut cluster = Cluster {
        dir: dir.clone(),
        port: free_port(),
        service: None,
        plugin: plugin.clone(),
    };
    let lua = tandem_e2e::root().join("slurm-adapter/lua/job_submit.lua");
    let status = Command::new(script())
        .arg("start")
        .arg(&dir)
        .arg(&plugin)
        .arg(&lua)
        .arg(format!("127.0.0.1:{}", cluster.port))
        .status()?;
    ensure!(status.success(), "cluster.sh start failed");
    wait_for("the node to be idle", Duration::from_secs(60), || {
        let out = cluster.slurm("sinfo", &["-h", "-o", "%T"]);
        Ok(String::from_utf8_lossy(&out.stdout).trim() == "idle")
    })?;
    cluster.start_service()?;
    Ok(cluster)
}

fn key(name: &str) -> String {
    key_of(0, name)
}

/// The keyed id of `name` of the user `uid`.
fn key_of(uid: u32, name: &str) -> String {
    JobKeys::new((0..32).map(|i| ((i % 16) * 17) as u8).collect())
        .unwrap()
        .key(&format!("slurm-uid-{uid}"), name)
}

fn post_profiles(cluster: &Cluster) -> anyhow::Result<()> {
    let profile = |name: &str, util: f32, mem: u32| {
        serde_json::json!({"job": key(name), "profile": {
            "gpu_util_pct": util, "mem_access_pct": util / 3.0, "mem_used_mib": mem, "gpu_model": "V100"}})
    };
    let body = serde_json::json!({"profiles": [
        profile("light", 25.0, 3000), profile("heavy", 95.0, 3000),
        profile("p", 35.0, 3000), profile("q", 40.0, 3000),
        profile("s1", 30.0, 2000), profile("s2", 35.0, 2000),
        profile("big", 60.0, 30000),
    ]});
    let (status, answer) = http(cluster.port, "POST", "/v1/profiles", &body.to_string())?;
    ensure!(status == 200, "profiles: {status} {answer}");
    Ok(())
}

fn output_of(cluster: &Cluster, name: &str) -> String {
    std::fs::read_to_string(cluster.dir.join(format!("{name}.out"))).unwrap_or_default()
}

fn wait_state(cluster: &Cluster, job: u32, states: &[&str]) -> anyhow::Result<()> {
    wait_for(
        &format!("job {job} to be {states:?}"),
        Duration::from_secs(90),
        || Ok(states.contains(&cluster.state(job).as_str())),
    )
}

fn metric(cluster: &Cluster, name: &str) -> anyhow::Result<f64> {
    let (_, text) = http(cluster.port, "GET", "/metrics", "")?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum())
}

#[test]
fn tandem_in_a_real_slurm() -> anyhow::Result<()> {
    let mut cluster = start()?;

    // (e) A bad objective fails at submission, naming the value.
    let bad = cluster.sbatch(&["--tandem=fastest"], "bad", "true");
    let stderr = String::from_utf8_lossy(&bad.stderr);
    println!("(e) sbatch --tandem=fastest: {}", stderr.trim());
    ensure!(
        !bad.status.success() && stderr.contains("'fastest'"),
        "{stderr}"
    );
    let help = cluster.slurm("sbatch", &["--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    for option in [
        "--tandem",
        "--tandem-priority",
        "--tandem-work",
        "--tandem-model",
        "--tandem-batch-size",
    ] {
        ensure!(help.contains(option), "sbatch --help lacks {option}");
    }

    post_profiles(&cluster)?;

    // (b) A job whose memory fits no GPU is refused with the reason.
    let big = cluster.sbatch(
        &["--tandem", "--tandem-name=big", "--gres=shard:1"],
        "big",
        "true",
    );
    let stderr = String::from_utf8_lossy(&big.stderr);
    println!("(b) sbatch --tandem-name=big: {}", stderr.trim());
    ensure!(
        !big.status.success() && stderr.contains("fits no GPU"),
        "{stderr}"
    );

    // (f) What a job declares reaches the engine: VGG-19 at batch 256, declared by a file
    // under the service's --model-dir, is predicted at about 25 GiB (31 GiB with the guard's
    // margin) and refused at submission, where the same job undeclared would be queued.
    std::fs::create_dir_all(cluster.dir.join("models"))?;
    std::fs::write(
        cluster.dir.join("models/vgg19-b256.json"),
        r#"{ "params_mib": 527.79, "activations_mib": 30545.92, "input_mib": 147.0,
             "batch_size": 256, "gflops": 5016.0, "conv_layers": 16, "linear_layers": 3,
             "activation_layers": 18, "other_layers": 6 }"#,
    )?;
    let declared = cluster.sbatch(
        &[
            "--tandem",
            "--tandem-name=vgg",
            "--tandem-model=file:vgg19-b256.json",
            "--tandem-priority=latency",
            "--tandem-work=90m on V100",
            "--gres=shard:1",
        ],
        "vgg",
        "true",
    );
    let stderr = String::from_utf8_lossy(&declared.stderr);
    println!(
        "(f) sbatch --tandem-model=file:vgg19-b256.json: {}",
        stderr.trim()
    );
    ensure!(
        !declared.status.success() && stderr.contains("fits no GPU") && stderr.contains("MiB"),
        "{stderr}"
    );
    // (g) A declaration the service refuses fails the submission, naming the option.
    for (option, value) in [
        ("--tandem-priority", "fastest"),
        ("--tandem-work", "a while"),
        ("--tandem-model", "resnet50"),
    ] {
        let bad = cluster.sbatch(
            &["--tandem", &format!("{option}={value}"), "--gres=shard:1"],
            "bad-declaration",
            "true",
        );
        let stderr = String::from_utf8_lossy(&bad.stderr);
        println!("(g) sbatch {option}={value}: {}", stderr.trim());
        ensure!(
            !bad.status.success() && stderr.contains(option) && stderr.contains(value),
            "{stderr}"
        );
    }

    // (a) Residents, then two jobs: each gets the GPU the engine prefers.
    let mut residents = Vec::new();
    for name in ["light", "heavy"] {
        let job = Cluster::job_id(&cluster.sbatch(
            &[
                "--tandem",
                &format!("--tandem-name={name}"),
                "--gres=shard:1",
            ],
            name,
            "echo CVD=$CUDA_VISIBLE_DEVICES; sleep 300",
        ))?;
        wait_state(&cluster, job, &["RUNNING"])?;
        residents.push(job);
    }
    for name in ["p", "q"] {
        let job = Cluster::job_id(&cluster.sbatch(
            &[
                "--tandem",
                &format!("--tandem-name={name}"),
                "--gres=shard:1",
            ],
            name,
            "echo CVD=$CUDA_VISIBLE_DEVICES; sleep 2",
        ))?;
        wait_state(&cluster, job, &["COMPLETED", "GONE"])?;
        wait_for("the job's output", Duration::from_secs(20), || {
            Ok(output_of(&cluster, name).contains("CVD="))
        })?;
        let printed = output_of(&cluster, name);
        let placement = cluster.placement_of(job)?;
        let chosen = placement["gpu"].as_str().unwrap_or_default().to_owned();
        println!(
            "(a) job {name}: printed {}; placed on {chosen}",
            printed.trim()
        );
        let mut best = (0, String::new());
        for alt in placement["alternatives"].as_array().into_iter().flatten() {
            let gpu = alt["gpu"].as_str().unwrap_or_default();
            let score = alt["score"].as_u64().unwrap_or(0);
            println!(
                "    {gpu}: score {score}, residents {}, prediction {}",
                alt["residents"].as_array().map_or(0, Vec::len),
                alt["prediction"]
            );
            if score > best.0 {
                best = (score, gpu.to_owned());
            }
        }
        ensure!(
            best.1 == chosen,
            "{name}: the best-scored GPU is {}, placed on {chosen}",
            best.1
        );
        let index = placement["index"].as_u64().unwrap_or(99);
        ensure!(
            printed.contains(&format!("CVD={index}\n")),
            "{name} printed {printed:?}, Tandem chose GPU {index}"
        );
    }
    let light = cluster.placement_of(residents[0])?["gpu"].clone();
    let p = cluster.placements()?["placements"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|x| x["job"].as_str() == Some(&key("p")))
        .map(|x| x["gpu"].clone());
    println!("(a) residents: light on {light}; p went to {p:?}");
    for job in &residents {
        cluster.slurm("scancel", &[&job.to_string()]);
        wait_state(&cluster, *job, &["GONE", "CANCELLED", "COMPLETED"])?;
    }

    // (d) Two jobs alone (solo history), then together: an outcome is learned.
    let learned_before = metric(&cluster, "tandem_outcomes_learned_total")?;
    for name in ["s1", "s2"] {
        let job = Cluster::job_id(&cluster.sbatch(
            &[
                "--tandem",
                &format!("--tandem-name={name}"),
                "--gres=shard:1",
            ],
            name,
            "sleep 3",
        ))?;
        wait_state(&cluster, job, &["COMPLETED", "GONE"])?;
    }
    let mut pair = Vec::new();
    for name in ["s1", "s2"] {
        pair.push(Cluster::job_id(&cluster.sbatch(
            &[
                "--tandem=max-packing",
                &format!("--tandem-name={name}"),
                "--gres=shard:1",
            ],
            &format!("{name}-pair"),
            "sleep 6",
        ))?);
    }
    for job in &pair {
        wait_state(&cluster, *job, &["COMPLETED", "GONE"])?;
    }
    let gpus: Vec<_> = pair
        .iter()
        .map(|j| cluster.placement_of(*j).map(|p| p["gpu"].clone()))
        .collect::<Result<_, _>>()?;
    println!("(d) the pair ran on {gpus:?}");
    wait_for("an outcome to be learned", Duration::from_secs(20), || {
        Ok(metric(&cluster, "tandem_outcomes_learned_total")? > learned_before)
    })?;
    let (_, knowledge) = http(cluster.port, "GET", "/v1/knowledge", "")?;
    println!(
        "(d) tandem_outcomes_learned_total {}; knowledge: {}",
        metric(&cluster, "tandem_outcomes_learned_total")?,
        &knowledge[..knowledge.len().min(400)]
    );

    // (c) Service stopped: jobs still run and the hook logs its warning; restarted, it
    // resumes from its file.
    cluster.stop_service();
    let job = Cluster::job_id(&cluster.sbatch(
        &["--tandem", "--tandem-name=p", "--gres=shard:1"],
        "failopen",
        "echo ran",
    ))?;
    wait_state(&cluster, job, &["COMPLETED", "GONE"])?;
    wait_for(
        "the fail-open job's output",
        Duration::from_secs(20),
        || Ok(output_of(&cluster, "failopen").contains("ran")),
    )?;
    let log = std::fs::read_to_string(cluster.dir.join("log/slurmctld.log"))?;
    let warning = log
        .lines()
        .find(|l| l.contains("fail-open"))
        .context("no fail-open warning in slurmctld.log")?;
    println!("(c) job {job} ran without the service; slurmctld.log: {warning}");
    cluster.start_service()?;
    let (_, resumed) = http(cluster.port, "GET", "/v1/knowledge", "")?;
    ensure!(
        resumed == knowledge,
        "the knowledge base changed across the restart"
    );
    println!("(c) restarted: /v1/knowledge is what it was before the stop");

    // What a user of the cluster may try against other users' jobs.
    // (i) A node's profiler, with root's MUNGE credential, for its own node's jobs only.
    profilers::run(&cluster)?;
    attacks::run(&cluster)?;

    // The placement hook's time per submission, as it measures itself (held jobs never run).
    let before = std::fs::read_to_string(cluster.dir.join("log/slurmctld.log"))?
        .lines()
        .count();
    let mut held = Vec::new();
    for i in 0..40 {
        held.push(Cluster::job_id(&cluster.sbatch(
            &["--tandem", "--hold", "--gres=shard:1"],
            &format!("held{i}"),
            "true",
        ))?);
    }
    let log = std::fs::read_to_string(cluster.dir.join("log/slurmctld.log"))?;
    let mut times: Vec<f64> = log
        .lines()
        .skip(before)
        .filter(|l| l.contains("tandem: "))
        .filter_map(|l| {
            let at = l.find(" in ")?;
            l[at + 4..].split_whitespace().next()?.parse().ok()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    ensure!(
        times.len() >= 30,
        "only {} hook timings logged",
        times.len()
    );
    let pct = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "placement hook per submission ({} submissions): p50 {:.3} ms, p99 {:.3} ms",
        times.len(),
        pct(0.5),
        pct(0.99)
    );
    let ids: Vec<String> = held.iter().map(u32::to_string).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    cluster.slurm("scancel", &ids);
    attacks::credential_cost(&cluster)?;

    // (h) A cluster without MUNGE: the hook and the plugin present client certificates.
    mtls::run(&mut cluster)?;
    Ok(())
}
