//! What each GPU model costs, from an adapter's configuration. Model names are the contract's
//! ([`tandem_wire::gpu_models`], re-exported here).

pub use tandem_wire::gpu_models::{gpu_model, is_known};

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
}
