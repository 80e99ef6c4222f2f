//! Posting profiles to the adapter's intake (`POST /v1/profiles`, bearer token).
//!
//! The token is read from its file again for every post ([`Intake::with_token_file`]): in
//! Kubernetes it is the profiler pod's projected service-account token (audience
//! `tandem-intake`), which the kubelet rotates in place, and the adapter admits the profiler for
//! the pods of the node that token is bound to. On a Slurm node it may instead present a fresh
//! MUNGE credential for every post ([`Intake::with_munge`], `--intake-auth munge`): root's,
//! encoded on the node, which the Slurm service takes for that node's profiler.
//!
//! The body is the intake's own type ([`ProfilesRequest`]): keyed job ids and the three
//! features with the GPU model — nothing else leaves the node. Any adapter (kube extender,
//! kube plugin, Volcano, Slurm) serves the same intake, whose bodies are the contract's (`tandem-wire`).
//!
//! Failures that may pass — no connection, `5xx` (an adapter starting or without a leader
//! answers `503`), `408`, `429` — are retried with exponential back-off ([`Backoff`]); a
//! refusal (`400`, `401`, `403`) is not, and is reported with the adapter's reason.

use std::time::Duration;

use reqwest::StatusCode;
pub use tandem_wire::intake::{ProfileRecord, ProfilesAnswer, ProfilesRequest};

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Wait before the first retry; doubled after each.
    pub first: Duration,
    /// Longest wait between two attempts.
    pub max: Duration,
    /// Attempts in all, the first included.
    pub attempts: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            first: Duration::from_millis(250),
            max: Duration::from_secs(30),
            attempts: 10,
        }
    }
}

impl Backoff {
    /// The wait before attempt `attempt` (1 is the first retry).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 2_u32.saturating_pow(attempt.saturating_sub(1));
        self.first.saturating_mul(factor).min(self.max)
    }
}

/// Why profiles were not delivered.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
    /// The intake could not be reached.
    #[error("cannot reach the intake")]
    Transport(#[source] reqwest::Error),
    /// The intake answered with an error.
    #[error("the intake answered {status}: {message}")]
    Status {
        /// The HTTP status.
        status: StatusCode,
        /// The adapter's reason (its `error` field, or the body).
        message: String,
    },
    /// The intake's answer is not a profiles answer.
    #[error("the intake's answer is not a profiles answer")]
    Answer(#[source] serde_json::Error),
    /// `munge` made no credential.
    #[error("no MUNGE credential: {0}")]
    Munge(String),
    /// The token file could not be read, or is empty.
    #[error("cannot read the intake token {}", .path.display())]
    Token {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Every attempt failed with an error that may pass.
    #[error("gave up after {attempts} attempts")]
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        #[source]
        last: Box<PostError>,
    },
}

impl PostError {
    fn may_pass(&self) -> bool {
        match self {
            // The kubelet replaces a projected token's file while it rotates it.
            Self::Transport(_) | Self::Token { .. } => true,
            // munged restarting, or slow.
            Self::Munge(_) => true,
            Self::Status { status, .. } => {
                status.is_server_error()
                    || *status == StatusCode::TOO_MANY_REQUESTS
                    || *status == StatusCode::REQUEST_TIMEOUT
            }
            Self::Client(_) | Self::Answer(_) | Self::GaveUp { .. } => false,
        }
    }
}

/// What the profiler presents: a bearer token, or a MUNGE credential.
#[derive(Clone)]
enum Token {
    /// Given once.
    Fixed(String),
    /// Read from this file for every post.
    File(std::path::PathBuf),
    /// A fresh MUNGE credential for every post, from `munge` at this socket.
    Munge {
        /// munge's `munge`.
        program: std::path::PathBuf,
        /// munged's socket, if not munge's default.
        socket: Option<std::path::PathBuf>,
    },
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        match self {
            Self::Fixed(_) => f.write_str("Fixed(..)"),
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Munge { program, socket } => f
                .debug_struct("Munge")
                .field("program", program)
                .field("socket", socket)
                .finish(),
        }
    }
}

/// What a profiler's MUNGE credential is made for: the intake's method and path (the Slurm
/// service checks it; the core's intake authenticates by headers, so the body is not bound).
pub const MUNGE_PAYLOAD: &str = "POST /v1/profiles\n";

impl Token {
    /// The `Authorization` header's value for one post.
    async fn authorization(&self) -> Result<String, PostError> {
        match self {
            Self::Fixed(token) => Ok(format!("Bearer {token}")),
            Self::File(path) => Ok(format!("Bearer {}", read_token(path)?)),
            Self::Munge { program, socket } => Ok(format!(
                "MUNGE {}",
                munge(program, socket.as_deref()).await?
            )),
        }
    }
}

/// A fresh MUNGE credential for [`MUNGE_PAYLOAD`], from `program` at `socket`.
pub async fn munge(
    program: &std::path::Path,
    socket: Option<&std::path::Path>,
) -> Result<String, PostError> {
    let mut command = tokio::process::Command::new(program);
    command.args(["-s", MUNGE_PAYLOAD]);
    if let Some(socket) = socket {
        command.arg("--socket").arg(socket);
    }
    let run = command
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .map_err(|_| PostError::Munge(format!("{} did not answer in 5 s", program.display())))?
        .map_err(|e| PostError::Munge(format!("cannot run {}: {e}", program.display())))?;
    let credential = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() || !credential.starts_with("MUNGE:") {
        return Err(PostError::Munge(format!(
            "{} failed ({}): {}",
            program.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(credential)
}

/// The token in `path`, trimmed; an empty file is an error (a token being written).
pub fn read_token(path: &std::path::Path) -> Result<String, PostError> {
    let token = std::fs::read_to_string(path)
        .map_err(|source| PostError::Token {
            path: path.to_owned(),
            source,
        })?
        .trim()
        .to_owned();
    if token.is_empty() {
        return Err(PostError::Token {
            path: path.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "the file is empty"),
        });
    }
    Ok(token)
}

/// The adapter's intake.
#[derive(Debug, Clone)]
pub struct Intake {
    http: reqwest::Client,
    url: String,
    token: Token,
    backoff: Backoff,
}

impl Intake {
    /// The intake of the adapter at `adapter` (for example `http://tandem-kube-adapter.tandem-system:8888`),
    /// authorized with `token`.
    pub fn new(adapter: &str, token: String, backoff: Backoff) -> Result<Self, PostError> {
        Self::with_ca(adapter, token, backoff, None)
    }

    /// [`Intake::new`] for an adapter serving HTTPS with a certificate signed by the CA `ca_pem`
    /// (PEM), besides the system's roots: a cluster's own CA.
    pub fn with_ca(
        adapter: &str,
        token: String,
        backoff: Backoff,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, PostError> {
        Self::build(adapter, Token::Fixed(token), backoff, ca_pem)
    }

    /// [`Intake::with_ca`] with the token read from `token_file` for every post, so a token
    /// rotated in place (a projected service-account token) is the one presented. The file is
    /// read once here, so one that cannot be read fails at once.
    pub fn with_token_file(
        adapter: &str,
        token_file: &std::path::Path,
        backoff: Backoff,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, PostError> {
        read_token(token_file)?;
        Self::build(adapter, Token::File(token_file.to_owned()), backoff, ca_pem)
    }

    /// [`Intake::with_ca`] presenting a fresh MUNGE credential for every post, made by
    /// `program` (munge's `munge`) with munged at `socket`: on a Slurm node, as root, for the
    /// Slurm service.
    pub fn with_munge(
        adapter: &str,
        program: &std::path::Path,
        socket: Option<&std::path::Path>,
        backoff: Backoff,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, PostError> {
        let token = Token::Munge {
            program: program.to_owned(),
            socket: socket.map(std::path::Path::to_owned),
        };
        Self::build(adapter, token, backoff, ca_pem)
    }

    fn build(
        adapter: &str,
        token: Token,
        backoff: Backoff,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, PostError> {
        // reqwest is built without a default crypto provider; ring is the workspace's one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .user_agent(concat!("tandem-profiler/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem).map_err(PostError::Client)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(PostError::Client)?;
        Ok(Self {
            http,
            url: format!("{}/v1/profiles", adapter.trim_end_matches('/')),
            token,
            backoff,
        })
    }

    /// Posts `request`, retrying what may pass.
    pub async fn post(&self, request: &ProfilesRequest) -> Result<ProfilesAnswer, PostError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.post_once(request).await {
                Ok(answer) => return Ok(answer),
                Err(error) if error.may_pass() && attempt < self.backoff.attempts => {
                    let wait = self.backoff.delay(attempt);
                    tracing::info!(%error, attempt, wait_ms = wait.as_millis() as u64, "intake not reached; retrying");
                    tokio::time::sleep(wait).await;
                }
                Err(error) if error.may_pass() => {
                    return Err(PostError::GaveUp {
                        attempts: attempt,
                        last: Box::new(error),
                    });
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn post_once(&self, request: &ProfilesRequest) -> Result<ProfilesAnswer, PostError> {
        let authorization = self.token.authorization().await?;
        let response = self
            .http
            .post(&self.url)
            .header(reqwest::header::AUTHORIZATION, authorization)
            .json(request)
            .send()
            .await
            .map_err(PostError::Transport)?;
        let status = response.status();
        let body = response.bytes().await.map_err(PostError::Transport)?;
        if !status.is_success() {
            let message = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
            return Err(PostError::Status { status, message });
        }
        serde_json::from_slice(&body).map_err(PostError::Answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_up_to_the_cap() {
        let backoff = Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_millis(500),
            attempts: 5,
        };
        let delays: Vec<u128> = (1..=5).map(|a| backoff.delay(a).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 500, 500]);
        assert_eq!(Backoff::default().delay(40), Duration::from_secs(30));
    }
}
