//! Node profilers authenticated by MUNGE, for the intake (`POST /v1/profiles`).
//!
//! With `--auth munge`, a compute node's `tandem-profiler --intake-auth munge` presents a fresh
//! MUNGE credential (`Authorization: MUNGE <credential>`, its payload
//! `POST /v1/profiles\n`) instead of the operator's intake token. munged says who encoded it
//! and on which host: it must be root's (the profiler runs as root on its node), and its
//! encoding host's address must be one of a Slurm node's (its name, `NodeAddr` or
//! `NodeHostName` as the resolver answers for them, read with the nodes). That node is the
//! caller's scope ([`tandem_adapter_core::intake::Scope::Node`]): its profiler may post profiles
//! of the jobs placed on it ([`crate::app::App::runs_on`]) and nothing else.
//!
//! The core's intake passes only the headers to an [`IntakeAuth`], so the credential binds the
//! request's method and path, not its body; munged still refuses it a second time, so one
//! credential admits one request.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::RwLock;
use tandem_adapter_core::intake::{AuthError, Caller, HeaderMap, IntakeAuth};

use crate::auth::{self, CredentialError, Unmunge};

/// What a profiler's credential must have been made for.
pub const PAYLOAD: &[u8] = b"POST /v1/profiles\n";

/// The Slurm node each address is, as last read.
pub type Hosts = Arc<RwLock<HashMap<IpAddr, String>>>;

/// Admits root's MUNGE credential from a Slurm node as that node's profiler.
#[derive(Debug)]
pub struct MungeProfilers {
    unmunge: Arc<Unmunge>,
    hosts: Hosts,
}

impl MungeProfilers {
    /// Decoding with `unmunge`, knowing nodes by `hosts`.
    pub fn new(unmunge: Arc<Unmunge>, hosts: Hosts) -> Self {
        Self { unmunge, hosts }
    }

    async fn caller(&self, headers: &HeaderMap) -> Result<Caller, AuthError> {
        let Some(credential) = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix(auth::SCHEME))
            .and_then(|v| v.strip_prefix(' '))
        else {
            return Err(AuthError::Unauthenticated(
                "the intake needs the operator's bearer token, or a node profiler's MUNGE \
                 credential (`Authorization: MUNGE <credential>`, the payload \
                 `POST /v1/profiles\\n`)"
                    .into(),
            ));
        };
        let decoded = self.unmunge.decode(credential).await.map_err(|e| match e {
            CredentialError::Unavailable(_) => AuthError::Unavailable(e.to_string()),
            _ => AuthError::Unauthenticated(e.to_string()),
        })?;
        if decoded.payload != PAYLOAD {
            return Err(AuthError::Unauthenticated(format!(
                "the MUNGE credential (uid {}) was made for another request than POST /v1/profiles",
                decoded.uid
            )));
        }
        if decoded.uid != 0 {
            return Err(AuthError::Forbidden(format!(
                "a node profiler's MUNGE credential is root's; this one is uid {}'s",
                decoded.uid
            )));
        }
        let node = decoded
            .host
            .parse::<IpAddr>()
            .ok()
            .and_then(|ip| self.hosts.read().get(&ip).cloned());
        match node {
            Some(node) => Ok(Caller::node(&node)),
            None => Err(AuthError::Forbidden(format!(
                "the MUNGE credential was encoded on {}, which is no Slurm node's address",
                decoded.host
            ))),
        }
    }
}

impl IntakeAuth for MungeProfilers {
    fn authenticate<'a>(
        &'a self,
        headers: &'a HeaderMap,
    ) -> BoxFuture<'a, Result<Caller, AuthError>> {
        Box::pin(self.caller(headers))
    }
}
