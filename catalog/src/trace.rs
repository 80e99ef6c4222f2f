//! The trace format: one job per CSV row, in arrival order.
//!
//! ```text
//! arrival_s,job_type,gpus,steps
//! 0,ResNet-18 (batch size 32),1,120000
//! 6,Transformer (batch size 256),4,27788
//! ```
//!
//! - `arrival_s`: submission time in seconds from the start of the trace (finite, ≥ 0, never
//!   smaller than the row before: traces are sorted).
//! - `job_type`: a job type of the catalogs the run uses (checked against them, with the line,
//!   when the simulation is built).
//! - `gpus`: GPUs the job needs (≥ 1). Jobs needing one GPU may share it; jobs needing more run
//!   exclusively, on GPUs of one model.
//! - `steps`: the job's work, in the unit of its type's solo throughput (Gavel: training
//!   iterations; catalogs of whole runs: runs, so `1` is one run).
//!
//! Extra columns are allowed and ignored, so converters may keep provenance (such as the source
//! row) next to the job.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::csv_input;
use crate::error::{Error, Result, at_line};

/// One job of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceJob {
    /// Submission time, in seconds from the start of the trace.
    pub arrival_s: f64,
    /// The job type (a catalog name).
    pub job_type: String,
    /// GPUs needed.
    pub gpus: u32,
    /// Work, in the unit of the type's solo throughput.
    pub steps: f64,
}

/// A checked trace: jobs in arrival order, each with the line it came from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// Where the trace came from (a file name), for errors.
    pub origin: String,
    /// The jobs, sorted by arrival.
    pub jobs: Vec<TraceJob>,
    /// The 1-based line of each job in its file (the header is line 1), for errors.
    pub lines: Vec<u64>,
}

const COLUMNS: [&str; 4] = ["arrival_s", "job_type", "gpus", "steps"];

impl Trace {
    /// Reads and checks a trace file.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let (text, origin) = csv_input::read(path.as_ref())?;
        Self::parse(&text, &origin)
    }

    /// Parses and checks trace CSV; `origin` starts every error.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let (mut reader, index) = csv_input::open(text, origin, &COLUMNS)?;
        let mut trace = Trace {
            origin: origin.to_owned(),
            ..Trace::default()
        };
        for record in reader.records() {
            let (record, line) = csv_input::row(record, text, origin)?;
            let field = |i: usize| record.get(index[i]).unwrap_or_default();
            let number = |i: usize| -> Result<f64> {
                field(i).parse::<f64>().map_err(|_| {
                    at_line(
                        origin,
                        line,
                        format!("`{}` is not a number: `{}`", COLUMNS[i], field(i)),
                    )
                })
            };
            let arrival_s = number(0)?;
            if !(arrival_s.is_finite() && arrival_s >= 0.0) {
                return Err(at_line(
                    origin,
                    line,
                    format!("`arrival_s` must be a time ≥ 0, got {arrival_s}"),
                ));
            }
            if let Some(previous) = trace.jobs.last()
                && arrival_s < previous.arrival_s
            {
                return Err(at_line(
                    origin,
                    line,
                    format!(
                        "arrivals must be sorted: {arrival_s} s comes after {} s (line {})",
                        previous.arrival_s,
                        trace.lines.last().copied().unwrap_or_default()
                    ),
                ));
            }
            let job_type = field(1).to_owned();
            if job_type.is_empty() {
                return Err(at_line(origin, line, "`job_type` is empty"));
            }
            let gpus = field(2)
                .parse::<u32>()
                .ok()
                .filter(|g| *g >= 1)
                .ok_or_else(|| {
                    at_line(
                        origin,
                        line,
                        format!("`gpus` must be a whole number ≥ 1, got `{}`", field(2)),
                    )
                })?;
            let steps = number(3)?;
            if !(steps.is_finite() && steps > 0.0) {
                return Err(at_line(
                    origin,
                    line,
                    format!("`steps` must be positive, got {steps}"),
                ));
            }
            trace.jobs.push(TraceJob {
                arrival_s,
                job_type,
                gpus,
                steps,
            });
            trace.lines.push(line);
        }
        if trace.jobs.is_empty() {
            return Err(Error::Input {
                origin: origin.to_owned(),
                problem: "the trace holds no job".into(),
            });
        }
        Ok(trace)
    }

    /// The trace as CSV, header first: what [`parse`](Self::parse) reads back.
    pub fn to_csv(&self) -> String {
        let mut text = COLUMNS.join(",");
        text.push('\n');
        let mut writer = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        for job in &self.jobs {
            // Writing into a Vec cannot fail.
            let _ = writer.serialize((job.arrival_s, &job.job_type, job.gpus, job.steps));
        }
        text.push_str(&String::from_utf8_lossy(
            &writer.into_inner().unwrap_or_default(),
        ));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(text: &str) -> String {
        Trace::parse(text, "t.csv").unwrap_err().to_string()
    }

    #[test]
    fn reads_rows_in_order_with_their_lines() {
        let trace = Trace::parse(
            "arrival_s,job_type,gpus,steps,source\n0,A,1,100,x\n\n5,B,2,7.5,y\n",
            "t.csv",
        )
        .unwrap();
        assert_eq!(trace.jobs.len(), 2);
        assert_eq!(trace.jobs[1].job_type, "B");
        assert_eq!(trace.jobs[1].gpus, 2);
        assert_eq!(trace.lines, vec![2, 4]);
        let again = Trace::parse(&trace.to_csv(), "t.csv").unwrap();
        assert_eq!(again.jobs, trace.jobs);
    }

    #[test]
    fn bad_rows_are_named_by_line() {
        assert!(
            problem("arrival_s,job_type,gpus\n0,A,1\n").contains("t.csv:1: missing column `steps`")
        );
        assert!(
            problem("arrival_s,job_type,gpus,steps\n0,A,1,10\n-1,A,1,10\n").starts_with("t.csv:3:")
        );
        let unsorted = problem("arrival_s,job_type,gpus,steps\n5,A,1,10\n3,A,1,10\n");
        assert!(
            unsorted.starts_with("t.csv:3: arrivals must be sorted"),
            "{unsorted}"
        );
        assert!(problem("arrival_s,job_type,gpus,steps\n0,A,0,10\n").contains("t.csv:2: `gpus`"));
        assert!(
            problem("arrival_s,job_type,gpus,steps\n0,A,1,ten\n")
                .contains("t.csv:2: `steps` is not a number")
        );
        assert!(
            problem("arrival_s,job_type,gpus,steps\n0,,1,3\n")
                .contains("t.csv:2: `job_type` is empty")
        );
        assert!(
            problem("arrival_s,job_type,gpus,steps\n0,A,1\n").contains("t.csv:2: malformed row")
        );
        assert!(problem("arrival_s,job_type,gpus,steps\n").contains("no job"));
    }
}
