//! The Slurm verbs, served beside the core's endpoints.
//!
//! | path | method | caller | what |
//! |---|---|---|---|
//! | `/v1/slurm/submit` | POST | job_submit.lua | where a job should run |
//! | `/v1/slurm/start` | POST | SPANK plugin | which GPU of its node a starting job gets |
//! | `/v1/slurm/finish` | POST | SPANK plugin | a job's run time, at its end |
//! | `/v1/slurm/placements` | GET | operators, tests | the placements, keyed ids only |
//!
//! The hook and the plugin speak the simplest format both can write without a library: the
//! body is `key=value` lines, the answer one line of words (`place NODE INDEX TOKEN`,
//! `refuse REASON`, `pass REASON`; `gpu INDEX [MPS_PERCENT]`, `none REASON`). A body that
//! does not parse is answered `400` naming the line; a caller that gets anything but `200`
//! leaves the job as it is (fail-open).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use tandem_adapter_core::declaration::{Carrier, Raw};
use tandem_adapter_core::http::{Failure, timed};
use tandem_adapter_core::{EngineError, Frontend, ObserveError};
use tandem_api::Objective;

use crate::app::{App, Grant, Start, Submission, Verdict};
use crate::identity::check_name;

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
            .with_state(self)
    }

    fn is_ready(&self) -> bool {
        App::is_ready(self)
    }
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

async fn submit(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let core = Arc::clone(&app.core);
    timed(&core, "submit", async move {
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

async fn start(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let core = Arc::clone(&app.core);
    timed(&core, "start", async move {
        let fields = Fields::parse("start", &body)?;
        let bad = |m: &str| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                format!("invalid start request: {m}"),
            )
        };
        let start = Start {
            slurm_job: fields
                .number("start", "job")?
                .ok_or_else(|| bad("`job` is missing"))?,
            node: fields
                .get("node")
                .ok_or_else(|| bad("`node` is missing"))?
                .to_owned(),
            token: fields.get("token").map(str::to_owned),
            submission: fields.submission("start")?,
        };
        let grant = app
            .start(start)
            .await
            .map_err(|e| engine_error(&app, "start", e))?;
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

async fn finish(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let core = Arc::clone(&app.core);
    timed(&core, "finish", async move {
        let fields = Fields::parse("finish", &body)?;
        let job: u32 = fields.number("finish", "job")?.ok_or_else(|| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid finish request: `job` is missing",
            )
        })?;
        let elapsed: f64 = fields.number("finish", "elapsed")?.unwrap_or(f64::NAN);
        Ok(if app.finish(job, elapsed).await {
            "recorded\n"
        } else {
            "unknown\n"
        })
    })
    .await
}

async fn placements(State(app): State<Arc<App>>) -> Response {
    let core = Arc::clone(&app.core);
    timed(&core, "placements", async move {
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
