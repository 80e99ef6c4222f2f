//! Integration tests of `tandem-profiler`: the agent on recorded samples against a stand-in
//! intake (what it sends, and that nothing identifying is in it), delivery retries, and the
//! binary's behaviour without NVML.

mod binary;
mod intake;
mod replay;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

/// A request the stand-in intake received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its `Authorization` header.
    pub authorization: String,
    /// Its body, as sent.
    pub body: String,
}

/// A stand-in for an adapter's intake on a loopback port: records every request and answers
/// with the statuses given, in order (then `200` with an empty profiles answer).
pub struct FakeIntake {
    /// Its base URL.
    pub url: String,
    /// What it received.
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl FakeIntake {
    /// Starts it on a free loopback port.
    pub async fn start(statuses: Vec<StatusCode>) -> Self {
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let statuses = Arc::new(Mutex::new(statuses.into_iter()));
        let log = Arc::clone(&received);
        let app = Router::new().route(
            "/v1/profiles",
            post(move |headers: HeaderMap, body: String| {
                let log = Arc::clone(&log);
                let statuses = Arc::clone(&statuses);
                async move {
                    log.lock().unwrap().push(Received {
                        authorization: headers
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned(),
                        body,
                    });
                    match statuses.lock().unwrap().next() {
                        Some(status) => (status, r#"{"error": "not now"}"#.to_owned()),
                        None => (StatusCode::OK, r#"{"assignments": []}"#.to_owned()),
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, received }
    }

    /// What it received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// The recorded samples of two pods, `profiler/testdata/two-jobs.jsonl`.
pub fn two_jobs() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/two-jobs.jsonl")
}

/// Pod UIDs in `two-jobs.jsonl`.
pub const ALPHA_UID: &str = "aaaaaaaa-0000-4000-8000-00000000000a";
/// See [`ALPHA_UID`].
pub const BETA_UID: &str = "bbbbbbbb-0000-4000-8000-00000000000b";
