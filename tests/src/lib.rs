//! Shared pieces of Tandem's cross-crate tests and benchmarks: where the test components are,
//! and seeded generators of realistic queues.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tandem_api::{ClusterChange, Gpu, GpuSpec, Job, Profile, ViewGpu};

/// Paths of the components the tests load: the engine, and the misbehaving guest built by this
/// crate's build script.
pub mod components {
    /// The engine component (`tandem-engine-component`).
    pub const ENGINE: &str = tandem_engine_embedded::PATH;
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

/// A busy cluster for the view calls (WIT 0.4.0): `workloads` recurring workloads `w0`…
/// with profiles drawn from `seed` (to observe first), and changes describing `gpus` GPUs as
/// [`cluster`] lays them out, every other one running one or two instances of those
/// workloads (`w<k>~<n>`, known to the engine by their workload's profile only).
pub fn busy_cluster(
    gpus: usize,
    workloads: usize,
    seed: u64,
) -> (Vec<(String, Profile)>, Vec<ClusterChange>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let profiles: Vec<(String, Profile)> = queue(workloads, seed ^ 0x5eed)
        .into_iter()
        .enumerate()
        .map(|(w, job)| {
            let mut profile = job.profile.expect("queue jobs are profiled");
            // Residents share a GPU: keep each under half of the smallest GPU.
            profile.mem_used_mib = profile.mem_used_mib.min(5_000);
            (format!("w{w}"), profile)
        })
        .collect();
    let changes = cluster(gpus)
        .into_iter()
        .enumerate()
        .map(|(g, mut gpu)| {
            if g % 2 == 0 {
                let residents = rng.gen_range(1..=2);
                gpu.residents = (0..residents)
                    .map(|r| Job::new(format!("w{}~{g}-{r}", rng.gen_range(0..workloads))))
                    .collect();
            }
            ClusterChange::SetGpu(ViewGpu {
                handle: g as u32,
                gpu,
            })
        })
        .collect();
    (profiles, changes)
}
