//! The plugin's calls to the service: one HTTP/1.0 request (the server closes the connection,
//! so no client library is needed inside slurmstepd), over TCP or TLS, with the credential the
//! configuration says, all of it within one deadline and the answer at most [`MAX_ANSWER`]
//! bytes.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::{Auth, Config, TlsFiles};

/// Largest answer read from the service: its answers are one short line.
pub const MAX_ANSWER: usize = 16 << 10;

/// Largest credential read from `munge` (its payload is one of the plugin's short bodies).
const MAX_CREDENTIAL: usize = 16 << 10;

/// A fresh MUNGE credential whose payload is `payload`, from `program` (munge's `munge`) at
/// `socket`, made before `deadline`.
pub fn munge(
    program: &Path,
    socket: Option<&Path>,
    payload: &[u8],
    deadline: Instant,
) -> Result<String, String> {
    let mut command = Command::new(program);
    if let Some(socket) = socket {
        command.arg("--socket").arg(socket);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    // The payload is one short body: it fits the pipe whether or not munge reads yet.
    let written = child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(payload))
        .transpose();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} did not answer in time", program.display()));
            }
            Err(e) => return Err(format!("{}: {e}", program.display())),
        }
    };
    written.map_err(|e| format!("{}: {e}", program.display()))?;
    let mut out = Vec::new();
    let mut err = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = stdout.take(MAX_CREDENTIAL as u64).read_to_end(&mut out);
    }
    if let Some(stderr) = child.stderr.take() {
        let _ = stderr.take(1024).read_to_end(&mut err);
    }
    if !status.success() {
        return Err(format!(
            "{} failed ({status}): {}",
            program.display(),
            String::from_utf8_lossy(&err).trim()
        ));
    }
    let credential = String::from_utf8_lossy(&out).trim().to_owned();
    if !credential.starts_with("MUNGE:") || credential.contains(char::is_whitespace) {
        return Err(format!("{} printed no credential", program.display()));
    }
    Ok(credential)
}

/// A connection whose reads can be given a timeout: TCP, or TLS over TCP.
pub trait Timed: Read + Write {
    /// The socket underneath.
    fn socket(&self) -> &TcpStream;
}

impl Timed for TcpStream {
    fn socket(&self) -> &TcpStream {
        self
    }
}

impl Timed for rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    fn socket(&self) -> &TcpStream {
        &self.sock
    }
}

/// Reads `stream` to its end, within `deadline` for all of it and at most `cap` bytes; `what`
/// names the peer in errors.
pub fn read_bounded(
    stream: &mut impl Timed,
    deadline: Instant,
    cap: usize,
    what: &str,
) -> Result<Vec<u8>, String> {
    let mut answer = Vec::new();
    let mut buffer = [0_u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("{what}: no whole answer in time"));
        }
        stream
            .socket()
            .set_read_timeout(Some(left))
            .map_err(|e| format!("{what}: {e}"))?;
        let read = match stream.read(&mut buffer) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!("{what}: no whole answer in time"));
            }
            // A TLS peer that closes without close_notify: the answer's own length (its
            // status line and body) says whether it is whole.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(answer),
            Err(e) => return Err(format!("{what}: {e}")),
        };
        if read == 0 {
            return Ok(answer);
        }
        if answer.len() + read > cap {
            return Err(format!("{what}: the answer is longer than {cap} bytes"));
        }
        answer.extend_from_slice(&buffer[..read]);
    }
}

/// The TLS client configuration `files` describe: the service's CA, and the plugin's
/// certificate when it presents one.
fn tls_config(files: &TlsFiles) -> Result<rustls::ClientConfig, String> {
    let read_certs = |path: &Path| {
        CertificateDer::pem_file_iter(path)
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certs(&files.ca)? {
        roots
            .add(cert)
            .map_err(|e| format!("{}: not a CA certificate: {e}", files.ca.display()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots);
    match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => {
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("cannot read {}: {e}", key.display()))?;
            builder
                .with_client_auth_cert(read_certs(cert)?, key)
                .map_err(|e| format!("{} does not match its key: {e}", cert.display()))
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// POSTs `body` to `path` on the service and returns the answer's body, with the credential
/// [`Config::auth`] says, over TLS when [`Config::tls`] is set, all within
/// [`Config::timeout`].
pub fn post(config: &Config, path: &str, body: &str) -> Result<String, String> {
    let started = Instant::now();
    let deadline = started + config.timeout;
    let authorization = match &config.auth {
        Auth::Munge { program, socket } => {
            let mut payload = format!("POST {path}\n").into_bytes();
            payload.extend_from_slice(body.as_bytes());
            let credential = munge(program, socket.as_deref(), &payload, deadline)?;
            format!("Authorization: MUNGE {credential}\r\n")
        }
        Auth::Certificate | Auth::None => String::new(),
    };
    let address = config
        .service
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", config.service))?
        .next()
        .ok_or_else(|| format!("{} resolves to no address", config.service))?;
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    let tcp = TcpStream::connect_timeout(&address, left())
        .map_err(|e| format!("cannot connect to {address}: {e}"))?;
    let what = format!("{address}{path}");
    tcp.set_write_timeout(Some(left()))
        .map_err(|e| format!("{what}: {e}"))?;
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: {}\r\n{authorization}Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        config.service,
        body.len()
    );
    let answer = match &config.tls {
        None => exchange(tcp, &request, deadline, &what)?,
        Some(files) => {
            let name = files.name.clone().unwrap_or_else(|| {
                config
                    .service
                    .rsplit_once(':')
                    .map_or(config.service.as_str(), |(host, _)| host)
                    .trim_matches(['[', ']'])
                    .to_owned()
            });
            let name = ServerName::try_from(name.clone())
                .map_err(|e| format!("tandem: `{name}` is not a server name: {e}"))?;
            let connection = rustls::ClientConnection::new(Arc::new(tls_config(files)?), name)
                .map_err(|e| format!("{what}: {e}"))?;
            exchange(
                rustls::StreamOwned::new(connection, tcp),
                &request,
                deadline,
                &what,
            )?
        }
    };
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{what}: not an HTTP answer"))?;
    let status = head.split_whitespace().nth(1).unwrap_or_default();
    let length = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())?
    });
    if length.is_some_and(|length| length != body.len()) {
        return Err(format!("{what}: the answer was cut short"));
    }
    if status != "200" {
        return Err(format!("{what} answered {status}: {}", body.trim()));
    }
    Ok(body.to_owned())
}

/// Writes `request` on `stream` and reads the whole answer (a TLS handshake happens on the
/// first write, under the socket's write timeout and the read deadline).
fn exchange(
    mut stream: impl Timed,
    request: &str,
    deadline: Instant,
    what: &str,
) -> Result<Vec<u8>, String> {
    stream
        .socket()
        .set_read_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ))
        .map_err(|e| format!("{what}: {e}"))?;
    stream
        .write_all(request.as_bytes())
        .and_then(|()| stream.flush())
        .map_err(|e| format!("{what}: {e}"))?;
    read_bounded(&mut stream, deadline, MAX_ANSWER, what)
}
