//! The memory request bodies in flight may take, all requests together: a request is admitted
//! only if the body it declares fits what is left.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Permits are counted in KiB, so a budget of gigabytes fits a semaphore's `u32` requests.
pub(super) const KIB: usize = 1024;

/// The memory request bodies in flight may take, all requests together.
pub(super) struct BodyBudget {
    pub(super) permits: tokio::sync::Semaphore,
    pub(super) max_body_bytes: usize,
    pub(super) metrics: Arc<crate::metrics::Metrics>,
}

/// Admits a request only if the body it declares fits what is left of the budget (a body that
/// declares no length is counted at the largest size allowed); holds that share until the
/// answer is made. Requests without a body (`GET`: probes, metrics) are always admitted.
pub(super) async fn admit(
    State(budget): State<Arc<BodyBudget>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == axum::http::Method::GET {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(budget.max_body_bytes)
        .min(budget.max_body_bytes);
    let kib = u32::try_from(declared.div_ceil(KIB).max(1)).unwrap_or(u32::MAX);
    let Ok(_held) = budget.permits.try_acquire_many(kib) else {
        budget.metrics.bodies_refused.inc();
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            axum::Json(serde_json::json!({
                "error": "too many large requests in flight; retry shortly"
            })),
        )
            .into_response();
    };
    next.run(request).await
}
