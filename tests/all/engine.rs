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
            model_caps: Vec::new(),
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
fn component_and_native_engine_agree_on_the_cluster_view() {
    let runtime = super::engine_runtime();
    let (profiles, changes) = tandem_tests::busy_cluster(400, 12, 5);
    let mut component = runtime.bootstrap(&Policy::default(), 2).unwrap();
    let mut native = tandem_engine::Recommender::bootstrap(Policy::default(), 2).unwrap();
    for (id, profile) in &profiles {
        component.observe_profile(id, profile).unwrap();
        native.observe_profile(id, profile.clone()).unwrap();
    }
    let summary = component.update_cluster(&changes).unwrap();
    assert_eq!(summary, native.update_cluster(&changes).unwrap());
    assert!(summary.states < summary.gpus / 2, "{summary:?}");
    let job = &tandem_tests::queue(1, 9)[0];
    let scores = component.score_all(job).unwrap();
    assert_eq!(scores, native.score_all(job).unwrap());
    assert_eq!(scores.len(), 400);
    let bind = [tandem_api::ClusterChange::Bind(tandem_api::Binding {
        gpu: 1,
        job: job.clone(),
    })];
    component.update_cluster(&bind).unwrap();
    native.update_cluster(&bind).unwrap();
    assert_eq!(
        component.choose_gpu(job, "node-0").unwrap(),
        native.choose_gpu(job, "node-0").unwrap()
    );
    assert_eq!(
        component.explain(job, &[0, 1, 2]).unwrap(),
        native.explain(job, &[0, 1, 2]).unwrap()
    );
    assert_eq!(component.cluster().len(), 400);
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

/// Batch sizes and one percentage, shaped like a measured workload.
fn measured(label: &str, points: &[(f64, f64)]) -> tandem_api::Series {
    tandem_api::Series {
        workload: label.into(),
        samples: points
            .iter()
            .map(|&(batch_size, value)| tandem_api::Sample {
                batch_size,
                values: vec![value],
            })
            .collect(),
    }
}

#[test]
fn component_and_native_engine_synthesize_alike() {
    let runtime = super::engine_runtime();
    let truth = [
        measured(
            "w1",
            &[
                (2.0, 24.0),
                (32.0, 40.0),
                (128.0, 48.0),
                (256.0, 51.0),
                (1024.0, 46.0),
            ],
        ),
        measured("w2", &[(256.0, 68.0)]),
    ];
    let bounds = [Some((0.0, 100.0))];
    let component = runtime.synthesize(&truth, 3, &bounds).unwrap();
    let native = tandem_engine::synthesize(&truth, 3, &bounds).unwrap();
    assert_eq!(component, native);
    assert_eq!(component.scores.len(), 8);
    assert_eq!(component.best[1].method, tandem_api::Interpolation::Linear);
    assert!(!component.generated[0].samples.is_empty());
    assert!(component.generated[1].samples.is_empty());
}

#[test]
fn synthesis_errors_are_invalid_input_naming_the_workload_and_sample() {
    let runtime = super::engine_runtime();
    let truth = [measured("w1", &[(32.0, 40.0), (-4.0, 10.0)])];
    let err = runtime
        .synthesize(&truth, 3, &[Some((0.0, 100.0))])
        .unwrap_err();
    assert!(!err.is_guest_fault());
    match err {
        tandem_host::Error::Engine(tandem_api::EngineError::InvalidInput(message)) => {
            assert!(message.contains("\"w1\", sample 1"), "{message}");
        }
        other => panic!("expected invalid input, got {other}"),
    }
}
