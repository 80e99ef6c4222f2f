//! The `tandem-profiler` binary: a clear message without NVML, `--once` on a recording.

use std::process::Command;

use tandem_profiler::sample::SampleError;
use tandem_profiler::sample::nvml::NvmlSource;

use crate::two_jobs;

fn profiler() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tandem-profiler"));
    command
        .env("RUST_LOG", "warn")
        .env_remove("NODE_NAME")
        .env_remove("KUBECONFIG");
    command
}

#[test]
fn without_nvml_the_profiler_says_so_and_exits_3_without_panicking() {
    let driver = NvmlSource::open();
    let output = profiler().arg("--once").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    match driver {
        Err(SampleError::NvmlUnavailable(_)) => {
            assert_eq!(output.status.code(), Some(3), "{stderr}");
            assert!(
                stderr.starts_with(
                    "tandem-profiler: NVML not available (no NVIDIA driver on this node): "
                ),
                "{stderr}"
            );
            assert!(stderr.contains("libnvidia-ml.so.1"), "{stderr}");
            // The loader's reason once, not once per layer that quotes it.
            assert_eq!(
                stderr.matches("cannot open shared object file").count(),
                1,
                "{stderr}"
            );
            assert!(!stderr.contains("panicked"), "{stderr}");
            println!("{stderr}");
        }
        // A GPU node: --once shows its devices.
        Ok(_) => assert!(output.status.success(), "{stderr}"),
        Err(other) => panic!("NVML failed otherwise: {other}"),
    }
}

#[test]
fn once_on_a_recording_shows_devices_processes_and_jobs() {
    let output = profiler()
        .args(["--once", "--format", "json", "--replay"])
        .arg(two_jobs())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let view: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(view["devices"].as_array().unwrap().len(), 2);
    assert_eq!(view["devices"][0]["model"], "V100");
    assert_eq!(view["processes"].as_array().unwrap().len(), 3);
    // Without --node, pods are seen but cannot be named.
    let jobs = view["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j["job"].is_null()), "{jobs:?}");
    assert_eq!(jobs[0]["basis"], "alone");

    let table = profiler()
        .arg("--once")
        .arg("--replay")
        .arg(two_jobs())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("Tesla V100-SXM2-16GB"), "{text}");
    assert!(
        text.contains("pod aaaaaaaa-0000-4000-8000-00000000000a"),
        "{text}"
    );
}

#[test]
fn the_agent_needs_its_adapter_token_and_secret() {
    let output = profiler().arg("--replay").arg(two_jobs()).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--id-secret-file is required (unless --once)"),
        "{stderr}"
    );
}
