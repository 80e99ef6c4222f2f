//! `tandem declare`: the model summary an ONNX file declares.

use std::path::PathBuf;

use clap::Args as ClapArgs;
use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;

use crate::args::Format;
use crate::output::{print_as, right_align};
use crate::queue::InputError;

/// The options of `tandem declare`.
#[derive(Debug, ClapArgs)]
pub(crate) struct Args {
    /// ONNX file of the model.
    #[arg(value_name = "FILE")]
    onnx: PathBuf,

    /// Training batch size: required when the graph's batch dimension is symbolic; with a
    /// fixed batch, input, activations and FLOPs are scaled from it to this one.
    #[arg(long, value_name = "N")]
    batch_size: Option<u32>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

impl Args {
    /// Reads the ONNX graph and prints its summary.
    pub(crate) fn execute(&self) -> anyhow::Result<()> {
        let file = &self.onnx;
        let bytes = std::fs::read(file)
            .map_err(|e| InputError::usage(format!("cannot read {}: {e}", file.display())))?;
        let summary = tandem_declare::summarize(&bytes, self.batch_size)
            .map_err(|e| InputError::usage(format!("{}: {e}", file.display())))?;
        print_as(self.format, &summary, || render(&summary))
    }
}

/// A declared model summary, one field per row.
fn render(summary: &tandem_api::ModelSummary) -> String {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_header(["field", "value"]);
    let rows = [
        ("parameters MiB", format!("{:.2}", summary.params_mib)),
        (
            "activations MiB (one batch)",
            format!("{:.2}", summary.activations_mib),
        ),
        ("input MiB (one batch)", format!("{:.3}", summary.input_mib)),
        ("batch size", summary.batch_size.to_string()),
        (
            "forward GFLOPs (one batch)",
            format!("{:.3}", summary.gflops),
        ),
        ("convolution layers", summary.conv_layers.to_string()),
        ("linear layers", summary.linear_layers.to_string()),
        ("activation layers", summary.activation_layers.to_string()),
        ("other layers", summary.other_layers.to_string()),
    ];
    for (field, value) in rows {
        table.add_row([field.to_owned(), value]);
    }
    right_align(&mut table, 1..2);
    format!("{table}\n")
}
