//! The Slurm state machine on the real engine component: a placement made at submission is
//! taken only by a job of its user on its node, every step of a job gets the first answer, an
//! end is recorded only from the job's owner with a run time it can have had, and a placement
//! that never starts gives its GPU back.

use std::sync::Arc;
use std::time::Duration;

use tandem_adapter_core::{CoreConfig, EMBEDDED_ENGINE, JobKeys, resume_or_bootstrap};
use tandem_api::Policy;
use tandem_host::{HostConfig, Runtime};

use super::*;
use crate::auth::Method;

const ALICE: u32 = 1000;
const BOB: u32 = 2000;

/// The service's state over the embedded engine, on one node `n1` of two V100s; placements
/// that never start hold their GPU for `pending_ttl`.
async fn app(pending_ttl: Duration) -> Arc<App> {
    let runtime = Runtime::from_bytes(EMBEDDED_ENGINE, HostConfig::default()).unwrap();
    let policy = Policy::default();
    let (engine, stored) = resume_or_bootstrap(runtime, None, &policy).await.unwrap();
    let core = CoreConfig::new(engine, JobKeys::new(vec![9; 32]).unwrap())
        .resumed(stored)
        .queue(16)
        .start()
        .unwrap();
    let settings = Settings {
        gpu_memory: vec![("v100".into(), 16_384)],
        default_gpu_memory_mib: 16_384,
        policy,
        mps_percentage: Some(100),
        pending_ttl,
        model_dir: None,
        model_file_limit: 1 << 20,
    };
    let callers = Callers {
        method: Method::Open,
        slurm_uids: vec![0],
    };
    let app = Arc::new(App::new(Arc::new(core), settings, callers));
    let gpus = app.set_nodes(&[SlurmNode {
        name: "n1".into(),
        gpus: vec![("v100".into(), 2)],
        usable: true,
        addresses: Vec::new(),
    }]);
    assert_eq!(gpus, 2);
    app
}

fn submission(uid: u32, name: &str) -> Submission {
    Submission {
        uid,
        name: Some(name.into()),
        ..Submission::default()
    }
}

/// The placement a submission of `uid`'s job `name` got.
async fn placed(app: &Arc<App>, uid: u32, name: &str) -> (String, u32, String) {
    match app.submit(submission(uid, name)).await.unwrap() {
        Verdict::Place { node, index, token } => (node, index, token),
        other => panic!("{name} was not placed: {other:?}"),
    }
}

fn start(slurm_job: u32, uid: u32, name: &str, token: Option<&str>) -> Start {
    Start {
        slurm_job,
        node: "n1".into(),
        token: token.map(str::to_owned),
        submission: submission(uid, name),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_is_taken_only_by_a_job_of_its_user_and_every_step_gets_the_first_answer() {
    let app = app(Duration::from_secs(600)).await;
    let (node, index, token) = placed(&app, ALICE, "train").await;
    assert_eq!(node, "n1");
    assert!(is_token(&token), "{token}");

    // Bob presents Alice's token: refused, and the placement stays Alice's.
    let Err(StartError::Refused(why)) = app.start(start(7, BOB, "x", Some(&token))).await else {
        panic!("another user's job took the placement");
    };
    assert!(why.contains("another user's job"), "{why}");
    assert!(app.placements()[0].slurm_job.is_none());

    // Alice's job takes it; each later step of the job gets the same GPU.
    let granted = app
        .start(start(7, ALICE, "train", Some(&token)))
        .await
        .unwrap();
    assert_eq!(
        granted,
        Grant::Gpu {
            index,
            mps_percentage: Some(100)
        }
    );
    assert_eq!(
        app.start(start(7, ALICE, "train", None)).await.unwrap(),
        granted
    );
    // A step claiming the job for another user is refused.
    let Err(StartError::Refused(why)) = app.start(start(7, BOB, "train", None)).await else {
        panic!("a step of another user claimed the job");
    };
    assert!(why.contains(&format!("uid {ALICE}")), "{why}");
    assert!(app.runs_on(&app.placements()[0].job, "n1"));
    assert!(!app.runs_on(&app.placements()[0].job, "n2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_is_recorded_only_from_the_owner_with_a_run_time_the_job_can_have_had() {
    let app = app(Duration::from_secs(600)).await;
    let (_, _, token) = placed(&app, ALICE, "train").await;
    app.start(start(7, ALICE, "train", Some(&token)))
        .await
        .unwrap();

    assert!(matches!(
        app.finish(7, Some(1.0), Some(BOB)).await,
        Err(FinishError::NotOwner(_))
    ));
    for elapsed in [0.0, -1.0, f64::NAN, f64::INFINITY, 3600.0] {
        let refused = app.finish(7, Some(elapsed), Some(ALICE)).await;
        assert!(
            matches!(refused, Err(FinishError::Elapsed(_))),
            "{elapsed}: {refused:?}"
        );
    }
    assert_eq!(app.placements()[0].end, None, "a refused end was recorded");

    assert_eq!(app.finish(7, Some(0.5), Some(ALICE)).await, Ok(true));
    assert!(app.placements()[0].end.is_some());
    // A second step reporting the end changes nothing; a job Tandem never placed is not its.
    assert_eq!(app.finish(7, Some(0.5), Some(ALICE)).await, Ok(true));
    assert_eq!(app.finish(8, Some(0.5), Some(ALICE)).await, Ok(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_that_never_starts_gives_its_gpu_back_and_a_job_the_hook_missed_is_placed_at_start()
 {
    let app = app(Duration::ZERO).await;
    placed(&app, ALICE, "held").await;
    assert_eq!(app.placements().len(), 1);
    app.sweep();
    assert!(
        app.placements().is_empty(),
        "an unstarted placement outlived its TTL"
    );

    // A job submitted without the hook (srun) gets its GPU when it starts on its node.
    let Grant::Gpu { index, .. } = app.start(start(9, BOB, "srun", None)).await.unwrap() else {
        panic!("a job starting without a placement got no GPU");
    };
    let placements = app.placements();
    assert_eq!(placements.len(), 1);
    assert_eq!(
        (
            placements[0].uid,
            placements[0].index,
            placements[0].slurm_job
        ),
        (BOB, index, Some(9))
    );
    // Started, it is not swept however short the TTL.
    app.sweep();
    assert_eq!(app.placements().len(), 1);
}

#[test]
fn tokens_are_random_and_only_their_shape_passes() {
    let (a, b) = (new_token().unwrap(), new_token().unwrap());
    assert!(is_token(&a) && is_token(&b));
    assert_ne!(a, b);
    assert!(!is_token(&a.to_uppercase()));
    assert!(!is_token(&a[1..]));
    assert!(!is_token("not-a-token"));
}
