//! Serving an adapter's router: plain HTTP or HTTPS, on an address or a bound listener, until
//! shutdown, letting requests in flight finish.
//!
//! HTTPS may also authenticate its callers: with a client CA ([`Tls::client_ca`]) a caller
//! that presents a certificate signed by it is marked on its requests
//! ([`ClientCertificate`]), and the scheduler verbs require that mark (see
//! [`crate::SchedulerAuth`]). A caller without a certificate still connects (probes and
//! `/metrics` scrapers present none) but gets `401` from the verbs. The certificate, its key
//! and the CA are read again whenever one of the files changes ([`RELOAD_EVERY`]), so a
//! rotated certificate is served without a restart.
//!
//! Every accepted connection gets `TCP_NODELAY`. Over HTTPS, kube-scheduler speaks HTTP/2 and
//! sends every call over one connection; a response goes out as several small writes (the
//! HEADERS and DATA frames, each its own TLS record), and with Nagle's algorithm the second
//! waited for the client's delayed acknowledgement of the first: tens of milliseconds added to
//! a `filter` the scheduler waits for in its scheduling cycle.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use axum::middleware::AddExtension;
use axum::{Extension, Router};
use axum_server::accept::{Accept, NoDelayAcceptor};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use futures::future::BoxFuture;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tower::Layer as _;

use crate::Shutdown;

/// How long in-flight requests may finish after a shutdown signal.
const DRAIN: Duration = Duration::from_secs(10);

/// How often the certificate files are checked for a change.
pub const RELOAD_EVERY: Duration = Duration::from_secs(5);

/// A certificate and its key (PEM files), for HTTPS; and the CA of the clients it
/// authenticates, if it does.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The certificate chain.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// CA certificates (PEM) whose client certificates authenticate a caller (mutual TLS).
    pub client_ca: Option<PathBuf>,
}

impl Tls {
    /// TLS with `cert` and `key` when both are given (plain HTTP otherwise, `None`), asking
    /// callers for a certificate of `client_ca` if given: how every front-end's options say it.
    pub fn from_files(
        cert: Option<&Path>,
        key: Option<&Path>,
        client_ca: Option<&Path>,
    ) -> Option<Self> {
        Some(Self {
            cert: cert?.to_path_buf(),
            key: key?.to_path_buf(),
            client_ca: client_ca.map(Path::to_path_buf),
        })
    }
}

/// Whether the connection a request came on presented a client certificate that the
/// [`Tls::client_ca`] verified (a request extension; absent on plain HTTP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientCertificate(pub bool);

impl Tls {
    /// The rustls configuration these files describe.
    pub fn server_config(&self) -> anyhow::Result<ServerConfig> {
        let certs = CertificateDer::pem_file_iter(&self.cert)
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .with_context(|| format!("cannot read TLS certificate {}", self.cert.display()))?;
        anyhow::ensure!(
            !certs.is_empty(),
            "{} holds no certificate",
            self.cert.display()
        );
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .with_context(|| format!("cannot read TLS key {}", self.key.display()))?;
        let builder = ServerConfig::builder();
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(ca)
                    .with_context(|| format!("cannot read client CA {}", ca.display()))?
                {
                    let cert =
                        cert.with_context(|| format!("cannot read client CA {}", ca.display()))?;
                    roots
                        .add(cert)
                        .with_context(|| format!("{}: not a CA certificate", ca.display()))?;
                }
                let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
                    // Probes and scrapers connect without one; the verbs refuse them.
                    .allow_unauthenticated()
                    .build()
                    .with_context(|| format!("cannot verify clients with {}", ca.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(certs, key)
            .with_context(|| format!("{} does not match its key", self.cert.display()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }

    /// When each file last changed, to notice a rotation.
    fn stamps(&self) -> Vec<Option<(SystemTime, u64)>> {
        let stamp = |path: &Path| {
            std::fs::metadata(path)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len())))
        };
        [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .map(|p| stamp(p))
            .collect()
    }
}

/// Marks each request with whether its connection presented a verified client certificate.
#[derive(Debug, Clone)]
struct CertifyingAcceptor {
    inner: RustlsAcceptor<NoDelayAcceptor>,
}

impl CertifyingAcceptor {
    fn new(config: RustlsConfig) -> Self {
        Self {
            inner: RustlsAcceptor::new(config).acceptor(NoDelayAcceptor::new()),
        }
    }
}

impl<S> Accept<TcpStream, S> for CertifyingAcceptor
where
    S: Send + 'static,
{
    type Stream = TlsStream<TcpStream>;
    type Service = AddExtension<S, ClientCertificate>;
    type Future = BoxFuture<'static, io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let acceptor = self.inner.clone();
        Box::pin(async move {
            let (stream, service) = acceptor.accept(stream, service).await?;
            // rustls only hands over certificates its verifier accepted.
            let certified = stream
                .get_ref()
                .1
                .peer_certificates()
                .is_some_and(|certs| !certs.is_empty());
            Ok((
                stream,
                Extension(ClientCertificate(certified)).layer(service),
            ))
        })
    }
}

/// Reloads `config` from `tls`'s files whenever they change, until `shutdown`. A file that does
/// not parse (caught mid-rotation, say) keeps the configuration in force and is tried again.
fn reload_on_change(tls: Tls, config: RustlsConfig, mut shutdown: Shutdown) {
    tokio::spawn(async move {
        let mut seen = tls.stamps();
        loop {
            tokio::select! {
                () = tokio::time::sleep(RELOAD_EVERY) => {}
                () = shutdown.wait() => break,
            }
            let now = tls.stamps();
            if now == seen {
                continue;
            }
            match tls.server_config() {
                Ok(fresh) => {
                    config.reload_from_config(Arc::new(fresh));
                    seen = now;
                    tracing::info!(cert = %tls.cert.display(), "reloaded the TLS certificate");
                }
                Err(error) => {
                    tracing::warn!(
                        error = format!("{error:#}"),
                        "cannot reload the TLS certificate; serving the previous one"
                    );
                }
            }
        }
    });
}

fn drain_on(mut shutdown: Shutdown) -> axum_server::Handle<SocketAddr> {
    let handle = axum_server::Handle::new();
    let drain = handle.clone();
    tokio::spawn(async move {
        shutdown.wait().await;
        drain.graceful_shutdown(Some(DRAIN));
    });
    handle
}

/// Serves `router` on `listen` (HTTPS with `tls`) until `shutdown`.
pub async fn serve(
    router: Router,
    listen: SocketAddr,
    tls: Option<Tls>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let handle = drain_on(shutdown.clone());
    let service = router.into_make_service();
    match tls {
        Some(tls) => {
            let config = RustlsConfig::from_config(Arc::new(tls.server_config()?));
            tracing::info!(%listen, client_ca = ?tls.client_ca, "serving HTTPS");
            reload_on_change(tls, config.clone(), shutdown);
            axum_server::bind(listen)
                .acceptor(CertifyingAcceptor::new(config))
                .handle(handle)
                .serve(service)
                .await
        }
        None => {
            tracing::info!(%listen, "serving HTTP");
            axum_server::bind(listen)
                .acceptor(NoDelayAcceptor::new())
                .handle(handle)
                .serve(service)
                .await
        }
    }
    .with_context(|| format!("cannot serve on {listen}"))?;
    tracing::info!("stopped");
    Ok(())
}

/// Serves `router` on an already bound listener until `shutdown` (benchmarks and tests start
/// adapters in-process this way).
pub async fn serve_listener(
    router: Router,
    listener: std::net::TcpListener,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let handle = drain_on(shutdown);
    axum_server::from_tcp(listener)?
        .acceptor(NoDelayAcceptor::new())
        .handle(handle)
        .serve(router.into_make_service())
        .await?;
    Ok(())
}

/// [`serve_listener`] over HTTPS with `tls` (reloaded when its files change), for tests.
pub async fn serve_listener_tls(
    router: Router,
    listener: std::net::TcpListener,
    tls: Tls,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let handle = drain_on(shutdown.clone());
    let config = RustlsConfig::from_config(Arc::new(tls.server_config()?));
    reload_on_change(tls, config.clone(), shutdown);
    axum_server::from_tcp(listener)?
        .acceptor(CertifyingAcceptor::new(config))
        .handle(handle)
        .serve(router.into_make_service())
        .await?;
    Ok(())
}

/// Waits for SIGTERM or Ctrl-C.
pub async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "no SIGTERM handler; stopping on Ctrl-C only");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use rustls::ClientConfig;
    use rustls::pki_types::ServerName;
    use tokio::net::TcpListener;
    use tokio_rustls::TlsConnector;

    /// Both acceptors hand over connections with Nagle's algorithm off: HTTP/2 over TLS writes
    /// a response as several records, and Nagle held each later one back until the client
    /// acknowledged the first.
    #[tokio::test]
    async fn accepted_connections_have_nodelay() -> anyhow::Result<()> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir()?;
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
        let tls = Tls {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: None,
        };
        std::fs::write(&tls.cert, cert.cert.pem())?;
        std::fs::write(&tls.key, cert.signing_key.serialize_pem())?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;

        // Plain HTTP.
        let client = tokio::spawn(TcpStream::connect(addr));
        let (stream, _) = listener.accept().await?;
        let (stream, ()) = NoDelayAcceptor::new().accept(stream, ()).await?;
        assert!(
            stream.nodelay()?,
            "plain HTTP connection without TCP_NODELAY"
        );
        drop(client.await??);

        // HTTPS, through the certificate-marking acceptor.
        let mut roots = RootCertStore::empty();
        roots.add(cert.cert.der().clone())?;
        let connector = TlsConnector::from(Arc::new(
            ClientConfig::builder()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        ));
        let client = tokio::spawn(async move {
            let tcp = TcpStream::connect(addr).await?;
            connector
                .connect(ServerName::try_from("localhost")?, tcp)
                .await
                .map_err(anyhow::Error::from)
        });
        let (stream, _) = listener.accept().await?;
        let config = RustlsConfig::from_config(Arc::new(tls.server_config()?));
        let (stream, _service) = CertifyingAcceptor::new(config).accept(stream, ()).await?;
        assert!(
            stream.get_ref().0.nodelay()?,
            "HTTPS connection without TCP_NODELAY"
        );
        drop(client.await??);
        Ok(())
    }
}
