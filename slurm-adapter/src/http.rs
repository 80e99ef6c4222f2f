//! The Slurm verbs, served beside the core's endpoints.
//!
//! | path | method | caller | what |
//! |---|---|---|---|
//! | `/v1/slurm/submit` | POST | job_submit.lua (SlurmUser) | where a job should run |
//! | `/v1/slurm/start` | POST | SPANK plugin (root, in slurmstepd) | which GPU of its node a starting job gets |
//! | `/v1/slurm/finish` | POST | SPANK plugin (root, in slurmstepd) | a job's run time, at its end |
//! | `/v1/slurm/placements` | GET | operators (root, SlurmUser) | the placements, keyed ids only, no tokens |
//!
//! Every verb is Slurm's own ([`crate::auth`]): a request is authenticated before its body is
//! read as fields (`401` without a credential, with a replayed one, or with one made for
//! another request; `503` when munged cannot be asked), and a caller that is not Slurm itself
//! gets `403` naming its uid. Each refusal is counted in `tandem_unauthorized_total{verb}`.
//!
//! The hook and the plugin speak the simplest format both can write without a library: the
//! body is `key=value` lines (at most [`MAX_BODY`] bytes), the answer one line of words
//! (`place NODE INDEX TOKEN`, `refuse REASON`, `pass REASON`; `gpu INDEX [MPS_PERCENT]`,
//! `none REASON`). A body that does not parse is answered `400` naming the line; a caller that
//! gets anything but `200` leaves the job as it is (fail-open).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse as _, Response};
use axum::routing::{get, post};
use tandem_adapter_core::declaration::{Carrier, Raw};
use tandem_adapter_core::http::{Failure, timed};
use tandem_adapter_core::serve::ClientCertificate;
use tandem_adapter_core::{EngineError, Frontend, ObserveError};
use tandem_api::Objective;

use crate::app::{App, FinishError, Grant, Start, StartError, Submission, Verdict};
use crate::auth::{self, Caller, CredentialError, Method, Who};
use crate::identity::check_name;

pub use crate::auth::MAX_BODY;

impl Frontend for App {
    const TYPE: &'static str = "Slurm job_submit hook and SPANK plugin";

    const VERBS: &'static [&'static str] = &[
        "v1/slurm/submit",
        "v1/slurm/start",
        "v1/slurm/finish",
        "v1/slurm/placements",
    ];

    fn routes(self: Arc<Self>) -> Router {
        Router::new()
            .route("/v1/slurm/submit", post(submit))
            .route("/v1/slurm/start", post(start))
            .route("/v1/slurm/finish", post(finish))
            .route("/v1/slurm/placements", get(placements))
            .route_layer(middleware::from_fn_with_state(
                Arc::clone(&self),
                authenticate,
            ))
            .with_state(self)
    }

    fn is_ready(&self) -> bool {
        App::is_ready(self)
    }
}

/// A refusal of `verb` to a caller who is not who the verb needs: counted, logged (without
/// anything the request said) and answered.
fn unauthorized(app: &App, verb: &str, status: StatusCode, message: String) -> Failure {
    app.core
        .metrics
        .unauthorized
        .get_or_create(&tandem_adapter_core::metrics::Verb {
            verb: verb.to_owned(),
        })
        .inc();
    tracing::warn!(verb, %status, "refused a Slurm verb: {message}");
    Failure::new(status, message)
}

/// Finds who made the request (see [`crate::auth`]) and hands it on with its [`Caller`], the
/// body read (at most [`MAX_BODY`] bytes) so that a MUNGE credential is checked against it.
async fn authenticate(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let verb = parts.uri.path().trim_start_matches('/').to_owned();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(_) => {
            return Failure::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("a Slurm verb's body is at most {MAX_BODY} bytes"),
            )
            .into_response();
        }
    };
    let callers = app.callers();
    let who = match &callers.method {
        Method::Open => Ok(Who::Anyone),
        Method::ClientCertificate => {
            let certified = parts
                .extensions
                .get::<ClientCertificate>()
                .is_some_and(|c| c.0);
            if certified {
                Ok(Who::Certificate)
            } else {
                Err((
                    StatusCode::UNAUTHORIZED,
                    "the Slurm verbs need a client certificate signed by the service's \
                     --client-ca (the SPANK plugin's tls_cert, job_submit.lua's TANDEM_TLS_CERT)"
                        .to_owned(),
                ))
            }
        }
        Method::Munge(unmunge) => {
            let given = parts
                .headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix(auth::SCHEME))
                .and_then(|v| v.strip_prefix(' '));
            match given {
                None => Err((
                    StatusCode::UNAUTHORIZED,
                    format!(
                        "the Slurm verbs need a MUNGE credential made for the request \
                         (`Authorization: {} <credential>`, the payload `<METHOD> <PATH>\\n<body>`)",
                        auth::SCHEME
                    ),
                )),
                Some(credential) => match unmunge.decode(credential).await {
                    Ok(decoded) => {
                        let expected =
                            auth::payload(parts.method.as_str(), parts.uri.path(), &body);
                        if decoded.payload == expected {
                            Ok(Who::Munge {
                                uid: decoded.uid,
                                gid: decoded.gid,
                                host: decoded.host,
                            })
                        } else {
                            Err((
                                StatusCode::UNAUTHORIZED,
                                format!(
                                    "the MUNGE credential (uid {}) was made for another request \
                                     than {} {}",
                                    decoded.uid,
                                    parts.method,
                                    parts.uri.path()
                                ),
                            ))
                        }
                    }
                    Err(error @ CredentialError::Unavailable(_)) => {
                        Err((StatusCode::SERVICE_UNAVAILABLE, error.to_string()))
                    }
                    Err(error) => Err((StatusCode::UNAUTHORIZED, error.to_string())),
                },
            }
        }
    };
    let caller = match who {
        Ok(who) => Caller::new(who, callers),
        Err((status, message)) => {
            return unauthorized(&app, &verb, status, message).into_response();
        }
    };
    let mut request = Request::from_parts(parts, Body::from(body));
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// `403` unless `caller` is Slurm itself.
fn only_slurm(app: &App, caller: &Caller, verb: &str, whose: &str) -> Result<(), Failure> {
    caller
        .require_slurm(verb, whose)
        .map_err(|m| unauthorized(app, &format!("v1/slurm/{verb}"), StatusCode::FORBIDDEN, m))
}

/// A `key=value` body.
#[derive(Debug, Default)]
pub struct Fields(HashMap<String, String>);

impl Fields {
    /// Parses `body`; a line without `=` or a key given twice is named.
    pub fn parse(what: &str, body: &[u8]) -> Result<Self, Failure> {
        let bad = |message: String| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                format!("invalid {what} request: {message}"),
            )
        };
        let text = std::str::from_utf8(body).map_err(|_| bad("the body is not UTF-8".into()))?;
        let mut fields = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| bad(format!("line {} is not key=value", i + 1)))?;
            if fields
                .insert(key.trim().to_owned(), value.trim().to_owned())
                .is_some()
            {
                return Err(bad(format!(
                    "line {}: `{}` is given twice",
                    i + 1,
                    key.trim()
                )));
            }
        }
        Ok(Self(fields))
    }

    /// The value of `key`, if given and not empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The value of `key` as a number.
    pub fn number<T: std::str::FromStr>(
        &self,
        what: &str,
        key: &str,
    ) -> Result<Option<T>, Failure> {
        self.get(key)
            .map(|v| {
                v.parse().map_err(|_| {
                    Failure::new(
                        StatusCode::BAD_REQUEST,
                        format!("invalid {what} request: `{key}` is not a number"),
                    )
                })
            })
            .transpose()
    }

    /// The submission the fields describe (`uid`, `name`, `objective`, and what the job
    /// declared: `priority`, `work`, `model`, `batch-size`).
    pub fn submission(&self, what: &str) -> Result<Submission, Failure> {
        let bad = |m: String| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                format!("invalid {what} request: {m}"),
            )
        };
        let uid = self
            .number(what, "uid")?
            .ok_or_else(|| bad("`uid` is missing".into()))?;
        let name = self.get("name").map(str::to_owned);
        if let Some(name) = &name {
            check_name(name).map_err(bad)?;
        }
        let objective = self
            .get("objective")
            .map(|o| {
                o.parse::<Objective>()
                    .map_err(|e| bad(format!("objective: {e}")))
            })
            .transpose()?;
        // The declaration's fields, by their keys (`priority`, `work`, `model`,
        // `batch-size`), checked with the job's other facts at submission.
        let declaration = Raw::from_lookup(Carrier::Options, |key| self.get(key));
        Ok(Submission {
            uid,
            name,
            objective,
            declaration,
        })
    }
}

/// The failure of `verb` whose engine call gave no answer to use; a call the engine did not
/// answer is counted as a fail-open answer of `verb`.
fn engine_error(app: &App, verb: &'static str, error: EngineError) -> Failure {
    if matches!(error, EngineError::Call(_)) {
        app.core.metrics.fail_open(verb);
    }
    Failure::from(ObserveError::from(error))
}

async fn submit(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Response {
    let core = Arc::clone(&app.core);
    timed(&core, "submit", async move {
        only_slurm(&app, &caller, "submit", "job_submit.lua's")?;
        let submission = Fields::parse("submit", &body)?.submission("submit")?;
        let verdict = app
            .submit(submission)
            .await
            .map_err(|e| engine_error(&app, "submit", e))?;
        Ok(match verdict {
            Verdict::Place { node, index, token } => {
                tracing::info!(node, gpu = index, "placed a submitted job");
                format!("place {node} {index} {token}\n")
            }
            Verdict::Refuse(why) => {
                tracing::info!("refused a submitted job: its memory fits no GPU");
                format!("refuse {}\n", one_line(&why))
            }
            Verdict::Pass(why) => format!("pass {}\n", one_line(&why)),
        })
    })
    .await
}

async fn start(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Response {
    let core = Arc::clone(&app.core);
    timed(&core, "start", async move {
        only_slurm(&app, &caller, "start", "the SPANK plugin's (slurmstepd's)")?;
        let fields = Fields::parse("start", &body)?;
        let bad = |m: &str| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                format!("invalid start request: {m}"),
            )
        };
        let token = fields.get("token").map(str::to_owned);
        if let Some(token) = &token
            && !crate::app::is_token(token)
        {
            return Err(bad("`token` is not a placement token"));
        }
        let start = Start {
            slurm_job: fields
                .number("start", "job")?
                .ok_or_else(|| bad("`job` is missing"))?,
            node: fields
                .get("node")
                .ok_or_else(|| bad("`node` is missing"))?
                .to_owned(),
            token,
            submission: fields.submission("start")?,
        };
        let grant = app.start(start).await.map_err(|e| match e {
            StartError::Engine(e) => engine_error(&app, "start", e),
            StartError::Refused(message) => {
                unauthorized(&app, "v1/slurm/start", StatusCode::FORBIDDEN, message)
            }
        })?;
        Ok(match grant {
            Grant::Gpu {
                index,
                mps_percentage: Some(mps),
            } => format!("gpu {index} {mps}\n"),
            Grant::Gpu { index, .. } => format!("gpu {index}\n"),
            Grant::None(why) => format!("none {}\n", one_line(&why)),
        })
    })
    .await
}

async fn finish(
    State(app): State<Arc<App>>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Response {
    let core = Arc::clone(&app.core);
    timed(&core, "finish", async move {
        only_slurm(&app, &caller, "finish", "the SPANK plugin's (slurmstepd's)")?;
        let fields = Fields::parse("finish", &body)?;
        let job: u32 = fields.number("finish", "job")?.ok_or_else(|| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid finish request: `job` is missing",
            )
        })?;
        let elapsed: Option<f64> = fields.number("finish", "elapsed")?;
        let uid: Option<u32> = fields.number("finish", "uid")?;
        match app.finish(job, elapsed, uid).await {
            Ok(true) => Ok("recorded\n"),
            Ok(false) => Ok("unknown\n"),
            Err(FinishError::Elapsed(message)) => Err(Failure::new(
                StatusCode::BAD_REQUEST,
                format!("invalid finish request: {message}"),
            )),
            Err(FinishError::NotOwner(message)) => Err(unauthorized(
                &app,
                "v1/slurm/finish",
                StatusCode::FORBIDDEN,
                message,
            )),
        }
    })
    .await
}

async fn placements(State(app): State<Arc<App>>, Extension(caller): Extension<Caller>) -> Response {
    let core = Arc::clone(&app.core);
    timed(&core, "placements", async move {
        only_slurm(
            &app,
            &caller,
            "placements",
            "the operators' (root's, SlurmUser's)",
        )?;
        Ok(axum::Json(serde_json::json!({
            "gpus": *app.gpus(),
            "placements": app.placements(),
        })))
    })
    .await
}

/// `text` on one line (the hook reads one).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_parse_and_bad_ones_are_named() {
        let fields =
            Fields::parse("t", b"uid=1000\nname=resnet~2\nobjective=max-packing\n").unwrap();
        let s = fields.submission("t").unwrap();
        assert_eq!((s.uid, s.name.as_deref()), (1000, Some("resnet~2")));
        assert_eq!(s.objective, Some(Objective::MaxPacking));
        let e = Fields::parse("t", b"uid=1\nnonsense\n").unwrap_err();
        assert!(e.message.contains("line 2"), "{}", e.message);
        let e = Fields::parse("t", b"uid=1\nuid=2").unwrap_err();
        assert!(e.message.contains("twice"), "{}", e.message);
        let e = Fields::parse("t", b"uid=x")
            .unwrap()
            .submission("t")
            .unwrap_err();
        assert!(e.message.contains("`uid`"), "{}", e.message);
        let e = Fields::parse("t", b"uid=1\nobjective=fastest")
            .unwrap()
            .submission("t")
            .unwrap_err();
        assert!(e.message.contains("fastest"), "{}", e.message);
    }
}
