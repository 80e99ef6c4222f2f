//! Embedding Tandem's engine in a program of your own.
//!
//! The engine is a WebAssembly component (its interface: `wit/current/engine.wit`);
//! `tandem-host` runs it in a wasmtime sandbox with a memory cap and a deadline per call. This
//! program does what every scheduler integration of Tandem does, in a few dozen lines:
//!
//! 1. load the component (here the one embedded at build time, see `build.rs`);
//! 2. tell the engine what the profiler measured of three jobs (black-box telemetry only);
//! 3. describe a cluster — two V100s, one already running a job — and ask where a queue of two
//!    jobs should go;
//! 4. report how a pair actually ran together, and ask again.
//!
//! Run it with `cargo run -p tandem-example-embedding`.

use anyhow::Result;
use tandem_api::{Gpu, GpuSpec, Job, Outcome, Policy, Profile, Recommendation};
use tandem_host::{HostConfig, Runtime};

/// The engine component, built from this workspace and embedded by `tandem-engine-embedded`.
use tandem_engine_embedded::COMPONENT as ENGINE;

fn profile(gpu_util_pct: f32, mem_access_pct: f32, mem_used_mib: u32) -> Profile {
    Profile {
        gpu_util_pct,
        mem_access_pct,
        mem_used_mib,
        gpu_model: "V100".into(),
    }
}

fn print(title: &str, recommendation: &Recommendation) {
    println!("{title}");
    for placement in &recommendation.placements {
        println!(
            "  placed {:?} on {} beside {:?}: predicted slowdown {:.1?} %, packing saving {:.1} %",
            placement.jobs,
            placement.gpu,
            placement.residents,
            placement.predicted.slowdown_pct,
            placement.predicted.packing_saving_pct
        );
    }
    for unplaced in &recommendation.unplaced {
        println!("  kept {} queued: {}", unplaced.job, unplaced.reason);
    }
}

fn main() -> Result<()> {
    // 1. The sandbox, and an engine instance with the default objective (balanced) and the
    //    bundled priors; the seed makes its exploration reproducible.
    let runtime = Runtime::from_bytes(ENGINE, HostConfig::default())?;
    let mut engine = runtime.bootstrap(&Policy::default(), 7)?;

    // 2. What the profiler measured of each job in its first minute. Ids are opaque: a real
    //    host keys them (HMAC) so no job name reaches the engine.
    engine.observe_profile("light", &profile(30.0, 10.0, 3_000))?;
    engine.observe_profile("heavy", &profile(90.0, 65.0, 9_000))?;
    engine.observe_profile("resident", &profile(35.0, 15.0, 4_000))?;

    // 3. Two V100s of 16 GiB; node-a/0 already runs `resident`.
    let v100 = GpuSpec::new("V100", 16_384);
    let gpus = vec![
        Gpu {
            id: "node-a/0".into(),
            node: "node-a".into(),
            spec: v100.clone(),
            residents: vec![Job::new("resident")],
        },
        Gpu {
            id: "node-b/0".into(),
            node: "node-b".into(),
            spec: v100,
            residents: Vec::new(),
        },
    ];
    let queue = vec![Job::new("light"), Job::new("heavy")];
    print("before any outcome:", &engine.recommend(&queue, &gpus)?);

    // 4. A measured co-location: `light` and `resident` shared a V100 and each took longer than
    //    alone. The knowledge base learns it; the next answer uses it.
    engine.observe_outcome(&Outcome {
        gpu_model: "V100".into(),
        jobs: vec!["light".into(), "resident".into()],
        solo_s: vec![600.0, 900.0],
        colocated_s: vec![660.0, 950.0],
    })?;
    print(
        "after one measured outcome:",
        &engine.recommend(&queue, &gpus)?,
    );
    Ok(())
}
