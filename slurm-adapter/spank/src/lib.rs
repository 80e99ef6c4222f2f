//! Tandem's SPANK plugin, `libtandem_slurm.so`.
//!
//! Slurm loads it into `srun`, `sbatch`, `salloc` and `slurmstepd` from `plugstack.conf`:
//!
//! ```text
//! required /usr/lib/tandem/libtandem_slurm.so service=127.0.0.1:8889 timeout_ms=1000
//! ```
//!
//! Its arguments: `service=HOST:PORT`, `timeout_ms=N` (the whole of one call to the service,
//! the credential included), and how it proves to the service that it is Slurm:
//! `auth=munge` (the default: a fresh MUNGE credential bound to each request, made by
//! `munge=PATH`, `munge_socket=PATH`) or `auth=none` (for a service started with
//! `--insecure-open-verbs`).
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
//! - **On the node** (remote context, once per job step, in slurmstepd as root, before the
//!   step's privileges are dropped): asks the service which of the node's GPUs the job gets,
//!   with the job's user as Slurm knows it (`S_JOB_UID`) and the placement token the hook left
//!   in the job's environment (`TANDEM_PLACEMENT`; the service gives a token's GPU only to a job
//!   of the user it was made for), and sets `CUDA_VISIBLE_DEVICES` (and
//!   `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` when the service is configured for MPS) for every task.
//!   Its MUNGE credential is root's: only Slurm may ask.
//! - **At exit** of the job's main step: reports its run time, from which the service learns
//!   solo times and co-location outcomes.
//!
//! The service's answer is read within one deadline for the whole call (not per read) and at
//! most [`MAX_ANSWER`] bytes of it.
//!
//! Everything the plugin does on the node fails open: the service down or slow leaves the job
//! with what Slurm gave it, and a line in slurmd's log. The plugin is built for the Slurm
//! release whose headers it was compiled against ([`SLURM_VERSION_NUMBER`]); rebuild it for
//! every Slurm upgrade.

use std::ffi::{CStr, CString, c_char, c_int, c_uint};
use std::path::PathBuf;
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

/// How the plugin proves to the service that it is Slurm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// A MUNGE credential bound to each request, made by `munge` at this socket.
    Munge {
        /// munge's `munge`.
        program: PathBuf,
        /// munged's socket, if not munge's default.
        socket: Option<PathBuf>,
    },
    /// The client certificate of [`Config::tls`] (a service run with `--auth
    /// client-certificate`).
    Certificate,
    /// Nothing (a service started with `--insecure-open-verbs`).
    None,
}

/// HTTPS to the service: the CA its certificate is checked against, and the plugin's own
/// certificate and key when it presents one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA certificates (PEM) of the service's certificate (`tls_ca=`).
    pub ca: PathBuf,
    /// The plugin's client certificate (PEM, `tls_cert=`).
    pub cert: Option<PathBuf>,
    /// Its key (PEM, `tls_key=`).
    pub key: Option<PathBuf>,
    /// The name the service's certificate must carry (`tls_name=`; the host of `service=`
    /// without it).
    pub name: Option<String>,
}

/// Where the service is and how to call it, from the plugin's arguments in `plugstack.conf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `HOST:PORT` of tandem-slurm-adapter.
    pub service: String,
    /// Longest a call to it may take, all of it.
    pub timeout: Duration,
    /// How the plugin proves it is Slurm.
    pub auth: Auth,
    /// HTTPS, if `tls_ca=` is given.
    pub tls: Option<TlsFiles>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            service: "127.0.0.1:8889".into(),
            timeout: Duration::from_millis(1000),
            auth: Auth::Munge {
                program: "munge".into(),
                socket: None,
            },
            tls: None,
        }
    }
}

impl Config {
    /// Reads `service=HOST:PORT`, `timeout_ms=N`, `auth=munge|certificate|none`,
    /// `munge=PATH`, `munge_socket=PATH`, `tls_ca=PEM`, `tls_cert=PEM`, `tls_key=PEM` and
    /// `tls_name=NAME`; names anything else.
    pub fn parse<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut config = Self::default();
        let mut auth = "munge".to_owned();
        let mut program = PathBuf::from("munge");
        let mut socket = None;
        let (mut ca, mut cert, mut key, mut name) = (None, None, None, None);
        for arg in args {
            match arg.split_once('=') {
                Some(("service", v)) if !v.is_empty() => config.service = v.to_owned(),
                Some(("timeout_ms", v)) => {
                    let ms: u64 = v
                        .parse()
                        .map_err(|_| format!("tandem: timeout_ms={v} is not a number"))?;
                    config.timeout = Duration::from_millis(ms.max(1));
                }
                Some(("auth", v)) => auth = v.to_owned(),
                Some(("munge", v)) if !v.is_empty() => program = v.into(),
                Some(("munge_socket", v)) if !v.is_empty() => socket = Some(v.into()),
                Some(("tls_ca", v)) if !v.is_empty() => ca = Some(PathBuf::from(v)),
                Some(("tls_cert", v)) if !v.is_empty() => cert = Some(PathBuf::from(v)),
                Some(("tls_key", v)) if !v.is_empty() => key = Some(PathBuf::from(v)),
                Some(("tls_name", v)) if !v.is_empty() => name = Some(v.to_owned()),
                _ => {
                    return Err(format!(
                        "tandem: unknown argument `{arg}` in plugstack.conf (expected \
                         service=HOST:PORT, timeout_ms=N, auth=munge|certificate|none, \
                         munge=PATH, munge_socket=PATH, tls_ca=PEM, tls_cert=PEM, tls_key=PEM \
                         or tls_name=NAME)"
                    ));
                }
            }
        }
        if cert.is_some() != key.is_some() {
            return Err("tandem: tls_cert= and tls_key= go together in plugstack.conf".into());
        }
        config.tls = match ca {
            Some(ca) => Some(TlsFiles {
                ca,
                cert,
                key,
                name,
            }),
            None if cert.is_some() || name.is_some() => {
                return Err(
                    "tandem: tls_cert=, tls_key= and tls_name= need tls_ca= in plugstack.conf"
                        .into(),
                );
            }
            None => None,
        };
        config.auth = match auth.as_str() {
            "munge" => Auth::Munge { program, socket },
            "certificate" => {
                if config.tls.as_ref().is_none_or(|t| t.cert.is_none()) {
                    return Err(
                        "tandem: auth=certificate needs tls_ca=, tls_cert= and tls_key= \
                                in plugstack.conf"
                            .into(),
                    );
                }
                Auth::Certificate
            }
            "none" => Auth::None,
            other => {
                return Err(format!(
                    "tandem: auth={other} in plugstack.conf (expected munge, certificate or none)"
                ));
            }
        };
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

/// What the plugin keeps between the callbacks of one process.
#[derive(Debug, Default)]
struct State {
    config: Config,
    /// `Some(value)` once `--tandem` was given (`value` empty without `=OBJECTIVE`).
    tandem: Option<String>,
    name: Option<String>,
    /// What the job declared, by option ([`DECLARATIONS`]), in the order given.
    declared: Vec<(c_int, String)>,
    /// The job, its step and its user, and when it asked for its GPU.
    started: Option<(u32, u32, u32, Instant)>,
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

mod client;
mod ffi;

pub use client::{MAX_ANSWER, munge, post, read_bounded};

#[cfg(test)]
mod tests {
    use super::*;

    use std::io::Write as _;

    #[test]
    fn arguments_objectives_names_and_answers_are_checked() {
        let config = Config::parse(["service=10.0.0.1:9000", "timeout_ms=250"]).unwrap();
        assert_eq!(config.service, "10.0.0.1:9000");
        assert_eq!(config.timeout, Duration::from_millis(250));
        assert_eq!(config.auth, Config::default().auth);
        let config = Config::parse(["munge_socket=/run/m.socket", "munge=/opt/munge"]).unwrap();
        assert_eq!(
            config.auth,
            Auth::Munge {
                program: "/opt/munge".into(),
                socket: Some("/run/m.socket".into())
            }
        );
        assert_eq!(Config::parse(["auth=none"]).unwrap().auth, Auth::None);
        let tls = Config::parse([
            "auth=certificate",
            "tls_ca=/etc/tandem/ca.crt",
            "tls_cert=/etc/tandem/node.crt",
            "tls_key=/etc/tandem/node.key",
        ])
        .unwrap();
        assert_eq!(tls.auth, Auth::Certificate);
        assert_eq!(tls.tls.unwrap().ca, PathBuf::from("/etc/tandem/ca.crt"));
        let error = Config::parse(["auth=certificate", "tls_ca=/ca.crt"]).unwrap_err();
        assert!(error.contains("auth=certificate needs"), "{error}");
        let error = Config::parse(["tls_cert=/c", "tls_key=/k"]).unwrap_err();
        assert!(error.contains("need tls_ca="), "{error}");
        assert!(
            Config::parse(["auth=token"])
                .unwrap_err()
                .contains("auth=token")
        );
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
            auth: Auth::None,
            tls: None,
        };
        let error = post(&config, "/v1/slurm/start", "job=1").unwrap_err();
        assert!(error.contains("cannot connect"), "{error}");
    }

    /// A service that answers a byte at a time, or without end, is given up on at the call's
    /// deadline or at the size cap: neither holds slurmstepd past its time limit.
    #[test]
    fn a_slow_or_endless_answer_is_cut_off() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let service = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            // The first caller gets a byte every 50 ms (each read returns well within any
            // per-read timeout); the second an endless answer at full speed.
            let (mut slow, _) = listener.accept().unwrap();
            for _ in 0..100 {
                if slow.write_all(b"H").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let (mut endless, _) = listener.accept().unwrap();
            let chunk = [b'x'; 4096];
            while endless.write_all(&chunk).is_ok() {}
        });
        let config = Config {
            service,
            timeout: Duration::from_millis(300),
            auth: Auth::None,
            tls: None,
        };
        // Per-read timeouts would have read all hundred bytes and found no HTTP answer.
        let error = post(&config, "/v1/slurm/start", "job=1").unwrap_err();
        assert!(error.contains("no whole answer in time"), "{error}");
        let config = Config {
            timeout: Duration::from_secs(30),
            ..config
        };
        let error = post(&config, "/v1/slurm/start", "job=1").unwrap_err();
        assert!(error.contains("longer than 16384 bytes"), "{error}");
        server.join().unwrap();
    }
}
