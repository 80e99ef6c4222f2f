//! An adapter on the core answers its scheduler within its time limit whatever the engine
//! does: a looping engine costs one request its answer (the extender fails open), and the
//! next request is served by the engine rebuilt from its snapshot.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tandem_adapter_core::serve::serve_listener;
use tandem_adapter_core::{CoreConfig, EngineState, JobKeys, Limits, Shutdown};
use tandem_api::Policy;
use tandem_host::{HostConfig, Runtime};
use tandem_kube_adapter::Extender;
use tandem_kube_common::app::{App, ClusterFile, Source};
use tandem_kube_common::decide::FilterPasses;
use tandem_tests::components;

const TOKEN: &str = "intake-token-for-the-test";

fn pod(name: &str) -> Value {
    json!({
        "metadata": { "name": name, "namespace": "default", "uid": format!("uid-{name}") },
        "spec": { "containers": [{
            "name": "main",
            "resources": { "limits": { "nvidia.com/gpu": "1" } },
        }]},
    })
}

fn node() -> Value {
    json!({
        "metadata": { "name": "n1", "labels": {
            "nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB",
            "nvidia.com/gpu.memory": "16384",
        }},
        "status": { "allocatable": { "nvidia.com/gpu": "2" } },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_engine_costs_one_answer_in_time_and_the_next_request_is_served() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = Runtime::from_file(
        components::MISBEHAVING.as_ref(),
        HostConfig {
            // Longer than the decision's limit: the answer must not wait for the sandbox.
            call_deadline: Duration::from_millis(900),
            memory_cap_bytes: 64 << 20,
            ..HostConfig::default()
        },
    )
    .expect("the misbehaving component loads");
    let recommender = runtime.create(&Policy::default(), 1).unwrap();
    let keys = JobKeys::new(vec![5; 32]).unwrap();
    let looping = keys.key("default", "looping");
    let limits = Limits {
        decision_wait: Duration::from_millis(300),
        request_timeout: Duration::from_secs(3),
        ..Limits::default()
    };
    let core = Arc::new(
        CoreConfig::new(EngineState::new(runtime, recommender), keys)
            .intake_token(Some(TOKEN.into()))
            .limits(limits)
            .queue(64)
            .start()
            .unwrap(),
    );
    // A node whose GPU model is `loop`: the intake takes profiles of models the cluster has.
    let looping_node = json!({
        "metadata": { "name": "n-loop", "labels": {
            "nvidia.com/gpu.product": "loop", "nvidia.com/gpu.memory": "16384",
        }},
        "status": { "allocatable": { "nvidia.com/gpu": "1" } },
    });
    let cluster: ClusterFile =
        serde_json::from_value(json!({ "nodes": [node(), looping_node] })).unwrap();
    let app = Arc::new(App::new(
        Arc::clone(&core),
        "nvidia.com/gpu".into(),
        Duration::from_secs(2),
        Source::Fixed(cluster),
    ));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, shutdown) = Shutdown::new();
    let extender = Arc::new(Extender::new(app, FilterPasses::default()));
    let router = tandem_adapter_core::http::router(Arc::clone(&core), extender);
    let server = tokio::spawn(serve_listener(router, listener, shutdown));
    let client = reqwest::Client::new();

    let filter = |name: &str| {
        client
            .post(format!("{base}/filter"))
            .json(&json!({ "Pod": pod(name), "NodeNames": ["n1"] }))
            .send()
    };
    // A first decision tells the engine the cluster (and its models).
    let first: Value = filter("first").await.unwrap().json().await.unwrap();
    assert_eq!(first["Error"], "", "{first}");
    // The misbehaving engine spins on a job it observed on GPU model `loop`.
    let observed = client
        .post(format!("{base}/v1/profiles"))
        .bearer_auth(TOKEN)
        .json(&json!({ "profiles": [{ "job": looping, "profile": {
            "gpu_util_pct": 10.0, "mem_access_pct": 10.0, "mem_used_mib": 100, "gpu_model": "loop",
        }}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(observed.status(), 200, "{}", observed.text().await.unwrap());

    let started = Instant::now();
    let answer: Value = filter("looping").await.unwrap().json().await.unwrap();
    let took = started.elapsed();
    println!("the looping filter was answered after {took:?}: {answer}");
    // Answered as soon as the decision's time limit passed, while the engine still spins,
    // and as an error the scheduler skips (ignorable).
    assert!(took < Duration::from_millis(800), "{took:?}");
    assert!(
        answer["Error"]
            .as_str()
            .is_some_and(|e| e.contains("did not answer within 300ms")),
        "{answer}"
    );

    // Once the sandbox interrupted the loop and rebuilt the engine, the next pod is judged. The
    // rebuild recompiles nothing but takes longer on a loaded machine, so ask until it is done;
    // every answer while it is not is the same time-limit error, counted below.
    let rebuilt = Instant::now();
    let mut timed_out_while_rebuilding = 0;
    let answer = loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let answer: Value = filter("ordinary").await.unwrap().json().await.unwrap();
        if answer["Error"] == "" || rebuilt.elapsed() > Duration::from_secs(20) {
            break answer;
        }
        println!("still rebuilding after {:?}: {answer}", rebuilt.elapsed());
        timed_out_while_rebuilding += 1;
    };
    assert_eq!(answer["Error"], "", "{answer}");
    assert_eq!(answer["NodeNames"], json!(["n1"]), "{answer}");
    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let timeouts = format!(
        "tandem_engine_timeouts_total {}",
        1 + timed_out_while_rebuilding
    );
    assert!(metrics.contains(&timeouts), "{timeouts} in {metrics}");

    let _ = stop.send(true);
    let _ = server.await;
}
