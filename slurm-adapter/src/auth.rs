//! Who calls the Slurm verbs.
//!
//! The verbs decide where jobs run, which GPU they get and what Tandem learns from their ends,
//! so the service must know who calls them. Two ways, chosen with `--auth`:
//!
//! - **MUNGE** (`--auth munge`), Slurm's own credential service: every request carries
//!   `Authorization: MUNGE <credential>`, a fresh credential whose payload is the request itself
//!   (`<METHOD> <PATH>\n<body>`, [`payload`]), so that it cannot be lifted onto another request.
//!   The service has munged decode it (`unmunge`, a subprocess bounded in time and output,
//!   [`Unmunge`]), which refuses a credential decoded before (a replay), an expired one and one
//!   encoded with another key, and says whose it is (uid and gid, which munged takes from the
//!   encoding process's socket, not from anything the caller writes) and where it was encoded
//!   (the host's address).
//! - **Client certificates** (`--auth client-certificate`, with `--tls-cert`, `--tls-key` and
//!   `--client-ca`): a caller whose TLS connection presents a certificate the client CA signed.
//!   Its key must be readable only by root on the compute nodes and SlurmUser on the controller:
//!   a certificate names no user, so its holder counts as Slurm itself.
//!
//! Without either, the service refuses to start unless `--insecure-open-verbs` says the verbs
//! may be open to anyone (a test bed), and then warns at start.
//!
//! **Slurm itself** is what may call the verbs ([`Caller::is_slurm`]): root (the SPANK plugin
//! runs in slurmstepd, as root) and SlurmUser (job_submit.lua runs inside slurmctld), by their
//! MUNGE credential's uid (`--slurm-uid`), or the holder of a client certificate. What they say
//! about a job (its user, its node) is what Slurm knows; no user can vouch for a job, so a
//! user's own credential is refused by every verb, `403` naming its uid.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The scheme of the `Authorization` header that carries a MUNGE credential.
pub const SCHEME: &str = "MUNGE";

/// Largest body of a Slurm verb: a submission's declaration (an inline model summary is a few
/// hundred bytes) with room to spare.
pub const MAX_BODY: usize = 64 << 10;

/// Longest credential accepted (base64 of the encrypted payload, which is at most the largest
/// body of a Slurm verb: [`MAX_BODY`]).
pub const MAX_CREDENTIAL: usize = 2 * MAX_BODY;

/// Longest `unmunge` may take to decode one credential (it takes a few milliseconds; munged
/// itself answers or times out within this).
pub const UNMUNGE_DEADLINE: Duration = Duration::from_secs(2);

/// Most `unmunge` processes running at once: a flood of requests waits for a slot (and times
/// out) rather than spawning without bound.
const UNMUNGE_SLOTS: usize = 16;

/// What a credential says about the process that encoded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The encoding process's user.
    pub uid: u32,
    /// Its group.
    pub gid: u32,
    /// The address of the host whose munged encoded it (`ENCODE_HOST`).
    pub host: String,
    /// The payload the encoder bound to it.
    pub payload: Vec<u8>,
}

/// What a request's credential must have been made for: `<METHOD> <PATH>\n<body>`.
pub fn payload(method: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let mut payload = format!("{method} {path}\n").into_bytes();
    payload.extend_from_slice(body);
    payload
}

/// Why a credential admits nobody.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// Not a MUNGE credential at all (answered `401` without asking munged).
    #[error("the MUNGE credential is malformed: {0}")]
    Malformed(&'static str),
    /// munged refused it: replayed, expired, encoded with another key, corrupted (`401`).
    #[error("the MUNGE credential was refused: {0}")]
    Refused(String),
    /// It could not be checked now: `unmunge` could not run, or munged did not answer (`503`,
    /// so that the hook and the plugin fail open).
    #[error("cannot check the MUNGE credential: {0}")]
    Unavailable(String),
}

/// Decodes credentials with munged's `unmunge`.
#[derive(Debug)]
pub struct Unmunge {
    program: PathBuf,
    socket: Option<PathBuf>,
    slots: tokio::sync::Semaphore,
}

impl Unmunge {
    /// `program` (munge's `unmunge`), talking to munged at `socket` (its default without one).
    pub fn new(program: PathBuf, socket: Option<PathBuf>) -> Self {
        Self {
            program,
            socket,
            slots: tokio::sync::Semaphore::new(UNMUNGE_SLOTS),
        }
    }

    /// Decodes `credential` (the text of `munge`'s output), within [`UNMUNGE_DEADLINE`].
    pub async fn decode(&self, credential: &str) -> Result<Credential, CredentialError> {
        let credential = credential.trim();
        check_shape(credential)?;
        let decoding = async {
            let _slot = self
                .slots
                .acquire()
                .await
                .map_err(|_| CredentialError::Unavailable("the service is stopping".into()))?;
            self.run(credential).await
        };
        tokio::time::timeout(UNMUNGE_DEADLINE, decoding)
            .await
            .unwrap_or_else(|_| {
                Err(CredentialError::Unavailable(format!(
                    "{} did not answer within {UNMUNGE_DEADLINE:?}",
                    self.program.display()
                )))
            })
    }

    async fn run(&self, credential: &str) -> Result<Credential, CredentialError> {
        let mut command = tokio::process::Command::new(&self.program);
        if let Some(socket) = &self.socket {
            command.arg("--socket").arg(socket);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                CredentialError::Unavailable(format!("cannot run {}: {e}", self.program.display()))
            })?;
        let unavailable = |e: std::io::Error| {
            CredentialError::Unavailable(format!("{}: {e}", self.program.display()))
        };
        let mut stdin = child.stdin.take().ok_or_else(|| unavailable(no_pipe()))?;
        let stdout = child.stdout.take().ok_or_else(|| unavailable(no_pipe()))?;
        let stderr = child.stderr.take().ok_or_else(|| unavailable(no_pipe()))?;
        let write = async {
            stdin.write_all(credential.as_bytes()).await?;
            stdin.write_all(b"\n").await?;
            // Closed, so that unmunge sees the end of its input.
            drop(stdin);
            Ok::<_, std::io::Error>(())
        };
        // The payload is at most a verb's body; metadata a few hundred bytes.
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut stdout = stdout.take((MAX_BODY + 4096) as u64);
        let mut stderr = stderr.take(4096);
        let (written, read, _) = tokio::join!(
            write,
            stdout.read_to_end(&mut out),
            stderr.read_to_end(&mut err)
        );
        // A refused credential makes unmunge exit before it reads all of its input.
        let _ = written;
        read.map_err(unavailable)?;
        let status = child.wait().await.map_err(unavailable)?;
        let decoded = parse_unmunge(&out);
        if status.success() {
            return decoded;
        }
        let said = String::from_utf8_lossy(&err);
        let said = said
            .trim()
            .trim_start_matches("unmunge: ")
            .trim_start_matches("Error: ")
            .to_owned();
        // unmunge exits with munge's error code: the daemon out of reach (socket, timeout,
        // memory, an internal failure) is not the caller's fault; anything else is a refusal.
        let unavailable = matches!(status.code(), None | Some(1 | 5 | 6 | 7));
        let why = match decoded {
            Err(CredentialError::Refused(status)) if said.is_empty() => status,
            _ if !said.is_empty() => said,
            _ => format!("{} exited with {status}", self.program.display()),
        };
        Err(if unavailable {
            CredentialError::Unavailable(why)
        } else {
            CredentialError::Refused(why)
        })
    }
}

fn no_pipe() -> std::io::Error {
    std::io::Error::other("no pipe to the child")
}

/// Refuses what cannot be a credential before a process is spent on it: `MUNGE:<base64>:`.
fn check_shape(credential: &str) -> Result<(), CredentialError> {
    if credential.len() > MAX_CREDENTIAL {
        return Err(CredentialError::Malformed(
            "it is longer than any request's",
        ));
    }
    let Some(inner) = credential
        .strip_prefix("MUNGE:")
        .and_then(|rest| rest.strip_suffix(':'))
    else {
        return Err(CredentialError::Malformed("it is not MUNGE:<base64>:"));
    };
    if inner.is_empty()
        || !inner
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    {
        return Err(CredentialError::Malformed("it is not MUNGE:<base64>:"));
    }
    Ok(())
}

/// Reads what `unmunge` prints: `KEY: value` lines (`STATUS: Success (0)`,
/// `ENCODE_HOST: node1 (10.0.0.1)`, `UID: alice (1001)`, `GID: ...`, `LENGTH: 25`), an empty
/// line, then the payload. A `STATUS` other than 0 is a refusal, named as munge names it
/// (`Replayed credential`, `Expired credential`, ...).
pub fn parse_unmunge(out: &[u8]) -> Result<Credential, CredentialError> {
    let (head, payload) = match out.windows(2).position(|w| w == b"\n\n") {
        Some(at) => (&out[..at], &out[at + 2..]),
        None => (out, &[][..]),
    };
    let head = std::str::from_utf8(head)
        .map_err(|_| CredentialError::Unavailable("unmunge printed no metadata".into()))?;
    let field = |key: &str| {
        head.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key).then(|| v.trim())
        })
    };
    // `name (number)`: the number; a bare value is its own number.
    let numeric = |key: &str| {
        field(key).map(|value| match value.rsplit_once('(') {
            Some((_, inner)) if value.ends_with(')') => inner.trim_end_matches(')').trim(),
            _ => value,
        })
    };
    let unreadable =
        |key: &str| CredentialError::Unavailable(format!("unmunge printed no readable {key}"));
    let status = numeric("STATUS").ok_or_else(|| unreadable("STATUS"))?;
    if status != "0" {
        let name = field("STATUS")
            .and_then(|v| v.rsplit_once('('))
            .map(|(name, _)| name.trim())
            .filter(|name| !name.is_empty());
        return Err(CredentialError::Refused(match name {
            Some(name) => format!("{name} (munge status {status})"),
            None => format!("munge status {status}"),
        }));
    }
    let number = |key: &str| {
        numeric(key)
            .and_then(|v| v.parse::<u32>().ok())
            .ok_or_else(|| unreadable(key))
    };
    let length: usize = numeric("LENGTH")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| unreadable("LENGTH"))?;
    // unmunge ends the payload with nothing of its own; LENGTH says where it ends.
    let payload = payload.get(..length).ok_or_else(|| {
        CredentialError::Unavailable(format!(
            "unmunge printed {} bytes of a {length}-byte payload",
            payload.len()
        ))
    })?;
    Ok(Credential {
        uid: number("UID")?,
        gid: number("GID")?,
        host: numeric("ENCODE_HOST")
            .ok_or_else(|| unreadable("ENCODE_HOST"))?
            .to_owned(),
        payload: payload.to_vec(),
    })
}

/// How the service authenticates callers (`--auth`, or `--insecure-open-verbs`).
#[derive(Debug)]
pub enum Method {
    /// A MUNGE credential bound to each request.
    Munge(std::sync::Arc<Unmunge>),
    /// A TLS client certificate signed by `--client-ca`.
    ClientCertificate,
    /// Nobody is authenticated: `--insecure-open-verbs`.
    Open,
}

/// Who may call the verbs.
#[derive(Debug)]
pub struct Callers {
    /// How they prove who they are.
    pub method: Method,
    /// The uids that are Slurm itself: root, and SlurmUser's (`--slurm-uid`).
    pub slurm_uids: Vec<u32>,
}

/// Who made a request, as the service could tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// Nobody was asked to prove anything (`--insecure-open-verbs`).
    Anyone,
    /// A caller with a client certificate the client CA signed.
    Certificate,
    /// The encoder of a MUNGE credential: its uid, gid and host.
    Munge {
        /// Its uid.
        uid: u32,
        /// Its gid.
        gid: u32,
        /// Its host's address.
        host: String,
    },
}

/// The caller of a request, as the authentication layer found it (a request extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Who it is.
    pub who: Who,
    /// Whether it is Slurm itself (root, SlurmUser, a certificate's holder; anyone when the
    /// verbs are open).
    pub slurm: bool,
}

impl Caller {
    /// A caller under `callers`' rules.
    pub fn new(who: Who, callers: &Callers) -> Self {
        let slurm = match &who {
            Who::Anyone | Who::Certificate => true,
            Who::Munge { uid, .. } => callers.slurm_uids.contains(uid),
        };
        Self { who, slurm }
    }

    /// Whether it is Slurm itself.
    pub fn is_slurm(&self) -> bool {
        self.slurm
    }

    /// `Err` with why, unless the caller is Slurm itself: `verb` is what it tried and `whose`
    /// whose verb it is (`job_submit.lua's`).
    pub fn require_slurm(&self, verb: &str, whose: &str) -> Result<(), String> {
        if self.slurm {
            return Ok(());
        }
        Err(format!(
            "{verb} is {whose} verb: only Slurm itself (root, or SlurmUser with --slurm-uid) may \
             call it, and this request's credential is {self}'s"
        ))
    }
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.who {
            Who::Anyone => f.write_str("an unauthenticated caller"),
            Who::Certificate => f.write_str("a client certificate's holder"),
            Who::Munge { uid, gid, host } => write!(f, "uid {uid} (gid {gid}, host {host})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECODED: &[u8] = b"STATUS:          Success (0)\nENCODE_HOST:     node1 (10.1.2.3)\n\
ENCODE_TIME:     2026-12-01 21:35:23 +0000 (1796160923)\nTTL:             300\n\
CIPHER:          aes128 (4)\nMAC:             sha256 (5)\nZIP:             none (0)\n\
UID:             alice (1001)\nGID:             users (1002)\nLENGTH:          25\n\n\
POST /v1/slurm/finish\njob";

    #[test]
    fn unmunge_output_is_read_and_a_refusal_is_one() {
        let credential = parse_unmunge(DECODED).unwrap();
        assert_eq!((credential.uid, credential.gid), (1001, 1002));
        assert_eq!(credential.host, "10.1.2.3");
        assert_eq!(credential.payload, b"POST /v1/slurm/finish\njob");
        let replayed = b"STATUS:          Replayed credential (17)\nENCODE_HOST:     10.1.2.3\n\
UID: root (0)\nGID: root (0)\nLENGTH: 0\n";
        assert_eq!(
            parse_unmunge(replayed),
            Err(CredentialError::Refused(
                "Replayed credential (munge status 17)".into()
            ))
        );
        // Numeric output reads the same.
        let numeric = b"STATUS: 0\nENCODE_HOST: 10.1.2.3\nUID: 7\nGID: 8\nLENGTH: 1\n\nx";
        assert_eq!(parse_unmunge(numeric).unwrap().uid, 7);
        // A payload shorter than LENGTH is not taken for the whole one.
        let cut = &DECODED[..DECODED.len() - 2];
        assert!(matches!(
            parse_unmunge(cut),
            Err(CredentialError::Unavailable(_))
        ));
        assert!(matches!(
            parse_unmunge(b"nonsense"),
            Err(CredentialError::Unavailable(_))
        ));
    }

    #[test]
    fn what_is_no_credential_is_refused_before_munged_is_asked() {
        assert!(check_shape("MUNGE:AwQFAAAX7wxo+/=:").is_ok());
        for bad in ["", "MUNGE::", "Bearer x", "MUNGE:a b:", "MUNGE:abc"] {
            assert!(
                matches!(check_shape(bad), Err(CredentialError::Malformed(_))),
                "{bad}"
            );
        }
        let long = format!("MUNGE:{}:", "A".repeat(MAX_CREDENTIAL));
        assert!(check_shape(&long).is_err());
        assert_eq!(
            payload("POST", "/v1/slurm/start", b"job=1\n"),
            b"POST /v1/slurm/start\njob=1\n"
        );
    }

    #[test]
    fn only_root_and_slurm_user_are_slurm() {
        let callers = Callers {
            method: Method::Open,
            slurm_uids: vec![0, 64030],
        };
        let munge = |uid| Who::Munge {
            uid,
            gid: uid,
            host: "10.0.0.1".into(),
        };
        assert!(Caller::new(munge(0), &callers).is_slurm());
        assert!(Caller::new(munge(64030), &callers).is_slurm());
        let user = Caller::new(munge(1001), &callers);
        let refusal = user
            .require_slurm("submit", "job_submit.lua's")
            .unwrap_err();
        assert!(
            refusal.contains("submit is job_submit.lua's verb") && refusal.contains("uid 1001"),
            "{refusal}"
        );
        assert!(Caller::new(Who::Certificate, &callers).is_slurm());
    }

    /// Against the real `unmunge`, where munge is installed: a credential this process makes is
    /// decoded once, and refused the second time (munged's replay check).
    #[tokio::test]
    async fn a_real_credential_decodes_once() {
        let dir = tempfile::tempdir().unwrap();
        let Some(munged) = Munged::start(dir.path()) else {
            eprintln!("munged is not installed; skipped");
            return;
        };
        let credential = munged.encode(b"GET /v1/slurm/placements\n");
        let unmunge = Unmunge::new("unmunge".into(), Some(munged.socket.clone()));
        let decoded = unmunge.decode(&credential).await.unwrap();
        assert_eq!(decoded.payload, b"GET /v1/slurm/placements\n");
        assert_eq!(decoded.uid, 0);
        let again = unmunge.decode(&credential).await.unwrap_err();
        assert!(
            matches!(&again, CredentialError::Refused(m) if m.contains("Replayed")),
            "{again:?}"
        );
        // A credential of another key (a forged one, as far as this munged can tell).
        let other = tempfile::tempdir().unwrap();
        let Some(stranger) = Munged::start(other.path()) else {
            return;
        };
        let forged = stranger.encode(b"GET /v1/slurm/placements\n");
        let refused = unmunge.decode(&forged).await.unwrap_err();
        assert!(
            matches!(refused, CredentialError::Refused(_)),
            "{refused:?}"
        );
        let down = Unmunge::new("unmunge".into(), Some(dir.path().join("nothing")));
        let fresh = munged.encode(b"x");
        assert!(matches!(
            down.decode(&fresh).await,
            Err(CredentialError::Unavailable(_))
        ));
    }

    /// A munged of its own, with a fresh key, stopped when dropped.
    struct Munged {
        socket: PathBuf,
        pid: PathBuf,
    }

    impl Munged {
        fn start(dir: &std::path::Path) -> Option<Self> {
            let root = std::process::Command::new("id")
                .arg("-u")
                .output()
                .ok()
                .is_some_and(|o| o.stdout.starts_with(b"0\n"));
            if !root || !std::path::Path::new("/usr/sbin/munged").exists() {
                return None;
            }
            let key = dir.join("munge.key");
            let mut bytes = [0_u8; 1024];
            getrandom::getrandom(&mut bytes).ok()?;
            std::fs::write(&key, bytes).ok()?;
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).ok()?;
            let socket = dir.join("munge.socket");
            let pid = dir.join("munged.pid");
            let status = std::process::Command::new("/usr/sbin/munged")
                .arg("--force")
                .arg(format!("--key-file={}", key.display()))
                .arg(format!("--socket={}", socket.display()))
                .arg(format!("--pid-file={}", pid.display()))
                .arg(format!("--log-file={}", dir.join("munged.log").display()))
                .arg(format!("--seed-file={}", dir.join("seed").display()))
                .status()
                .ok()?;
            status.success().then_some(Self { socket, pid })
        }

        fn encode(&self, payload: &[u8]) -> String {
            use std::io::Write as _;
            let mut child = std::process::Command::new("munge")
                .arg("--socket")
                .arg(&self.socket)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(payload).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success());
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        }
    }

    impl Drop for Munged {
        fn drop(&mut self) {
            if let Ok(pid) = std::fs::read_to_string(&self.pid) {
                let _ = std::process::Command::new("kill").arg(pid.trim()).status();
            }
        }
    }
}
