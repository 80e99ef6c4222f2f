//! The declared-models format: the model each job type's users declare, one CSV row per type.
//!
//! ```text
//! job_type,batch_size,params_mib,activations_mib,input_mib,gflops,conv_layers,linear_layers,activation_layers,other_layers
//! ResNet-50 (batch size 32),32,97.4922,2807.5,18.375,261.6,53,1,49,73
//! ```
//!
//! The columns after `job_type` are the fields of the engine's
//! [`ModelSummary`], as `tandem declare` prints them for an ONNX file.
//! The simulator hands each type's summary to the engine, which predicts the type's GPU
//! utilization from it; the utilization baselines pack by that prediction where the catalogs
//! measured no utilization. `data/utilization/gavel_models.csv` is this file for Gavel's job
//! types, derived from ONNX graphs of their networks.
//!
//! Extra columns are allowed and ignored; a job type may appear once.

use std::path::Path;

use tandem_api::ModelSummary;

use crate::csv_input;
use crate::error::{Error, Result, at_line};

/// One job type's declared model.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredModel {
    /// The job type (a catalog name).
    pub job_type: String,
    /// Its model, as its users declare it.
    pub summary: ModelSummary,
}

/// A checked declared-models file: one model per job type, each with the line it came from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeclaredModels {
    /// Where the file came from (a file name), for errors and reports.
    pub origin: String,
    /// The models, in file order.
    pub models: Vec<DeclaredModel>,
    /// The 1-based line of each model in its file (the header is line 1), for errors.
    pub lines: Vec<u64>,
}

const COLUMNS: [&str; 10] = [
    "job_type",
    "batch_size",
    "params_mib",
    "activations_mib",
    "input_mib",
    "gflops",
    "conv_layers",
    "linear_layers",
    "activation_layers",
    "other_layers",
];

impl DeclaredModels {
    /// Reads and checks a declared-models file.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let (text, origin) = csv_input::read(path.as_ref())?;
        Self::parse(&text, &origin)
    }

    /// Parses and checks declared-models CSV; `origin` starts every error.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let (mut reader, index) = csv_input::open(text, origin, &COLUMNS)?;
        let mut declared = DeclaredModels {
            origin: origin.to_owned(),
            ..DeclaredModels::default()
        };
        for record in reader.records() {
            let (record, line) = csv_input::row(record, text, origin)?;
            let field = |i: usize| record.get(index[i]).unwrap_or_default();
            let size = |i: usize| -> Result<f32> {
                field(i)
                    .parse::<f32>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| {
                        at_line(
                            origin,
                            line,
                            format!("`{}` must be a number ≥ 0, got `{}`", COLUMNS[i], field(i)),
                        )
                    })
            };
            let count = |i: usize| -> Result<u32> {
                field(i).parse::<u32>().map_err(|_| {
                    at_line(
                        origin,
                        line,
                        format!(
                            "`{}` must be a whole number, got `{}`",
                            COLUMNS[i],
                            field(i)
                        ),
                    )
                })
            };
            let job_type = field(0).to_owned();
            if job_type.is_empty() {
                return Err(at_line(origin, line, "`job_type` is empty"));
            }
            if let Some(first) = declared.models.iter().position(|m| m.job_type == job_type) {
                return Err(at_line(
                    origin,
                    line,
                    format!(
                        "job type `{job_type}` is declared twice (first on line {})",
                        declared.lines[first]
                    ),
                ));
            }
            let batch_size = count(1)?;
            if batch_size == 0 {
                return Err(at_line(origin, line, "`batch_size` must be at least 1"));
            }
            let summary = ModelSummary {
                batch_size,
                params_mib: size(2)?,
                activations_mib: size(3)?,
                input_mib: size(4)?,
                gflops: size(5)?,
                conv_layers: count(6)?,
                linear_layers: count(7)?,
                activation_layers: count(8)?,
                other_layers: count(9)?,
            };
            declared.models.push(DeclaredModel { job_type, summary });
            declared.lines.push(line);
        }
        if declared.models.is_empty() {
            return Err(Error::Input {
                origin: origin.to_owned(),
                problem: "the file declares no model".into(),
            });
        }
        Ok(declared)
    }

    /// The declared model of `job_type`, if the file has one.
    pub fn get(&self, job_type: &str) -> Option<&ModelSummary> {
        self.models
            .iter()
            .find(|m| m.job_type == job_type)
            .map(|m| &m.summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "job_type,batch_size,params_mib,activations_mib,input_mib,gflops,\
                          conv_layers,linear_layers,activation_layers,other_layers\n";

    #[test]
    fn a_row_is_a_summary() {
        let text = format!("{HEADER}A,32,97.5,2807.5,18.4,261.6,53,1,49,73\n");
        let declared = DeclaredModels::parse(&text, "m.csv").unwrap();
        let summary = declared.get("A").unwrap();
        assert_eq!(summary.batch_size, 32);
        assert_eq!((summary.conv_layers, summary.other_layers), (53, 73));
        assert!((summary.gflops - 261.6).abs() < 1e-3);
        assert_eq!(declared.lines, [2]);
        assert!(declared.get("B").is_none());
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let bad = |row: &str| {
            DeclaredModels::parse(&format!("{HEADER}A,1,1,1,1,1,1,1,1,1\n{row}\n"), "m.csv")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            bad("A,1,1,1,1,1,1,1,1,1"),
            "m.csv:3: job type `A` is declared twice (first on line 2)"
        );
        assert_eq!(
            bad("B,0,1,1,1,1,1,1,1,1"),
            "m.csv:3: `batch_size` must be at least 1"
        );
        assert_eq!(
            bad("B,1,1,1,1,-2,1,1,1,1"),
            "m.csv:3: `gflops` must be a number ≥ 0, got `-2`"
        );
        assert_eq!(
            bad("B,1,1,1,1,1,1.5,1,1,1"),
            "m.csv:3: `conv_layers` must be a whole number, got `1.5`"
        );
        assert!(
            DeclaredModels::parse(HEADER, "m.csv")
                .unwrap_err()
                .to_string()
                .contains("declares no model")
        );
    }
}
