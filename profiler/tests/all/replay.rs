//! The agent on recorded samples, delivering to a stand-in intake: the profiles it files, the
//! keys it uses, and that nothing identifying leaves the node.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use tandem_profiler::agent::{Agent, Settings};
use tandem_profiler::attribute::{Attributor, Identity, PodDirectory};
use tandem_profiler::post::{Backoff, Intake};
use tandem_profiler::sample::replay::ReplaySource;
use tandem_profiler::{Delivery, run_agent};
use tandem_wire::JobKeys;
use tandem_wire::intake::ProfilesRequest;

use crate::{ALPHA_UID, BETA_UID, FakeIntake, two_jobs};

const SECRET: [u8; 32] = [7; 32];

fn identity(namespace: &str, job: &str) -> Identity {
    Identity {
        namespace: namespace.to_owned(),
        job: job.to_owned(),
    }
}

async fn replay_into(fake: &FakeIntake, window: Duration) -> tandem_profiler::Summary {
    let pods = PodDirectory::Fixed(HashMap::from([
        (
            ALPHA_UID.to_owned(),
            identity("team-vision", "resnet50-finetune"),
        ),
        (
            BETA_UID.to_owned(),
            identity("team-nlp", "bert-large-pretrain"),
        ),
    ]));
    let agent = Agent::new(
        Attributor::new(PathBuf::from("/nonexistent-proc"), pods),
        Settings {
            window,
            grace: Duration::from_secs(10),
        },
    );
    let delivery = Delivery {
        intake: Intake::new(&fake.url, "intake-token".to_owned(), Backoff::default()).unwrap(),
        keys: JobKeys::new(SECRET.to_vec()).unwrap(),
        require_alone: false,
    };
    let source = Box::new(ReplaySource::open(&two_jobs()).unwrap());
    run_agent(source, agent, delivery, Duration::from_millis(50))
        .await
        .unwrap()
}

#[tokio::test]
async fn two_recorded_jobs_are_profiled_alone_first_and_posted_under_the_adapters_keys() {
    let fake = FakeIntake::start(Vec::new()).await;
    let summary = replay_into(&fake, Duration::from_secs(60)).await;
    let keys = JobKeys::new(SECRET.to_vec()).unwrap();
    let mut posted = summary.posted.clone();
    posted.sort_by_key(|r| r.profile.mem_used_mib);
    assert_eq!(posted.len(), 2, "{posted:?}");
    // The same function and identity the kube adapter keys pods with.
    assert_eq!(posted[0].job, keys.key("team-vision", "resnet50-finetune"));
    assert_eq!(posted[1].job, keys.key("team-nlp", "bert-large-pretrain"));
    // resnet: the 96% and 94% of 6-7 s were shared with a health check, not its own.
    let resnet = &posted[0].profile;
    assert_eq!(
        (
            resnet.gpu_util_pct,
            resnet.mem_access_pct,
            resnet.mem_used_mib
        ),
        (35.0, 12.0, 4_000)
    );
    assert_eq!(resnet.gpu_model, "V100");
    let bert = &posted[1].profile;
    assert_eq!(
        (bert.gpu_util_pct, bert.mem_access_pct, bert.mem_used_mib),
        (46.0, 21.0, 11_000)
    );
    let received = fake.received();
    assert_eq!(received.len(), 1, "one batch at the replay's end");
    assert_eq!(received[0].authorization, "Bearer intake-token");
    let body: ProfilesRequest = serde_json::from_str(&received[0].body).unwrap();
    assert_eq!(body.profiles.len(), 2);
}

#[tokio::test]
async fn nothing_identifying_leaves_the_node() {
    let fake = FakeIntake::start(Vec::new()).await;
    // A short window: profiles are posted while the replay runs, in several requests.
    replay_into(&fake, Duration::from_secs(3)).await;
    let received = fake.received();
    assert!(!received.is_empty());
    let recording = std::fs::read_to_string(two_jobs()).unwrap();
    for request in &received {
        let body = &request.body;
        for secret in [
            "team-vision",
            "resnet50",
            "team-nlp",
            "bert",
            ALPHA_UID,
            BETA_UID,
            "aaaaaaaa",
            "bbbbbbbb",
            "kubepods",
            "cri-containerd",
            "slice",
            "healthcheck",
            "4101",
            "4102",
            "5201",
            "pid",
            "Tesla",
            "SXM2",
        ] {
            assert!(!body.contains(secret), "{secret:?} left the node in {body}");
            // Guard the guard: each needle is in what the profiler read or was told.
            assert!(
                recording.contains(secret)
                    || recording.contains(&secret.replace('-', "_"))
                    || "team-vision resnet50 team-nlp bert".contains(secret),
                "{secret:?} is not something the profiler saw"
            );
        }
        // What is there: keyed ids, three numbers and a model, and nothing else.
        let value: serde_json::Value = serde_json::from_str(body).unwrap();
        for record in value["profiles"].as_array().unwrap() {
            let mut fields: Vec<&str> = record
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            fields.sort_unstable();
            assert_eq!(fields, ["job", "profile"]);
            let mut profile: Vec<&str> = record["profile"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            profile.sort_unstable();
            assert_eq!(
                profile,
                [
                    "gpu_model",
                    "gpu_util_pct",
                    "mem_access_pct",
                    "mem_used_mib"
                ]
            );
            assert!(tandem_wire::identity::is_keyed(
                record["job"].as_str().unwrap()
            ));
        }
    }
}
