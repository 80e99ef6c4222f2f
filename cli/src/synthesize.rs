//! `tandem kb synthesize`: measured workload profiles in, an augmented set out.
//!
//! The input is the Futurewei measured-workload CSV (`data/alnair/futurewei_mini_ml_workload.csv`):
//! one row per training run, with the columns `Model`, `Dataset`, `BS` (batch size) and the
//! telemetry `MGUP`, `MGMAP`, `MaGTSAMP` (maximum GPU utilization, memory allocated and time
//! spent accessing memory, in percent); other columns are ignored. Runs are grouped into
//! workloads (one model on one dataset; a dataset's `/version` suffix is ignored, since the
//! Image Segmentation rows name `oxford_iiit_pet/3.2.0` .. `3.2.4`, a spreadsheet fill-down
//! rather than five datasets), and runs of one workload at one batch size are averaged.
//!
//! Privacy: the engine sees each workload as an opaque label (`w1`, `w2`, … in order of first
//! appearance); model and dataset names stay in the CLI and are put back only in what it
//! prints and writes.

use std::path::{Path, PathBuf};

use serde::Serialize;
use tandem_api::{Sample, Series, Synthesis};
use tandem_host::Runtime;

use crate::queue::InputError;

/// The telemetry columns read, in the order of every sample's `values`: (input column, output
/// column). The output drops the `Ma` of `MaGTSAMP`, as the papers' augmented set does.
const FEATURES: [(&str, &str); 3] = [
    ("MGUP", "MGUP"),
    ("MGMAP", "MGMAP"),
    ("MaGTSAMP", "MGTSAMP"),
];

/// Every feature is a percentage: generated values are clamped to 0..=100.
const BOUNDS: [Option<(f64, f64)>; 3] = [Some((0.0, 100.0)); 3];

/// The columns identifying a run.
const MODEL: &str = "Model";
const DATASET: &str = "Dataset";
const BATCH_SIZE: &str = "BS";

/// The measured workloads of one file, averaged per batch size.
#[derive(Debug)]
struct Measurements {
    /// In order of first appearance.
    workloads: Vec<Workload>,
}

#[derive(Debug)]
struct Workload {
    /// `Model / Dataset`, for people; never sent to the engine.
    name: String,
    /// What the engine is told instead: `w1`, `w2`, …
    label: String,
    /// One sample per batch size, by increasing batch size.
    samples: Vec<Sample>,
}

/// What `kb synthesize` found, with workloads named again (the `--format json` output).
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    /// Names of the values of every sample, in order.
    pub features: [&'static str; 3],
    /// Synthetic batch sizes asked for between consecutive measured ones.
    pub points_per_gap: u32,
    /// The measured samples of each workload, runs at one batch size averaged.
    pub measured: Vec<Series>,
    /// The engine's answer: blinded scores, best method and generated samples per workload.
    #[serde(flatten)]
    pub synthesis: Synthesis,
}

/// The augmented CSV `--out` wrote.
#[derive(Debug)]
pub(crate) struct Written {
    /// Where.
    pub path: PathBuf,
    /// Measured rows (`synthetic` false).
    pub measured: usize,
    /// Generated rows (`synthetic` true).
    pub synthetic: usize,
}

/// Reads `data`, has the engine judge and generate, and writes the augmented set to `out`.
pub(crate) fn run(
    runtime: &Runtime,
    data: &Path,
    points_per_gap: u32,
    out: Option<&Path>,
) -> anyhow::Result<(Report, Option<Written>)> {
    let measurements = Measurements::read(data)?;
    let synthesis = runtime
        .synthesize(&measurements.for_the_engine(), points_per_gap, &BOUNDS)
        .map_err(|error| {
            let message = error.to_string();
            // Engine messages name the label (`workload "w3"`); say which workload that is.
            let culprit = measurements
                .workloads
                .iter()
                .find(|w| message.contains(&format!("\"{}\"", w.label)));
            let context = match culprit {
                Some(w) => format!(
                    "{}: the engine rejected the measurements of {} (sent as {})",
                    data.display(),
                    w.name,
                    w.label
                ),
                None => format!("{}: the engine rejected the measurements", data.display()),
            };
            anyhow::Error::new(error).context(context)
        })?;
    let report = measurements.report(synthesis, points_per_gap);
    let written = out.map(|path| write_csv(path, &report)).transpose()?;
    Ok((report, written))
}

impl Measurements {
    fn read(path: &Path) -> Result<Self, InputError> {
        let file = std::fs::File::open(path)
            .map_err(|e| InputError::in_file(path, "", format!("cannot read the file: {e}")))?;
        Self::parse(path, file)
    }

    /// Parses the CSV; `path` only names the file in errors.
    fn parse(path: &Path, input: impl std::io::Read) -> Result<Self, InputError> {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(input);
        let header = reader.headers().map_err(|e| csv_error(path, &e))?.clone();
        let header_line = header.position().map_or(1, csv::Position::line);
        let column = |name: &str| {
            header.iter().position(|h| h == name).ok_or_else(|| {
                InputError::in_file(
                    path,
                    format!("line {header_line}, column {name}"),
                    "missing from the header",
                )
            })
        };
        let (model, dataset, batch_size) = (column(MODEL)?, column(DATASET)?, column(BATCH_SIZE)?);
        let features = [
            column(FEATURES[0].0)?,
            column(FEATURES[1].0)?,
            column(FEATURES[2].0)?,
        ];

        /// Runs of one workload at one batch size, summed to be averaged.
        struct Runs {
            batch_size: f64,
            sums: [f64; 3],
            count: u32,
        }
        let mut groups: Vec<((String, String), Vec<Runs>)> = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| csv_error(path, &e))?;
            let line = record.position().map_or(0, csv::Position::line);
            let cell = |index: usize, name: &str| -> Result<&str, InputError> {
                match record.get(index) {
                    Some(text) if !text.is_empty() => Ok(text),
                    _ => Err(InputError::in_file(
                        path,
                        format!("line {line}, column {name}"),
                        "empty",
                    )),
                }
            };
            let number = |index: usize, name: &str| -> Result<f64, InputError> {
                let text = cell(index, name)?;
                let at = || format!("line {line}, column {name}");
                let value: f64 = text.parse().map_err(|_| {
                    InputError::in_file(path, at(), format!("`{text}` is not a number"))
                })?;
                if !value.is_finite() {
                    return Err(InputError::in_file(
                        path,
                        at(),
                        format!("`{text}` is not a finite number"),
                    ));
                }
                Ok(value)
            };
            let size = number(batch_size, BATCH_SIZE)?;
            if size <= 0.0 {
                return Err(InputError::in_file(
                    path,
                    format!("line {line}, column {BATCH_SIZE}"),
                    format!("batch size {size} is not positive"),
                ));
            }
            let mut values = [0.0; 3];
            for (value, (&index, (name, _))) in values.iter_mut().zip(features.iter().zip(FEATURES))
            {
                *value = number(index, name)?;
                if !(0.0..=100.0).contains(value) {
                    return Err(InputError::in_file(
                        path,
                        format!("line {line}, column {name}"),
                        format!("{value} is not a percentage (0..=100)"),
                    ));
                }
            }
            let key = (
                cell(model, MODEL)?.to_owned(),
                workload_dataset(cell(dataset, DATASET)?).to_owned(),
            );
            let index = match groups.iter().position(|(k, _)| *k == key) {
                Some(index) => index,
                None => {
                    groups.push((key, Vec::new()));
                    groups.len() - 1
                }
            };
            let runs = &mut groups[index].1;
            match runs.iter_mut().find(|r| r.batch_size == size) {
                Some(same_size) => {
                    for (sum, value) in same_size.sums.iter_mut().zip(values) {
                        *sum += value;
                    }
                    same_size.count += 1;
                }
                None => runs.push(Runs {
                    batch_size: size,
                    sums: values,
                    count: 1,
                }),
            }
        }
        if groups.is_empty() {
            return Err(InputError::in_file(
                path,
                "",
                "no measurements: the file has a header but no rows",
            ));
        }
        let workloads = groups
            .into_iter()
            .enumerate()
            .map(|(i, ((model, dataset), mut runs))| {
                runs.sort_by(|a, b| a.batch_size.total_cmp(&b.batch_size));
                Workload {
                    name: format!("{model} / {dataset}"),
                    label: format!("w{}", i + 1),
                    samples: runs
                        .into_iter()
                        .map(|r| Sample {
                            batch_size: r.batch_size,
                            values: r.sums.iter().map(|sum| sum / f64::from(r.count)).collect(),
                        })
                        .collect(),
                }
            })
            .collect();
        Ok(Self { workloads })
    }

    /// What the engine is given: labels and numbers, no names.
    fn for_the_engine(&self) -> Vec<Series> {
        self.workloads
            .iter()
            .map(|w| Series {
                workload: w.label.clone(),
                samples: w.samples.clone(),
            })
            .collect()
    }

    /// The engine's answer with labels replaced by names, next to the measured samples.
    fn report(self, mut synthesis: Synthesis, points_per_gap: u32) -> Report {
        let name = |label: &mut String| {
            if let Some(w) = self.workloads.iter().find(|w| w.label == *label) {
                label.clone_from(&w.name);
            }
        };
        synthesis
            .scores
            .iter_mut()
            .for_each(|s| name(&mut s.workload));
        synthesis
            .best
            .iter_mut()
            .for_each(|b| name(&mut b.workload));
        synthesis
            .generated
            .iter_mut()
            .for_each(|g| name(&mut g.workload));
        Report {
            features: FEATURES.map(|(_, output)| output),
            points_per_gap,
            measured: self
                .workloads
                .into_iter()
                .map(|w| Series {
                    workload: w.name,
                    samples: w.samples,
                })
                .collect(),
            synthesis,
        }
    }
}

/// The dataset a run belongs to: its name without a `/version` suffix.
fn workload_dataset(dataset: &str) -> &str {
    dataset.split('/').next().unwrap_or(dataset).trim()
}

/// A CSV-level problem (unequal row lengths, invalid UTF-8), naming the line.
fn csv_error(path: &Path, error: &csv::Error) -> InputError {
    let line = error
        .position()
        .map_or_else(String::new, |p| format!("line {}", p.line()));
    let problem = match error.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} field(s), but the header has {expected_len}"),
        csv::ErrorKind::Utf8 { err, .. } => format!("not UTF-8 text: {err}"),
        _ => error.to_string(),
    };
    InputError::in_file(path, line, problem)
}

/// Writes `workload,batch_size,MGUP,MGMAP,MGTSAMP,synthetic`, each workload's measured and
/// generated rows by increasing batch size, values to 6 decimals, atomically (temporary file,
/// fsync, rename).
fn write_csv(path: &Path, report: &Report) -> anyhow::Result<Written> {
    crate::atomic::write(path, |out| fill_csv(out, path, report))
}

fn fill_csv(out: &mut std::fs::File, path: &Path, report: &Report) -> anyhow::Result<Written> {
    let mut written = Written {
        path: path.to_owned(),
        measured: 0,
        synthetic: 0,
    };
    {
        let mut writer = csv::Writer::from_writer(out);
        let mut header = vec!["workload", "batch_size"];
        header.extend(report.features);
        header.push("synthetic");
        writer.write_record(&header)?;
        for measured in &report.measured {
            let generated = report
                .synthesis
                .generated
                .iter()
                .filter(|g| g.workload == measured.workload)
                .flat_map(|g| &g.samples);
            let mut rows: Vec<(&Sample, bool)> = measured
                .samples
                .iter()
                .map(|s| (s, false))
                .chain(generated.map(|s| (s, true)))
                .collect();
            rows.sort_by(|a, b| a.0.batch_size.total_cmp(&b.0.batch_size));
            for (sample, synthetic) in rows {
                let mut record = vec![measured.workload.clone(), sample.batch_size.to_string()];
                record.extend(sample.values.iter().map(|&v| decimal(v)));
                record.push(synthetic.to_string());
                writer.write_record(&record)?;
                if synthetic {
                    written.synthetic += 1;
                } else {
                    written.measured += 1;
                }
            }
        }
        writer.flush()?;
    }
    Ok(written)
}

/// `value` to 6 decimals, far below the measurements' precision (hundredths of a percent),
/// so interpolation's rounding noise (`53.730000000000004`) stays out of the file.
fn decimal(value: f64) -> String {
    ((value * 1e6).round() / 1e6).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "ID,Model,Dataset,Epoch,BS,MGUP,MaGTSAMP,MGMAP";

    fn parse(text: &str) -> Result<Measurements, InputError> {
        Measurements::parse(Path::new("runs.csv"), text.as_bytes())
    }

    fn problem(text: &str) -> String {
        match parse(text) {
            Ok(parsed) => panic!("accepted {parsed:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn runs_are_grouped_by_workload_labelled_in_order_and_averaged() {
        let text = format!(
            "{HEADER}\n\
             1,Segmentation,oxford_iiit_pet/3.2.0,1,32,50,10,20\n\
             2, RL ,Cart Pole,1,10,5,0,3\n\
             3,Segmentation,oxford_iiit_pet/3.2.1,1,2,40,8,20\n\
             4,Segmentation,oxford_iiit_pet/3.2.2,2,32,60,20,30\n"
        );
        let parsed = parse(&text).unwrap_or_else(|e| panic!("{e}"));
        let summary: Vec<(&str, &str, usize)> = parsed
            .workloads
            .iter()
            .map(|w| (w.name.as_str(), w.label.as_str(), w.samples.len()))
            .collect();
        assert_eq!(
            summary,
            [
                ("Segmentation / oxford_iiit_pet", "w1", 2),
                ("RL / Cart Pole", "w2", 1)
            ]
        );
        // Sorted by batch size; the two runs at 32 averaged, features in FEATURES order.
        let segmentation = &parsed.workloads[0].samples;
        assert_eq!(segmentation[0].batch_size, 2.0);
        assert_eq!(segmentation[1].batch_size, 32.0);
        assert_eq!(segmentation[1].values, [55.0, 25.0, 15.0]);
    }

    #[test]
    fn bad_input_names_the_line_and_the_column() {
        let missing = problem("Model,Dataset,BS,MGUP,MGMAP\nA,B,2,1,1\n");
        assert_eq!(
            missing,
            "runs.csv: line 1, column MaGTSAMP: missing from the header"
        );
        let cases = [
            (
                "1,A,B,1,two,1,1,1",
                "runs.csv: line 3, column BS: `two` is not a number",
            ),
            (
                "1,A,B,1,2,1,NaN,1",
                "runs.csv: line 3, column MaGTSAMP: `NaN` is not a finite number",
            ),
            (
                "1,A,B,1,0,1,1,1",
                "runs.csv: line 3, column BS: batch size 0 is not positive",
            ),
            (
                "1,A,B,1,2,1,1,140",
                "runs.csv: line 3, column MGMAP: 140 is not a percentage (0..=100)",
            ),
            ("1,,B,1,2,1,1,1", "runs.csv: line 3, column Model: empty"),
            (
                "1,A,B,1,2,1,1",
                "runs.csv: line 3: 7 field(s), but the header has 8",
            ),
        ];
        for (row, expected) in cases {
            let text = format!("{HEADER}\n1,A,B,1,4,1,1,1\n{row}\n");
            assert_eq!(problem(&text), expected, "{row}");
        }
        assert!(problem(&format!("{HEADER}\n")).contains("no measurements"));
    }

    #[test]
    fn the_engine_sees_labels_and_the_report_names() {
        let text = format!("{HEADER}\n1,Secret Model,Secret Data,1,2,10,1,1\n");
        let parsed = parse(&text).unwrap_or_else(|e| panic!("{e}"));
        let synthesis = Synthesis {
            best: vec![tandem_api::BestMethod {
                workload: "w1".into(),
                method: tandem_api::Interpolation::Linear,
            }],
            ..Synthesis::default()
        };
        let sent = format!("{:?}", parsed.for_the_engine());
        assert!(
            sent.contains("\"w1\"") && !sent.contains("Secret"),
            "{sent}"
        );
        let report = parsed.report(synthesis, 3);
        assert_eq!(
            report.synthesis.best[0].workload,
            "Secret Model / Secret Data"
        );
        assert_eq!(report.measured[0].workload, "Secret Model / Secret Data");
        assert_eq!(report.features, ["MGUP", "MGMAP", "MGTSAMP"]);
    }
}
