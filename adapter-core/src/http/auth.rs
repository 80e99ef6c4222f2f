//! Who may call what: the scheduler's credential for the front-end's verbs, the intake's
//! callers and their scope, compared without revealing a matching prefix.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::Core;
use crate::intake::{AuthError, Caller, Scope};

use super::answer::Failure;

/// Whether `given` equals `expected`, without an early exit (timing does not reveal a matching
/// prefix).
pub(super) fn same_secret(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0_u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The token a request presents: `Authorization: Bearer <token>`, or the password of
/// `Authorization: Basic` (what an HTTP client sends for a URL `https://user:<token>@host/`).
pub(super) fn presented_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    if let Some(token) = value.strip_prefix("Bearer ") {
        return Some(token.trim().to_owned());
    }
    let encoded = value.strip_prefix("Basic ")?;
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    Some(decoded.split_once(':')?.1.to_owned())
}

/// Admits a caller of the scheduler verbs who proves to be the scheduler (see
/// [`crate::SchedulerAuth`]).
pub(super) async fn authenticate(
    State(core): State<Arc<Core>>,
    request: Request,
    next: Next,
) -> Response {
    let auth = &core.scheduler_auth;
    if auth.is_open() {
        return next.run(request).await;
    }
    let certified = auth.client_certificates
        && request
            .extensions()
            .get::<crate::serve::ClientCertificate>()
            .is_some_and(|c| c.0);
    let token = presented_token(request.headers());
    let tokened = match (&auth.token, &token) {
        (Some(expected), Some(given)) => same_secret(given, expected),
        _ => false,
    };
    if certified || tokened {
        return next.run(request).await;
    }
    let verb = request.uri().path().trim_start_matches('/').to_owned();
    core.metrics
        .unauthorized
        .get_or_create(&crate::metrics::Verb { verb: verb.clone() })
        .inc();
    tracing::warn!(
        verb,
        "refused a scheduler verb from a caller without the scheduler's credential"
    );
    let failure = if token.is_some() {
        Failure::new(StatusCode::FORBIDDEN, "wrong scheduler token")
    } else {
        Failure::new(
            StatusCode::UNAUTHORIZED,
            "the scheduler verbs need the scheduler's client certificate or token",
        )
    };
    failure.into_response()
}

/// Who is calling intake endpoint `verb`: the operator's token admits anything; a node
/// profiler the front-end's [`crate::intake::IntakeAuth`] authenticates may post profiles only
/// (which of its node's jobs, [`check_node`] checks). A refusal is counted by verb in
/// `tandem_unauthorized_total`.
pub(super) async fn authorize(
    core: &Core,
    headers: &HeaderMap,
    verb: &str,
) -> Result<Caller, Failure> {
    let refused = |failure: Failure| {
        core.metrics
            .unauthorized
            .get_or_create(&crate::metrics::Verb {
                verb: verb.to_owned(),
            })
            .inc();
        failure
    };
    let auth = core.intake_auth();
    if core.intake_token.is_none() && auth.is_none() {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "the intake is disabled: start the adapter with --intake-token-file",
        ));
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let caller = match (&core.intake_token, auth) {
        (Some(expected), _) if same_secret(given, expected) => Caller::operator(),
        (_, Some(auth)) => auth.authenticate(headers).await.map_err(|error| {
            let status = match &error {
                AuthError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
                AuthError::Forbidden(_) => StatusCode::FORBIDDEN,
                AuthError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            refused(Failure::new(status, error.to_string()))
        })?,
        (_, None) => {
            return Err(refused(Failure::new(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token",
            )));
        }
    };
    if let Scope::Node(node) = &caller.scope
        && verb != "profiles"
    {
        return Err(refused(Failure::new(
            StatusCode::FORBIDDEN,
            format!(
                "the profiler of node {node} may post only /v1/profiles, of its own node's jobs; \
                 /v1/{verb} takes the operator's intake token"
            ),
        )));
    }
    Ok(caller)
}
