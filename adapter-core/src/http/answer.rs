//! What the verbs share to answer: parsing a body with the offending field named, timing an
//! answer, and the answer that is not the verb's normal result ([`Failure`]).

use std::time::Instant;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use tandem_wire::intake::TOO_MANY_ITEMS;

use crate::metrics::Answered;

use crate::{Core, ObserveError};

/// An answer that is not the verb's normal result.
#[derive(Debug)]
pub struct Failure {
    /// The status to answer with.
    pub status: StatusCode,
    /// What went wrong, for the caller.
    pub message: String,
    /// When to try again (`Retry-After`), for a refusal that passes.
    pub retry_after: Option<std::time::Duration>,
}

impl Failure {
    /// A failure with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            axum::Json(serde_json::json!({ "error": self.message })),
        )
            .into_response();
        if let Some(wait) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, wait.as_secs().max(1).into());
        }
        response
    }
}

impl From<ObserveError> for Failure {
    fn from(error: ObserveError) -> Self {
        let status = match &error {
            // Nothing more fits: retrying will not help until something is forgotten.
            ObserveError::Store(crate::store::StoreError::TooLarge { .. }) => {
                StatusCode::INSUFFICIENT_STORAGE
            }
            ObserveError::NotLeader(_) | ObserveError::Store(_) | ObserveError::Call(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ObserveError::Engine(e) if e.is_refusal() => StatusCode::BAD_REQUEST,
            // The engine took it, and cannot load what it made: retrying will not help.
            ObserveError::Unloadable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ObserveError::Engine(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, tandem_telemetry::report(&error))
    }
}

/// Parses a JSON body of request `what`, naming the field that is wrong.
pub fn parse<T: DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, Failure> {
    // Tracking the path costs on every element of a large request (a `filter` names hundreds
    // of nodes), and only an error reads it: a body that fails is decoded again, with it.
    if let Ok(parsed) = serde_json::from_slice(body) {
        return Ok(parsed);
    }
    let mut json = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut json).map_err(|e| {
        let path = e.path().to_string();
        // `.` is the whole body, `?` a body that ended before any field.
        let at = if path == "." || path == "?" {
            String::new()
        } else {
            format!(" at `{path}`")
        };
        let error = e.into_inner().to_string();
        let status = if error.contains(TOO_MANY_ITEMS) {
            StatusCode::PAYLOAD_TOO_LARGE
        } else {
            StatusCode::BAD_REQUEST
        };
        Failure::new(status, format!("invalid {what} request{at}: {error}"))
    })
}

/// Times and counts one verb; `Err` answers are counted as `rejected` (4xx) or `error`.
pub async fn timed<T: IntoResponse>(
    core: &Core,
    verb: &str,
    work: impl Future<Output = Result<T, Failure>>,
) -> Response {
    let started = Instant::now();
    let answer = work.await;
    let result = match &answer {
        Ok(_) => Answered::Ok,
        Err(f) if f.status.is_client_error() => Answered::Rejected,
        Err(_) => Answered::Error,
    };
    if let Err(f) = &answer {
        // The message goes to the caller only: a rejected body may quote what it was sent,
        // and logs must never carry names (docs/RELIABILITY.md, "Privacy").
        tracing::warn!(verb, status = %f.status, "request failed");
    }
    core.metrics
        .record(verb, result, started.elapsed().as_secs_f64());
    match answer {
        Ok(body) => body.into_response(),
        Err(f) => f.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use tandem_wire::intake::{MAX_BATCH_ITEMS, bounded};

    #[derive(Debug, Deserialize, PartialEq)]
    struct Request {
        pod: Named,
        #[serde(deserialize_with = "bounded")]
        nodes: Vec<String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Named {
        name: String,
    }

    #[test]
    fn a_body_is_parsed_and_a_bad_one_is_refused_naming_the_field() {
        let ok: Request = parse("filter", br#"{"pod":{"name":"a"},"nodes":["n1","n2"]}"#).unwrap();
        assert_eq!(ok.nodes, ["n1", "n2"]);
        let bad = parse::<Request>("filter", br#"{"pod":{"name":7},"nodes":[]}"#).unwrap_err();
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        assert!(
            bad.message
                .starts_with("invalid filter request at `pod.name`: invalid type"),
            "{}",
            bad.message
        );
        let broken = parse::<Request>("filter", b"{").unwrap_err();
        assert!(
            broken.message.starts_with("invalid filter request: "),
            "{}",
            broken.message
        );
    }

    #[test]
    fn a_list_past_the_bound_is_refused_as_too_large() {
        let nodes = vec!["n"; MAX_BATCH_ITEMS + 1];
        let body = serde_json::json!({ "pod": { "name": "a" }, "nodes": nodes }).to_string();
        let refused = parse::<Request>("observe", body.as_bytes()).unwrap_err();
        assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(
            refused.message.contains("at `nodes`"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn an_engine_refusal_answers_400_with_its_cause_and_a_failure_500() {
        let refused = Failure::from(ObserveError::Engine(crate::EngineFailure {
            call: "predict",
            source: tandem_host::Error::Engine(tandem_api::EngineError::InvalidInput(
                "no jobs".into(),
            )),
        }));
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        // The cause is the failure's source, not part of its message: the answer names both.
        assert!(
            refused.message.starts_with("engine predict failed: ")
                && refused.message.ends_with("no jobs"),
            "{}",
            refused.message
        );
        let broken = Failure::from(ObserveError::Engine(crate::engine::failed("load")(
            tandem_host::Error::NotWasm,
        )));
        assert_eq!(broken.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            broken.message,
            format!("engine load failed: {}", tandem_host::Error::NotWasm)
        );
    }
}
