//! Serving an adapter's router: plain HTTP or HTTPS, on an address or a bound listener, until
//! shutdown, letting requests in flight finish.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;

use crate::Shutdown;

/// How long in-flight requests may finish after a shutdown signal.
const DRAIN: Duration = Duration::from_secs(10);

/// A certificate and its key (PEM files), for HTTPS.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The certificate chain.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
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
    let handle = drain_on(shutdown);
    let service = router.into_make_service();
    match tls {
        Some(Tls { cert, key }) => {
            let config = axum_server::tls_rustls::RustlsConfig::from_pem_file(&cert, &key)
                .await
                .with_context(|| format!("cannot load TLS certificate {}", cert.display()))?;
            tracing::info!(%listen, "serving HTTPS");
            axum_server::bind_rustls(listen, config)
                .handle(handle)
                .serve(service)
                .await
        }
        None => {
            tracing::info!(%listen, "serving HTTP");
            axum_server::bind(listen)
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
