//! GPU model names as the engine knows them.
//!
//! Profiles and GPUs meet in the engine by model name (`Profile::gpu_model` against
//! `GpuSpec::model`), so every host that reports either names a model the same way: the short
//! name (`V100`) found in the product string, whoever read it — a Kubernetes node label
//! (`Tesla-V100-SXM2-16GB`, from GPU feature discovery) or NVML on the node itself
//! (`Tesla V100-SXM2-16GB`).

/// GPU models the engine's catalogs and profiles name, matched as substrings of the product
/// string. Longer names first, so `A100` is not read as `A10`.
const KNOWN_MODELS: &[(&str, u32)] = &[
    ("H100", 81_559),
    ("A100", 40_960),
    ("A10", 23_028),
    ("L40", 46_068),
    ("L4", 23_034),
    ("V100", 16_384),
    ("P100", 16_384),
    ("P40", 24_576),
    ("T4", 15_360),
    ("K80", 11_441),
];

/// The GPU model name the engine uses for a product string, and the memory that model has when
/// nothing else says. A product no known model matches keeps its own name.
pub fn gpu_model(product: &str) -> (String, Option<u32>) {
    let upper = product.to_ascii_uppercase();
    KNOWN_MODELS
        .iter()
        .find(|(model, _)| upper.contains(model))
        .map_or_else(
            || (product.to_owned(), None),
            |(model, memory)| ((*model).to_owned(), Some(*memory)),
        )
}

/// Whether `model` is a short name the engine knows (`V100`, `A100`, ...).
pub fn is_known(model: &str) -> bool {
    KNOWN_MODELS.iter().any(|(known, _)| *known == model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_map_to_known_short_names() {
        assert_eq!(
            gpu_model("Tesla-V100-SXM2-16GB"),
            ("V100".to_owned(), Some(16_384))
        );
        assert_eq!(gpu_model("NVIDIA A100-SXM4-40GB").0, "A100");
        assert_eq!(gpu_model("NVIDIA A10").0, "A10");
        assert_eq!(gpu_model("Tesla V100-SXM2-16GB").0, "V100");
        assert_eq!(gpu_model("Mystery-9000"), ("Mystery-9000".to_owned(), None));
        assert!(is_known("V100") && !is_known("alice's resnet on V100"));
    }
}
