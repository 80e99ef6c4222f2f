//! The three features the knowledge base works on, normalized to comparable scales.
//!
//! A profile becomes `[util, access, memory]`, each in 0..=1: SM utilization and memory-access
//! share as fractions, and memory used as a share of the GPU model's memory (what PriRecT's
//! MGMAP measures). Profiles carry the model name, not its capacity, so the capacity comes from
//! [`gpu_memory_mib`]: a table of common data-centre and workstation GPUs, and 16 GiB — the most
//! common size among them — for a model it does not know. Memory shares above 1 (a job measured
//! on a larger GPU) are kept as they are rather than clipped, so such jobs stay apart.

use tandem_api::Profile;

/// A profile as the knowledge base sees it.
pub type Features = [f64; 3];

/// Memory assumed for a GPU model missing from the table, in MiB.
pub const DEFAULT_GPU_MEMORY_MIB: u32 = 16_384;

/// Memory of well-known GPU models, in MiB (the usable size where vendors state one).
pub fn gpu_memory_mib(model: &str) -> u32 {
    match model
        .to_ascii_uppercase()
        .replace([' ', '-', '_'], "")
        .as_str()
    {
        "K80" => 12_288,
        "P100" => 16_280,
        "V100" | "V10016GB" | "T4" => 16_384,
        "V10032GB" => 32_768,
        "A100" | "A10040GB" => 40_960,
        "A10080GB" | "H100" => 81_920,
        "A10" | "RTX3090" | "3090" | "L4" => 24_576,
        "RTX2070S" | "2070S" | "RTX2070SUPER" | "RTX3070" | "3070" => 8_192,
        _ => DEFAULT_GPU_MEMORY_MIB,
    }
}

/// The normalized features of a profile.
pub fn of(profile: &Profile) -> Features {
    [
        f64::from(profile.gpu_util_pct) / 100.0,
        f64::from(profile.mem_access_pct) / 100.0,
        f64::from(profile.mem_used_mib) / f64::from(gpu_memory_mib(&profile.gpu_model)),
    ]
}

/// Euclidean distance between two feature vectors.
pub fn distance(a: &Features, b: &Features) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_a_share_of_the_model_capacity() {
        let profile = Profile {
            gpu_util_pct: 50.0,
            mem_access_pct: 25.0,
            mem_used_mib: 8_140,
            gpu_model: "P100".into(),
        };
        assert_eq!(of(&profile), [0.5, 0.25, 0.5]);
        assert_eq!(gpu_memory_mib("rtx-3090"), 24_576);
        assert_eq!(gpu_memory_mib("mystery"), DEFAULT_GPU_MEMORY_MIB);
    }
}
