//! Shared pieces of Tandem's cross-crate tests and benchmarks: where the test components are,
//! and seeded generators of realistic queues.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tandem_api::{Gpu, GpuSpec, Job, Profile};

/// Paths of the components built by this crate's build script.
pub mod components {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}

/// GPU models and their memory, as in a mixed cluster (MiB).
const MODELS: [(&str, u32); 3] = [("K80", 12_288), ("P100", 16_384), ("V100", 16_384)];

/// `gpus` GPUs, four per node, cycling through K80, P100 and V100, with no residents.
pub fn cluster(gpus: usize) -> Vec<Gpu> {
    (0..gpus)
        .map(|i| {
            let (model, memory) = MODELS[i % MODELS.len()];
            let node = format!("node-{}", i / 4);
            Gpu {
                id: format!("{node}/{}", i % 4),
                node,
                spec: GpuSpec::new(model, memory),
                residents: Vec::new(),
            }
        })
        .collect()
}

/// `jobs` profiled jobs drawn from `seed`: utilization 5..95%, memory access 2..60%, memory
/// 0.5..12 GiB, the spread of the Futurewei mini-ML workload set.
pub fn queue(jobs: usize, seed: u64) -> Vec<Job> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..jobs)
        .map(|i| {
            Job::profiled(
                format!("job-{i}"),
                Profile {
                    gpu_util_pct: rng.gen_range(5.0..95.0),
                    mem_access_pct: rng.gen_range(2.0..60.0),
                    mem_used_mib: rng.gen_range(512..12_288),
                    gpu_model: "V100".into(),
                },
            )
        })
        .collect()
}
