//! The pods' specs against an API server played by the test over HTTP (the paths and bodies
//! kube-rs uses): the watch of this node's pods fills the cache, so a container's pod is known
//! without a request; a pod the watch has not brought is fetched, within the budget; a pod
//! whose fetch does not answer in time leaves its annotated container refused, not created
//! blind.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tandem_node::enforcer::Enforcer;
use tandem_node::inventory::{Gpu, Inventory};
use tandem_node::metrics::Metrics;
use tandem_node::nri::{Deadline, Handler as _, api};
use tandem_node::pods::{LookupError, PodSpecs, Source};
use tandem_node::verdict::{Fallback, MemoryLimit, Policy};

/// The API server's pods and what it was asked.
#[derive(Default)]
struct ApiServer {
    /// The pods bound to `node-a`, listed and watched.
    listed: Vec<Value>,
    /// The pods a GET finds, by name; a name absent never answers.
    fetchable: HashMap<String, Value>,
    /// The field selectors of the lists and watches.
    selectors: Mutex<Vec<String>>,
    /// GETs of one pod.
    gets: AtomicUsize,
}

fn pod(name: &str, gpus: u32) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a", "uid": format!("uid-{name}"),
                     "resourceVersion": "1"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "main", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    })
}

async fn pods(
    State(server): State<Arc<ApiServer>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if let Some(selector) = query.get("fieldSelector") {
        server.selectors.lock().unwrap().push(selector.clone());
    }
    if query
        .get("watch")
        .is_some_and(|watch| watch == "true" || watch == "1")
    {
        // A watch that stays open with nothing new.
        let quiet = futures::stream::pending::<Result<Vec<u8>, std::io::Error>>();
        return Body::from_stream(quiet).into_response();
    }
    axum::Json(json!({
        "apiVersion": "v1",
        "kind": "PodList",
        "metadata": {"resourceVersion": "1"},
        "items": server.listed,
    }))
    .into_response()
}

async fn one_pod(
    State(server): State<Arc<ApiServer>>,
    Path((_namespace, name)): Path<(String, String)>,
) -> Response {
    server.gets.fetch_add(1, Ordering::SeqCst);
    match server.fetchable.get(&name) {
        Some(pod) => axum::Json(pod.clone()).into_response(),
        None => {
            // An API server too slow to matter.
            std::future::pending::<()>().await;
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// Serves `server` on loopback; a client of it.
async fn serve(server: Arc<ApiServer>) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let app = Router::new()
        .route("/api/v1/pods", get(pods))
        .route("/api/v1/namespaces/{namespace}/pods/{name}", get(one_pod))
        .with_state(server);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let config = kube::Config::new(format!("http://{address}").parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

/// Waits until the watch has brought `count` pods.
async fn watched(specs: &PodSpecs, count: usize) {
    while specs.watched() < count {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_watch_of_this_nodes_pods_answers_without_a_request() {
    let server = Arc::new(ApiServer {
        listed: vec![pod("listed", 1)],
        ..ApiServer::default()
    });
    let specs = Arc::new(PodSpecs::new(
        serve(Arc::clone(&server)).await,
        "nvidia.com/gpu".into(),
    ));
    tokio::spawn(Arc::clone(&specs).watch("node-a".into()));
    watched(&specs, 1).await;
    let (requests, source) = specs
        .lookup("team-a", "listed", "uid-listed", Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!((requests.gpus, source), (1, Source::Watch));
    assert!(requests.container("main"));
    assert_eq!(server.gets.load(Ordering::SeqCst), 0);
    let selectors = server.selectors.lock().unwrap().clone();
    assert!(!selectors.is_empty());
    assert!(
        selectors.iter().all(|s| s == "spec.nodeName=node-a"),
        "{selectors:?}"
    );
}

#[tokio::test]
async fn a_pod_not_watched_yet_is_fetched_within_the_budget_or_its_placement_refused() {
    let server = Arc::new(ApiServer {
        fetchable: HashMap::from([("fetched".to_owned(), pod("fetched", 2))]),
        ..ApiServer::default()
    });
    let specs = Arc::new(PodSpecs::new(
        serve(Arc::clone(&server)).await,
        "nvidia.com/gpu".into(),
    ));
    let (requests, source) = specs
        .lookup("team-a", "fetched", "uid-fetched", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!((requests.gpus, source), (2, Source::Get));
    // Another container of the same pod: no second request.
    specs
        .lookup("team-a", "fetched", "uid-fetched", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(server.gets.load(Ordering::SeqCst), 1);
    // A pod of that name with another UID is another pod.
    let replaced = specs
        .lookup(
            "team-a",
            "fetched",
            "uid-of-a-new-pod",
            Duration::from_secs(5),
        )
        .await;
    assert!(
        matches!(replaced, Err(LookupError::Replaced)),
        "{replaced:?}"
    );

    // The API server does not answer: the annotated container is refused, within the budget.
    let budget = Duration::from_millis(200);
    let slow = specs
        .lookup("team-a", "slow", "uid-slow", budget)
        .await
        .unwrap_err();
    assert!(
        matches!(slow, LookupError::Timeout(b) if b == budget),
        "{slow}"
    );
    let metrics = Arc::new(Metrics::default());
    let inventory = Inventory::new(vec![Gpu {
        index: 0,
        uuid: "GPU-0".into(),
        minor: 0,
        name: "Tesla V100-SXM2-16GB".into(),
        memory_mib: 16_384,
    }])
    .unwrap();
    let enforcer = Enforcer::new(
        Policy {
            node: "node-a".into(),
            resource: "nvidia.com/gpu".into(),
            without_annotation: Fallback::Leave,
            other_node: Fallback::Refuse,
            unsigned: Fallback::Refuse,
            memory: MemoryLimit::Report,
            all_gpus_namespaces: Default::default(),
        },
        inventory,
        None,
        specs,
        Arc::clone(&metrics),
    )
    .with_budget(budget);
    let sandbox = api::PodSandbox {
        name: "slow".into(),
        uid: "uid-slow".into(),
        namespace: "team-a".into(),
        annotations: HashMap::from([("tandem.dev/gpu".to_owned(), "node-a/0".to_owned())]),
        ..api::PodSandbox::default()
    };
    let container = api::Container {
        name: "main".into(),
        ..api::Container::default()
    };
    let refusal = enforcer
        .create_container(sandbox, container, Deadline::from_request(2_000_000_000))
        .await
        .unwrap_err();
    assert!(
        refusal.contains("its spec could not be read")
            && refusal.contains("the API server did not answer within"),
        "{refusal}"
    );
    let text = metrics.encode();
    assert!(
        text.contains(r#"tandem_node_containers_total{case="spec_unknown",action="refused"} 1"#),
        "{text}"
    );
    assert!(
        text.contains("tandem_node_pod_lookup_errors_total 1"),
        "{text}"
    );
}
