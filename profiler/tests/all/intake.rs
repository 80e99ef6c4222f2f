//! Delivery: what may pass is retried with back-off, a refusal is not.

use std::time::Duration;

use axum::http::StatusCode;
use tandem_api::Profile;
use tandem_profiler::post::{Backoff, Intake, PostError, ProfileRecord, ProfilesRequest};

use crate::FakeIntake;

fn request() -> ProfilesRequest {
    ProfilesRequest {
        profiles: vec![ProfileRecord {
            job: "0123456789abcdef0123456789abcdef".to_owned(),
            profile: Profile {
                gpu_util_pct: 40.0,
                mem_access_pct: 10.0,
                mem_used_mib: 1_000,
                gpu_model: "V100".to_owned(),
            },
        }],
    }
}

fn quick(attempts: u32) -> Backoff {
    Backoff {
        first: Duration::from_millis(10),
        max: Duration::from_millis(40),
        attempts,
    }
}

#[tokio::test]
async fn an_adapter_without_a_leader_yet_is_retried_until_it_files_the_profiles() {
    let fake = FakeIntake::start(vec![
        StatusCode::SERVICE_UNAVAILABLE,
        StatusCode::BAD_GATEWAY,
    ])
    .await;
    let intake = Intake::new(&fake.url, "s3cret".to_owned(), quick(5)).unwrap();
    intake.post(&request()).await.unwrap();
    let received = fake.received();
    assert_eq!(received.len(), 3);
    assert!(received.iter().all(|r| r.authorization == "Bearer s3cret"));
}

#[tokio::test]
async fn a_refusal_is_not_retried_and_an_outage_is_given_up_on() {
    let fake = FakeIntake::start(vec![StatusCode::UNAUTHORIZED]).await;
    let intake = Intake::new(&fake.url, "wrong".to_owned(), quick(5)).unwrap();
    let error = intake.post(&request()).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "the intake answered 401 Unauthorized: not now"
    );
    assert_eq!(fake.received().len(), 1);

    let fake = FakeIntake::start(vec![StatusCode::SERVICE_UNAVAILABLE; 10]).await;
    let intake = Intake::new(&fake.url, "t".to_owned(), quick(3)).unwrap();
    let error = intake.post(&request()).await.unwrap_err();
    assert!(
        matches!(error, PostError::GaveUp { attempts: 3, .. }),
        "{error}"
    );
    assert_eq!(fake.received().len(), 3);

    // Nobody listening: a transport error, retried, then given up on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let intake = Intake::new(&url, "t".to_owned(), quick(2)).unwrap();
    let error = intake.post(&request()).await.unwrap_err();
    let PostError::GaveUp { attempts: 2, last } = error else {
        panic!("{error}");
    };
    assert!(matches!(*last, PostError::Transport(_)));
}

#[tokio::test]
async fn a_token_file_is_read_again_for_each_post_so_a_rotated_token_is_presented() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, "first-token\n").unwrap();
    let fake = FakeIntake::start(Vec::new()).await;
    let intake = Intake::with_token_file(&fake.url, &path, quick(2), None).unwrap();
    intake.post(&request()).await.unwrap();
    // The kubelet rotates a projected token in place.
    std::fs::write(&path, "second-token\n").unwrap();
    intake.post(&request()).await.unwrap();
    let presented: Vec<String> = fake
        .received()
        .iter()
        .map(|r| r.authorization.clone())
        .collect();
    assert_eq!(presented, ["Bearer first-token", "Bearer second-token"]);
    // A file that cannot be read fails at once, naming it.
    let missing = dir.path().join("missing");
    let error = Intake::with_token_file(&fake.url, &missing, quick(2), None).unwrap_err();
    assert!(error.to_string().contains("missing"), "{error}");
}
