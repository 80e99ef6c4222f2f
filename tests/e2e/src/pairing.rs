//! The pairing scenario every scheduler path of the node tier runs: the same jobs, the same
//! measured outcomes, the same residents, so each path must reach the same placements — and
//! each container must see the GPU its placement names.
//!
//! Two nodes of four GPUs ([`NODE_A`], [`NODE_B`]). A memory-hungry job (`fill`) holds every
//! GPU but `NODE_A/2` and `NODE_B/3`; `x` runs on `NODE_A/2`, `y` on `NODE_B/3`. The outcomes
//! say `p` suffers little beside `x` and much beside `y`, and `w` the reverse: Tandem pairs `p`
//! with `x` and keeps `w` apart from it, beside `y`.

/// The first node.
pub const NODE_A: &str = "tandem-a";
/// The second node.
pub const NODE_B: &str = "tandem-b";

/// Each job's profile on a V100: (job, SM utilization %, memory access %, memory MiB).
/// `fill` leaves no room beside it on a 16 GiB GPU; `s` and `t` are short jobs that learn.
pub const PROFILES: &[(&str, f32, f32, u32)] = &[
    ("fill", 60.0, 30.0, 14_000),
    ("x", 35.0, 12.0, 4_000),
    ("y", 92.0, 70.0, 5_000),
    ("p", 45.0, 20.0, 4_500),
    ("w", 88.0, 65.0, 4_800),
    ("s", 30.0, 10.0, 2_000),
    ("t", 32.0, 11.0, 2_200),
];

/// Measured co-locations on a V100, each observed three times: (job, partner, their run
/// times together in seconds, both 100 s alone).
pub const PAIRS: &[(&str, &str, [f64; 2])] = &[
    ("p", "x", [112.0, 110.0]),
    ("p", "y", [195.0, 160.0]),
    ("w", "x", [190.0, 170.0]),
    ("w", "y", [115.0, 112.0]),
];

/// How many times each pair was observed.
pub const OBSERVED: usize = 3;

/// The residents placed before the scenario, as earlier decisions of Tandem's: (pod, job,
/// node, GPU index).
pub const RESIDENTS: &[(&str, &str, &str, u32)] = &[
    ("fill-a-0", "fill", NODE_A, 0),
    ("fill-a-1", "fill", NODE_A, 1),
    ("fill-a-3", "fill", NODE_A, 3),
    ("fill-b-0", "fill", NODE_B, 0),
    ("fill-b-1", "fill", NODE_B, 1),
    ("fill-b-2", "fill", NODE_B, 2),
    ("x-run", "x", NODE_A, 2),
    ("y-run", "y", NODE_B, 3),
];

/// Where Tandem should place `p` (beside `x`).
pub const P_GOES_TO: (&str, u32) = (NODE_A, 2);
/// Where Tandem should place `w` (kept apart from `x`, beside `y`).
pub const W_GOES_TO: (&str, u32) = (NODE_B, 3);

/// The memory Tandem's guard reserves for `job` on a V100, as placements of the residents
/// carry it: its profile's memory (0 for a job [`PROFILES`] does not name).
pub fn reserved_mib(job: &str) -> u32 {
    PROFILES
        .iter()
        .find(|(name, ..)| *name == job)
        .map_or(0, |(.., mib)| *mib)
}
