//! Tandem's SPANK plugin, `libtandem_slurm.so`.
//!
//! Slurm loads it into `srun`, `sbatch`, `salloc` and `slurmstepd` from `plugstack.conf`:
//!
//! ```text
//! required /usr/lib/tandem/libtandem_slurm.so service=127.0.0.1:8889 timeout_ms=1000
//! ```
//!
//! - **Options**: `--tandem[=OBJECTIVE]` (share a GPU the way Tandem recommends; `balanced`,
//!   `min-slowdown` or `max-packing`, the service's default when left out) and
//!   `--tandem-name=NAME` (the name of a recurring job, so its earlier runs inform this one).
//!   `--tandem-priority`, `--tandem-work`, `--tandem-model` and `--tandem-batch-size` declare
//!   what the job is (docs/DECLARING.md: the same vocabulary as the Kubernetes annotations);
//!   the service checks them at submission and refuses a bad one naming the option.
//!   All appear in `srun --help`, `sbatch --help` and `salloc --help`. A bad objective or name
//!   fails the submission here, with a message naming it. Valid ones are passed to slurmctld's
//!   `job_submit.lua` in the job-control environment (`SPANK_TANDEM`, `SPANK_TANDEM_NAME`,
//!   `SPANK_TANDEM_PRIORITY`, ...), which is where the node is chosen: SPANK itself cannot
//!   choose nodes.
//! - **On the node** (remote context, once per job step): asks the service which of the node's
//!   GPUs the job gets, with the placement token the hook left in the job's environment
//!   (`TANDEM_PLACEMENT`), and sets `CUDA_VISIBLE_DEVICES` (and
//!   `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` when the service is configured for MPS) for every task.
//! - **At exit** of the job's main step: reports its run time, from which the service learns
//!   solo times and co-location outcomes.
//!
//! Everything the plugin does on the node fails open: the service down or slow leaves the job
//! with what Slurm gave it, and a line in slurmd's log. The plugin is built for the Slurm
//! release whose headers it was compiled against ([`SLURM_VERSION_NUMBER`]); rebuild it for
//! every Slurm upgrade.

use std::ffi::{CStr, CString, c_char, c_int, c_uint};
use std::io::{Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use slurm_spank::spank_sys;

include!(concat!(env!("OUT_DIR"), "/slurm_version.rs"));

/// Name of the plugin, as Slurm reads it.
#[unsafe(no_mangle)]
pub static plugin_name: [u8; 7] = *b"tandem\0";

/// Kind of plugin, as Slurm reads it.
#[unsafe(no_mangle)]
pub static plugin_type: [u8; 6] = *b"spank\0";

/// Slurm release the plugin was built for; the loader refuses any other.
#[unsafe(no_mangle)]
pub static plugin_version: c_uint = SLURM_VERSION_NUMBER;

/// SPANK API version, as `SPANK_PLUGIN` in <slurm/spank.h> sets it.
#[unsafe(no_mangle)]
pub static spank_plugin_version: c_uint = SLURM_VERSION_NUMBER;

/// The objectives `--tandem=` accepts.
pub const OBJECTIVES: [&str; 3] = ["balanced", "min-slowdown", "max-packing"];

/// Step id of a batch script (`SLURM_BATCH_SCRIPT` in <slurm/slurm.h>).
const BATCH_STEP: u32 = 0xffff_fffb;

/// Where the service is, from the plugin's arguments in `plugstack.conf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `HOST:PORT` of tandem-slurm-adapter.
    pub service: String,
    /// Longest a call to it may take.
    pub timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            service: "127.0.0.1:8889".into(),
            timeout: Duration::from_millis(1000),
        }
    }
}

impl Config {
    /// Reads `service=HOST:PORT` and `timeout_ms=N`; names anything else.
    pub fn parse<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut config = Self::default();
        for arg in args {
            match arg.split_once('=') {
                Some(("service", v)) if !v.is_empty() => config.service = v.to_owned(),
                Some(("timeout_ms", v)) => {
                    let ms: u64 = v
                        .parse()
                        .map_err(|_| format!("tandem: timeout_ms={v} is not a number"))?;
                    config.timeout = Duration::from_millis(ms.max(1));
                }
                _ => {
                    return Err(format!(
                        "tandem: unknown argument `{arg}` in plugstack.conf (expected service=HOST:PORT or timeout_ms=N)"
                    ));
                }
            }
        }
        Ok(config)
    }
}

/// Checks the value of `--tandem`: absent (the service's default) or an objective.
pub fn check_objective(value: Option<&str>) -> Result<(), String> {
    match value {
        None | Some("") => Ok(()),
        Some(v) if OBJECTIVES.contains(&v) => Ok(()),
        Some(v) => Err(format!(
            "--tandem: unknown objective '{v}' (expected balanced, min-slowdown or max-packing)"
        )),
    }
}

/// Checks the value of `--tandem-name`, as the service does.
pub fn check_name(name: &str) -> Result<(), String> {
    let fine = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '~'));
    if fine {
        Ok(())
    } else {
        Err(format!(
            "--tandem-name: '{name}' is not a name of 1 to 64 letters, digits, '.', '_', '-' or '~'"
        ))
    }
}

/// What the service granted a starting job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// The CUDA index of the GPU, and the MPS thread percentage when MPS is configured.
    Gpu(u32, Option<u32>),
    /// None, for this reason.
    None(String),
}

/// Reads the service's answer to `start`.
pub fn parse_grant(answer: &str) -> Result<Grant, String> {
    let line = answer.trim();
    let mut words = line.split_whitespace();
    match words.next() {
        Some("gpu") => {
            let index = words
                .next()
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| format!("no GPU index in `{line}`"))?;
            let mps = words.next().and_then(|w| w.parse().ok());
            Ok(Grant::Gpu(index, mps))
        }
        Some("none") => Ok(Grant::None(
            line.strip_prefix("none").unwrap_or_default().trim().into(),
        )),
        _ => Err(format!("unexpected answer `{line}`")),
    }
}

/// POSTs `body` to `path` on the service and returns the answer's body (HTTP/1.0, so the
/// server closes the connection and no client library is needed inside slurmstepd).
pub fn post(config: &Config, path: &str, body: &str) -> Result<String, String> {
    let address = config
        .service
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", config.service))?
        .next()
        .ok_or_else(|| format!("{} resolves to no address", config.service))?;
    let started = Instant::now();
    let mut stream = TcpStream::connect_timeout(&address, config.timeout)
        .map_err(|e| format!("cannot connect to {address}: {e}"))?;
    let left = config
        .timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1));
    let io = |e: std::io::Error| format!("{address}{path}: {e}");
    stream.set_read_timeout(Some(left)).map_err(io)?;
    stream.set_write_timeout(Some(left)).map_err(io)?;
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        config.service,
        body.len()
    )
    .map_err(io)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(io)?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{address}{path}: not an HTTP answer"))?;
    let status = head.split_whitespace().nth(1).unwrap_or_default();
    if status != "200" {
        return Err(format!(
            "{address}{path} answered {status}: {}",
            body.trim()
        ));
    }
    Ok(body.to_owned())
}

/// What the plugin keeps between the callbacks of one process.
#[derive(Debug, Default)]
struct State {
    config: Config,
    /// `Some(value)` once `--tandem` was given (`value` empty without `=OBJECTIVE`).
    tandem: Option<String>,
    name: Option<String>,
    /// What the job declared, by option ([`DECLARATIONS`]), in the order given.
    declared: Vec<(c_int, String)>,
    /// The job (and step) the service granted a GPU, when.
    started: Option<(u32, u32, Instant)>,
    grant: Option<(u32, Option<u32>)>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn with_state<T>(work: impl FnOnce(&mut State) -> T) -> T {
    // A panic elsewhere must not leave every later job without the plugin.
    let mut guard = STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    work(guard.get_or_insert_with(State::default))
}

/// Index of each option in the callback's `val`.
const OPT_TANDEM: c_int = 1;
const OPT_NAME: c_int = 2;

/// The declaration options: the callback's `val`, the option, what `--help` shows, and the
/// job-control variable that carries it to job_submit.lua.
pub const DECLARATIONS: [(c_int, &CStr, &CStr, &CStr, &CStr); 4] = [
    (
        3,
        c"tandem-priority",
        c"priority",
        c"What this job's user cares about most, for Tandem: latency, cost or energy",
        c"TANDEM_PRIORITY",
    ),
    (
        4,
        c"tandem-work",
        c"work",
        c"The work of one run, for Tandem: `90m on V100`, or `50000 steps at 12.5/s on V100`",
        c"TANDEM_WORK",
    ),
    (
        5,
        c"tandem-model",
        c"model",
        c"The job's model, for Tandem: a summary as JSON (tandem declare --format json) or file:PATH under the service's model directory",
        c"TANDEM_MODEL",
    ),
    (
        6,
        c"tandem-batch-size",
        c"n",
        c"The batch size of an ONNX file given with --tandem-model=file:PATH",
        c"TANDEM_BATCH_SIZE",
    ),
];

/// Checks a declaration's value as far as the hook needs: one line (the service checks the
/// rest and names the option when it refuses).
pub fn check_declared(option: &str, value: &str) -> Result<(), String> {
    if value.contains(['\n', '\r']) {
        return Err(format!("--{option}: the value must be one line"));
    }
    if value.trim().is_empty() {
        return Err(format!("--{option}: the value is empty"));
    }
    Ok(())
}

mod ffi;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_objectives_names_and_answers_are_checked() {
        let config = Config::parse(["service=10.0.0.1:9000", "timeout_ms=250"]).unwrap();
        assert_eq!(config.service, "10.0.0.1:9000");
        assert_eq!(config.timeout, Duration::from_millis(250));
        assert!(Config::parse(["url=x"]).unwrap_err().contains("url=x"));
        assert!(check_objective(None).is_ok());
        assert!(check_objective(Some("max-packing")).is_ok());
        let bad = check_objective(Some("fastest")).unwrap_err();
        assert!(bad.contains("'fastest'"), "{bad}");
        assert!(check_name("resnet~2").is_ok());
        assert!(check_name("a b").is_err());
        assert!(check_declared("tandem-priority", "cost").is_ok());
        let multi = check_declared("tandem-model", "{\n}").unwrap_err();
        assert!(
            multi.contains("--tandem-model") && multi.contains("one line"),
            "{multi}"
        );
        assert!(check_declared("tandem-work", " ").is_err());
        assert_eq!(parse_grant("gpu 1\n"), Ok(Grant::Gpu(1, None)));
        assert_eq!(parse_grant("gpu 0 50"), Ok(Grant::Gpu(0, Some(50))));
        assert_eq!(parse_grant("none busy"), Ok(Grant::None("busy".into())));
        assert!(parse_grant("what").is_err());
    }

    #[test]
    fn a_service_that_is_down_is_an_error_not_a_hang() {
        // A port nothing listens on (bound, then released).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = Config {
            service: format!("127.0.0.1:{port}"),
            timeout: Duration::from_millis(200),
        };
        let error = post(&config, "/v1/slurm/start", "job=1").unwrap_err();
        assert!(error.contains("cannot connect"), "{error}");
    }
}
