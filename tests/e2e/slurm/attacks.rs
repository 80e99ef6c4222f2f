//! What a user of the cluster may try against Tandem's Slurm service, on the real cluster: two
//! unprivileged users are created, `tandem-alice` (whose jobs are the victims) and
//! `tandem-mallory` (who attacks them from the same machine, a login and a compute node at
//! once here). Every attack must be refused and leave the victims' placements as they were;
//! the suite reports every one that went through, then fails.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use anyhow::{Context as _, ensure};

use super::{Cluster, key_of, request};

const VICTIM: &str = "tandem-alice";
pub const ATTACKER: &str = "tandem-mallory";

/// A Slurm job id no job has (ids are far lower on the test's cluster).
const NO_JOB: u64 = 4_000_000_000;

/// `user`'s uid, creating the user if it does not exist.
pub fn user(name: &str) -> anyhow::Result<u32> {
    let id = |name: &str| {
        Command::new("id")
            .args(["-u", name])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
    };
    if let Some(uid) = id(name) {
        return Ok(uid);
    }
    let status = Command::new("useradd")
        .args(["--system", "--no-create-home", "--shell", "/bin/sh", name])
        .status()?;
    ensure!(status.success(), "useradd {name} failed");
    id(name).with_context(|| format!("{name} has no uid after useradd"))
}

/// Runs `program` as `user` in /tmp with the cluster's slurm.conf.
fn as_user(cluster: &Cluster, user: &str, program: &str, args: &[&str]) -> Output {
    Command::new("runuser")
        .args(["-u", user, "--", "env"])
        .arg(format!("SLURM_CONF={}", cluster.conf().display()))
        .arg(program)
        .args(args)
        .current_dir("/tmp")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} as {user}: {e}"))
}

/// The placement token job_submit.lua left in a (held) batch job's environment, as slurmctld
/// saved it: what its user's job would present to the plugin.
fn token_in_environment(cluster: &Cluster, job: u32) -> anyhow::Result<String> {
    for hash in std::fs::read_dir(cluster.dir.join("state"))? {
        let file = hash?.path().join(format!("job.{job}/environment"));
        if let Ok(bytes) = std::fs::read(&file) {
            let text = String::from_utf8_lossy(&bytes);
            if let Some(at) = text.find("TANDEM_PLACEMENT=") {
                let rest = &text[at + "TANDEM_PLACEMENT=".len()..];
                return Ok(rest
                    .split(['\0', '\n'])
                    .next()
                    .unwrap_or_default()
                    .to_owned());
            }
        }
    }
    anyhow::bail!("no TANDEM_PLACEMENT in job {job}'s saved environment")
}

/// The placement (root's operator view) of the job keyed `keyed`.
fn placement_keyed(cluster: &Cluster, keyed: &str) -> anyhow::Result<serde_json::Value> {
    let all = cluster.placements()?;
    all["placements"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["job"].as_str() == Some(keyed))
        .cloned()
        .with_context(|| format!("no placement of {keyed}"))
}

/// Collects what went through.
struct Verdicts(Vec<String>);

impl Verdicts {
    /// Records one attack: `refused` says whether it was, `seen` what the service did.
    fn check(&mut self, attack: &str, refused: bool, seen: &str) {
        let seen = seen.trim();
        if refused {
            println!("(attack) {attack}: refused: {seen}");
        } else {
            println!("(attack) {attack}: WENT THROUGH: {seen}");
            self.0.push(format!("{attack}: {seen}"));
        }
    }

    /// An HTTP attack, refused when answered `status` with `words` in its message.
    fn answered(&mut self, attack: &str, got: (u16, String), status: u16, words: &str) {
        let refused = got.0 == status && got.1.contains(words);
        self.check(attack, refused, &format!("{} {}", got.0, got.1));
    }
}

/// Runs the attacks, against jobs of their own: alice's, held, and root's, running.
pub fn run(cluster: &Cluster) -> anyhow::Result<()> {
    let alice = user(VICTIM)?;
    let mallory = user(ATTACKER)?;
    let host = String::from_utf8(Command::new("hostname").arg("-s").output()?.stdout)?
        .trim()
        .to_owned();
    let mut verdicts = Verdicts(Vec::new());

    // Root's jobs, running on their GPUs (known to the engine: the suite posted their profiles).
    let mut residents = Vec::new();
    for name in ["light", "heavy"] {
        let job = Cluster::job_id(&cluster.sbatch(
            &[
                "--tandem",
                &format!("--tandem-name={name}"),
                "--gres=shard:1",
            ],
            &format!("attacked-{name}"),
            "sleep 300",
        ))?;
        super::wait_state(cluster, job, &["RUNNING"])?;
        residents.push(job);
    }
    super::wait_for(
        "root's jobs to start placed",
        std::time::Duration::from_secs(20),
        || {
            Ok(residents
                .iter()
                .all(|job| cluster.placement_of(*job).is_ok()))
        },
    )?;

    // The victims: two of alice's jobs, held, so placed at submission and waiting to start
    // (light ones, known to the engine, so that they fit beside the residents).
    let profile = |name: &str| {
        serde_json::json!({"job": key_of(alice, name), "profile": {
            "gpu_util_pct": 5.0, "mem_access_pct": 2.0, "mem_used_mib": 1000, "gpu_model": "V100"}})
    };
    let profiles = serde_json::json!({"profiles": [profile("victim1"), profile("victim2")]});
    let (status, answer) =
        super::http(cluster.port, "POST", "/v1/profiles", &profiles.to_string())?;
    ensure!(status == 200, "alice's profiles: {status} {answer}");
    let mut held = Vec::new();
    for name in ["victim1", "victim2"] {
        let out = as_user(
            cluster,
            VICTIM,
            "sbatch",
            &[
                "--parsable",
                "--hold",
                "--tandem",
                &format!("--tandem-name={name}"),
                "--gres=shard:1",
                "--output=/dev/null",
                "--wrap=true",
            ],
        );
        held.push(Cluster::job_id(&out).context("alice's sbatch")?);
    }
    let victim1 = key_of(alice, "victim1");
    let victim2 = key_of(alice, "victim2");
    placement_keyed(cluster, &victim1).context("alice's job was not placed at submission")?;

    // (a) The hijack. Mallory lists the placements with her own credential, and takes alice's
    // token from the list (or, where the list is refused, from anywhere else it leaked).
    let listed = cluster.verb_as(Some(ATTACKER), "GET", "/v1/slurm/placements", "")?;
    let leaked = serde_json::from_str::<serde_json::Value>(&listed.1)
        .ok()
        .and_then(|all| {
            all["placements"]
                .as_array()?
                .iter()
                .find(|p| p["job"].as_str() == Some(&victim1))?["token"]
                .as_str()
                .map(str::to_owned)
        });
    verdicts.check(
        "(a) mallory lists the placements and reads alice's token",
        listed.0 == 403 && leaked.is_none(),
        &format!("{} {}", listed.0, &listed.1[..listed.1.len().min(300)]),
    );
    let token1 = match leaked {
        Some(token) => token,
        None => token_in_environment(cluster, held[0])?,
    };
    // She claims alice's placement for a job of her own, saying it is alice's.
    let hijack = format!("job={NO_JOB}\nnode={host}\nuid={alice}\nname=hijack\ntoken={token1}\n");
    let got = cluster.verb_as(Some(ATTACKER), "POST", "/v1/slurm/start", &hijack)?;
    verdicts.answered(
        "(a) mallory starts a job with alice's placement token",
        got,
        403,
        &format!("uid {mallory}"),
    );
    let after = placement_keyed(cluster, &victim1)?;
    verdicts.check(
        "(a) alice's placement after the direct hijack",
        after["slurm_job"].is_null(),
        &format!("slurm_job {}", after["slurm_job"]),
    );

    // The same through Slurm itself: her srun job presents alice's other token as its own
    // (the plugin reads TANDEM_PLACEMENT from the job's environment, which she sets).
    let token2 = token_in_environment(cluster, held[1])?;
    let out = as_user(
        cluster,
        ATTACKER,
        "env",
        &[
            &format!("TANDEM_PLACEMENT={token2}"),
            "srun",
            "--tandem",
            "--tandem-name=hijack",
            "--gres=shard:1",
            "-t",
            "1",
            "sh",
            "-c",
            "echo JOB=$SLURM_JOB_ID CVD=$CUDA_VISIBLE_DEVICES",
        ],
    );
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    ensure!(
        out.status.success(),
        "mallory's srun failed: {printed} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = placement_keyed(cluster, &victim2)?;
    verdicts.check(
        "(a) mallory's srun job presents alice's token to the SPANK plugin",
        after["slurm_job"].is_null(),
        &format!(
            "the job printed `{printed}`; alice's placement: slurm_job {}",
            after["slurm_job"]
        ),
    );

    // (b) Mallory ends root's running job in Tandem's view (its GPU would then look free).
    let light = residents[0];
    let got = cluster.verb_as(
        Some(ATTACKER),
        "POST",
        "/v1/slurm/finish",
        &format!("job={light}\nuid=0\nelapsed=1\n"),
    )?;
    verdicts.answered(
        "(b) mallory finishes root's running job",
        got,
        403,
        &format!("uid {mallory}"),
    );
    let heavy = residents[1];
    // Slurm's own credential, with a run time no job of this cluster has had.
    let got = cluster.verb_as(
        None,
        "POST",
        "/v1/slurm/finish",
        &format!("job={heavy}\nuid=0\nelapsed=1000000000\n"),
    )?;
    verdicts.answered(
        "(b) a finish with a run time of 31 years",
        got,
        400,
        "`elapsed`",
    );
    let got = cluster.verb_as(
        None,
        "POST",
        "/v1/slurm/finish",
        &format!("job={heavy}\nuid=0\nelapsed=-5\n"),
    )?;
    verdicts.answered(
        "(b) a finish with a negative run time",
        got,
        400,
        "`elapsed`",
    );

    // Credentials: none, one replayed, one lifted onto another request, a user's on a verb
    // that is Slurm's.
    let unknown = format!("job={NO_JOB}\n");
    let got = request(cluster.port, "POST", "/v1/slurm/finish", &unknown, &[])?;
    verdicts.answered(
        "a request without a credential",
        got,
        401,
        "need a MUNGE credential",
    );
    let credential = cluster.credential(None, "POST", "/v1/slurm/finish", &unknown)?;
    let header = format!("MUNGE {credential}");
    let first = request(
        cluster.port,
        "POST",
        "/v1/slurm/finish",
        &unknown,
        &[&header],
    )?;
    ensure!(
        first.0 == 200,
        "a fresh credential of root's was refused: {first:?}"
    );
    let again = request(
        cluster.port,
        "POST",
        "/v1/slurm/finish",
        &unknown,
        &[&header],
    )?;
    verdicts.answered("a replayed credential", again, 401, "Replayed");
    let credential = cluster.credential(None, "POST", "/v1/slurm/finish", &unknown)?;
    let lifted = format!("job={light}\nuid=0\nelapsed=1\n");
    let got = request(
        cluster.port,
        "POST",
        "/v1/slurm/finish",
        &lifted,
        &[&format!("MUNGE {credential}")],
    )?;
    verdicts.answered(
        "a credential lifted onto another request",
        got,
        401,
        "made for another request",
    );
    let got = cluster.verb_as(
        Some(ATTACKER),
        "POST",
        "/v1/slurm/submit",
        &format!("uid={alice}\nname=squatter\n"),
    )?;
    verdicts.answered(
        "mallory submits in alice's name",
        got,
        403,
        "submit is job_submit.lua's verb",
    );

    // Model files: the directory is one the users write to; mallory puts a link out of it
    // (to a summary outside, standing for any file the service may read) and a FIFO in it.
    let models = cluster.dir.join("models");
    let outside = cluster.dir.join("outside");
    std::fs::create_dir_all(&outside)?;
    std::fs::copy(models.join("vgg19-b256.json"), outside.join("vgg19.json"))?;
    let chmod = |path: &Path, mode: &str| {
        Command::new("chmod")
            .arg(mode)
            .arg(path)
            .status()
            .map(|s| s.success())
    };
    ensure!(chmod(&models, "1777")? && chmod(&outside, "755")?, "chmod");
    let link = models.join("outside.json");
    let fifo = models.join("pipe.json");
    let _ = std::fs::remove_file(&link);
    let _ = std::fs::remove_file(&fifo);
    let made = as_user(
        cluster,
        ATTACKER,
        "ln",
        &[
            "-s",
            &outside.join("vgg19.json").display().to_string(),
            &link.display().to_string(),
        ],
    );
    ensure!(made.status.success(), "ln as mallory failed");
    let made = as_user(cluster, ATTACKER, "mkfifo", &[&fifo.display().to_string()]);
    ensure!(made.status.success(), "mkfifo as mallory failed");
    let sbatch_model = |model: &str| {
        as_user(
            cluster,
            ATTACKER,
            "sbatch",
            &[
                "--parsable",
                "--tandem",
                &format!("--tandem-model=file:{model}"),
                "--gres=shard:1",
                "--output=/dev/null",
                "--wrap=true",
            ],
        )
    };
    let out = sbatch_model("outside.json");
    let stderr = String::from_utf8_lossy(&out.stderr);
    verdicts.check(
        "mallory's model file links out of the model directory",
        !out.status.success() && stderr.contains("leads outside the model directory"),
        &format!("sbatch {}: {}", out.status, stderr.trim()),
    );
    let out = sbatch_model("pipe.json");
    let stderr = String::from_utf8_lossy(&out.stderr);
    verdicts.check(
        "mallory's model file is a FIFO",
        !out.status.success() && stderr.contains("is not a regular file"),
        &format!("sbatch {}: {}", out.status, stderr.trim()),
    );
    // Whatever opened the FIFO (a service that blocks on it) gets its end, so it can stop.
    let _ = Command::new("timeout")
        .args(["2", "sh", "-c"])
        .arg(format!("echo '{{}}' > {}", fifo.display()))
        .status();

    // The victims are as they were, and the residents still hold their GPUs.
    for (keyed, name) in [(&victim1, "victim1"), (&victim2, "victim2")] {
        let p = placement_keyed(cluster, keyed)?;
        verdicts.check(
            &format!("alice's {name} after every attack"),
            p["slurm_job"].is_null() && p["end"].is_null(),
            &format!("slurm_job {}, end {}", p["slurm_job"], p["end"]),
        );
    }
    for job in &residents {
        let p = cluster.placement_of(*job)?;
        verdicts.check(
            &format!("root's running job {job} after every attack"),
            p["end"].is_null(),
            &format!("end {}", p["end"]),
        );
    }

    let ids: Vec<String> = held.iter().chain(&residents).map(u32::to_string).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    cluster.slurm("scancel", &ids);
    ensure!(
        verdicts.0.is_empty(),
        "{} attacks went through:\n  {}",
        verdicts.0.len(),
        verdicts.0.join("\n  ")
    );
    Ok(())
}

/// What checking a MUNGE credential costs a request: the round trip of an authenticated verb
/// (a `finish` of no job, the cheapest there is; its credential made beforehand) beside that of
/// `/healthz`, which checks nothing. Prints the medians.
pub fn credential_cost(cluster: &Cluster) -> anyhow::Result<()> {
    let body = format!("job={NO_JOB}\n");
    let mut verb = Vec::new();
    let mut probe = Vec::new();
    for _ in 0..40 {
        let credential = cluster.credential(None, "POST", "/v1/slurm/finish", &body)?;
        let started = Instant::now();
        let got = request(
            cluster.port,
            "POST",
            "/v1/slurm/finish",
            &body,
            &[&format!("MUNGE {credential}")],
        )?;
        verb.push(started.elapsed().as_secs_f64() * 1000.0);
        ensure!(got.0 == 200, "{got:?}");
        let started = Instant::now();
        request(cluster.port, "GET", "/healthz", "", &[])?;
        probe.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (verb, probe) = (median(&mut verb), median(&mut probe));
    println!(
        "MUNGE credential check: an authenticated finish {verb:.2} ms, /healthz {probe:.2} ms \
         (median round trips of 40): about {:.2} ms per request",
        verb - probe
    );
    Ok(())
}
