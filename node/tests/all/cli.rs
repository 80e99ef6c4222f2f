//! The `tandem-node` binary's refusals to start: without the keys to verify placements with
//! (unless told to honour them unverified), or with a key file that holds none.

use std::process::Command;

fn tandem_node(args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let gpus = dir.path().join("gpus.json");
    std::fs::write(
        &gpus,
        r#"{"gpus": [{"index": 0, "uuid": "GPU-0", "minor": 0, "memory_mib": 16384}]}"#,
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tandem-node"))
        .args(["--node", "node-a", "--gpus"])
        .arg(&gpus)
        .args(args)
        .current_dir(dir.path())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn without_placement_keys_it_refuses_to_start() {
    let (code, stderr) = tandem_node(&[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "--placement-keys (or --insecure-unsigned-placements) is required (unless --list-gpus)"
        ),
        "{stderr}"
    );
}

#[test]
fn a_key_file_without_a_key_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("placement.pub");
    std::fs::write(&keys, "not a key\n").unwrap();
    let (code, stderr) = tandem_node(&["--placement-keys", keys.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("placement.pub are not Ed25519 public keys or certificates")
            && stderr.contains("no PUBLIC KEY or CERTIFICATE"),
        "{stderr}"
    );
}

#[test]
fn honouring_unsigned_placements_is_a_choice_it_warns_about() {
    // It then reads its kubeconfig, which this test makes sure is missing: the warning comes
    // first.
    let (code, stderr) = tandem_node(&[
        "--insecure-unsigned-placements",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("placements are honoured without checking their signatures"),
        "{stderr}"
    );
    assert!(
        stderr.contains("cannot configure the Kubernetes client"),
        "{stderr}"
    );
}
