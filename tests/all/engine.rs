//! The engine through the component answers exactly as the engine compiled natively.

use tandem_api::Policy;

#[test]
fn component_and_native_engine_agree_on_every_objective() {
    let runtime = super::engine_runtime();
    let queue = tandem_tests::queue(60, 3);
    let gpus = tandem_tests::cluster(24);
    for objective in tandem_api::Objective::ALL {
        let policy = Policy {
            objective,
            max_jobs_per_gpu: 3,
            exploration: 0.1,
        };
        let mut component = runtime.create(&policy, 11).unwrap();
        let native = tandem_engine::Recommender::new(policy.clone(), 11).unwrap();
        assert_eq!(
            component.recommend(&queue, &gpus).unwrap(),
            native.recommend(&queue, &gpus).unwrap(),
            "{objective}"
        );
        let job = &queue[0];
        assert_eq!(
            component.filter(job, &gpus).unwrap(),
            native.filter(job, &gpus).unwrap()
        );
        assert_eq!(
            component.score(job, &gpus).unwrap(),
            native.score(job, &gpus).unwrap()
        );
    }
}

#[test]
fn engine_errors_arrive_as_values_not_faults() {
    let runtime = super::engine_runtime();
    let bad = Policy {
        max_jobs_per_gpu: 0,
        ..Policy::default()
    };
    let err = runtime.create(&bad, 0).unwrap_err();
    assert!(!err.is_guest_fault());
    assert!(err.to_string().contains("max-jobs-per-gpu"), "{err}");
}
