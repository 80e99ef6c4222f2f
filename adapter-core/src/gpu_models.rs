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

/// What each GPU model costs to run, from an adapter's configuration: the price of a GPU-hour
/// and the board power, which the `cost` and `energy` priorities weigh GPU models by
/// (`gpu-spec.price-per-hour`, `gpu-spec.power-watts`). A model without an entry gets none, and
/// the engine then weighs run time alone for every model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuCosts {
    /// Price of one GPU-hour, by model (short name, as [`gpu_model`] gives it).
    pub prices: std::collections::BTreeMap<String, f32>,
    /// Board power in watts, by model.
    pub powers: std::collections::BTreeMap<String, f32>,
}

impl GpuCosts {
    /// Costs from `MODEL=NUMBER` settings (`--gpu-price`, `--gpu-power`), already parsed.
    pub fn new(prices: &[(String, f32)], powers: &[(String, f32)]) -> Self {
        Self {
            prices: prices.iter().cloned().collect(),
            powers: powers.iter().cloned().collect(),
        }
    }

    /// Sets `spec`'s price and power from these settings, where they name its model.
    pub fn apply(&self, spec: &mut tandem_api::GpuSpec) {
        if let Some(&price) = self.prices.get(&spec.model) {
            spec.price_per_hour = Some(price);
        }
        if let Some(&watts) = self.powers.get(&spec.model) {
            spec.power_watts = Some(watts);
        }
    }

    /// Whether no model has a price or a power.
    pub fn is_empty(&self) -> bool {
        self.prices.is_empty() && self.powers.is_empty()
    }
}

/// Parses a `MODEL=NUMBER` setting (a price per GPU-hour, or watts): the model as the engine
/// names it (`Tesla-V100` is `V100`) and a finite, positive number.
pub fn parse_model_number(text: &str) -> Result<(String, f32), String> {
    let (model, number) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("`{text}` is not MODEL=NUMBER"))?;
    let value: f32 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{number}` in `{text}` is not a number"))?;
    if model.trim().is_empty() || !value.is_finite() || value <= 0.0 {
        return Err(format!(
            "`{text}`: the model must be named and the number positive"
        ));
    }
    Ok((gpu_model(model.trim()).0, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_apply_to_their_model_and_bad_settings_are_named() {
        let price = parse_model_number("Tesla-V100=2.5").unwrap();
        assert_eq!(price, ("V100".to_owned(), 2.5));
        let costs = GpuCosts::new(&[price], &[parse_model_number("K80=300").unwrap()]);
        let mut v100 = tandem_api::GpuSpec::new("V100", 16_384);
        costs.apply(&mut v100);
        assert_eq!((v100.price_per_hour, v100.power_watts), (Some(2.5), None));
        let mut k80 = tandem_api::GpuSpec::new("K80", 11_441);
        costs.apply(&mut k80);
        assert_eq!(k80.power_watts, Some(300.0));
        assert!(
            parse_model_number("V100")
                .unwrap_err()
                .contains("MODEL=NUMBER")
        );
        assert!(
            parse_model_number("V100=cheap")
                .unwrap_err()
                .contains("`cheap`")
        );
        assert!(
            parse_model_number("V100=-1")
                .unwrap_err()
                .contains("positive")
        );
    }

    #[test]
    fn products_map_to_known_short_names() {
        assert_eq!(gpu_model("Tesla-V100-SXM2-16GB").0, "V100");
        assert_eq!(gpu_model("NVIDIA A100-SXM4-40GB").0, "A100");
        assert!(is_known("V100") && !is_known("alice's resnet on V100"));
    }
}
