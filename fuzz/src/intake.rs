//! The adapter core's intake bodies (`/v1/profiles`, `/v1/outcomes`, `/v1/predict`,
//! `/v1/estimate`), parsed with `tandem_adapter_core::http::parse` as the adapters do: any body
//! is a request or a `400` (`413` past `MAX_BATCH_ITEMS` items) naming the endpoint, and an
//! accepted batch holds at most `MAX_BATCH_ITEMS` items.

use serde::de::DeserializeOwned;
use tandem_adapter_core::http::{
    EstimateRequest, Failure, MAX_BATCH_ITEMS, OutcomesRequest, PredictRequest, ProfilesRequest,
    parse,
};

/// Feeds one input to the target.
pub fn run(body: &[u8]) {
    if let Some(request) = accepted::<ProfilesRequest>("profiles", body) {
        assert!(request.profiles.len() <= MAX_BATCH_ITEMS);
    }
    if let Some(request) = accepted::<OutcomesRequest>("outcomes", body) {
        assert!(request.outcomes.len() <= MAX_BATCH_ITEMS);
    }
    let _ = accepted::<PredictRequest>("predict", body);
    if let Some(request) = accepted::<EstimateRequest>("estimate", body) {
        assert!(request.gpus.len() <= MAX_BATCH_ITEMS);
    }
}

/// The request in `body`, or `None` after checking that the refusal is the caller's fault and
/// names the endpoint.
fn accepted<T: DeserializeOwned>(what: &str, body: &[u8]) -> Option<T> {
    match parse::<T>(what, body) {
        Ok(request) => Some(request),
        Err(Failure {
            status, message, ..
        }) => {
            assert!(
                status == 400 || status == 413,
                "{what}: a body is refused with {status}"
            );
            assert!(
                message.starts_with(&format!("invalid {what} request")),
                "{what}: the refusal does not name the request: {message}"
            );
            None
        }
    }
}
