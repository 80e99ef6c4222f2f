//! Gavel's Philly-derived job traces (`scheduler/traces/msr/seed=0/*.trace` of
//! stanford-futuredata/gavel, vendored in `data/gavel/traces/philly_vc_seed0/`).
//!
//! A Gavel trace is tab-separated, without a header, one job per line and seven columns:
//!
//! ```text
//! job_type  command  num_steps_arg  needs_data_dir  total_steps  arrival_time_s  scale_factor
//! ```
//!
//! The job types are exactly those of the Gavel catalogs (`data/catalogs/gavel-*.json`) and
//! `total_steps` counts training iterations, the unit of their throughputs, so a row becomes
//! a job without any scaling: `arrival_s = arrival_time_s`, `gpus = scale_factor`,
//! `steps = total_steps`. The command and its arguments only tell Gavel how to launch the job
//! on real hardware; the simulator has no use for them.

use crate::error::{Error, Result, at_line};
use crate::trace::{Trace, TraceJob};

/// Columns of a Gavel trace line, in order (the file has no header naming them).
const COLUMNS: [&str; 7] = [
    "job_type",
    "command",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "arrival_time_s",
    "scale_factor",
];

/// Converts one Gavel trace into a [`Trace`].
///
/// `origin` (usually the file's path) starts every error, and the trace keeps it: each job's
/// line is its line in the Gavel file (line 1 is the first job, as the file has no header), so
/// later errors about a job (an unknown type, say) point into the file it came from.
///
/// Blank lines are skipped. Errors name the line: a column count other than seven, an empty
/// job type, a number that is not one (or is negative, or infinite), zero steps, a scale
/// factor that is not a whole number ≥ 1, and an arrival earlier than the line before (Gavel's
/// traces are sorted; a file that is not was edited or is not one).
pub fn gavel_trace(text: &str, origin: &str) -> Result<Trace> {
    let mut trace = Trace {
        origin: origin.to_owned(),
        ..Trace::default()
    };
    for (index, raw) in text.lines().enumerate() {
        let line = index as u64 + 1;
        // Tolerate files that went through a Windows checkout.
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.trim().is_empty() {
            continue;
        }
        let job = parse_line(raw, origin, line)?;
        if let Some(previous) = trace.jobs.last()
            && job.arrival_s < previous.arrival_s
        {
            return Err(at_line(
                origin,
                line,
                format!(
                    "arrivals must be sorted: {} s comes after {} s (line {})",
                    job.arrival_s,
                    previous.arrival_s,
                    trace.lines.last().copied().unwrap_or_default()
                ),
            ));
        }
        trace.jobs.push(job);
        trace.lines.push(line);
    }
    if trace.jobs.is_empty() {
        return Err(Error::Input {
            origin: origin.to_owned(),
            problem: "the Gavel trace holds no job".into(),
        });
    }
    Ok(trace)
}

/// One job from one line of a Gavel trace.
fn parse_line(raw: &str, origin: &str, line: u64) -> Result<TraceJob> {
    let fields: Vec<&str> = raw.split('\t').map(str::trim).collect();
    if fields.len() != COLUMNS.len() {
        return Err(at_line(
            origin,
            line,
            format!(
                "expected {} tab-separated columns ({}), found {}",
                COLUMNS.len(),
                COLUMNS.join(", "),
                fields.len()
            ),
        ));
    }
    let job_type = fields[0];
    if job_type.is_empty() {
        return Err(at_line(origin, line, "`job_type` is empty"));
    }
    let number = |i: usize| -> Result<f64> {
        let value = fields[i].parse::<f64>().map_err(|_| {
            at_line(
                origin,
                line,
                format!("`{}` is not a number: `{}`", COLUMNS[i], fields[i]),
            )
        })?;
        if !value.is_finite() || value < 0.0 {
            return Err(at_line(
                origin,
                line,
                format!(
                    "`{}` must be a finite number ≥ 0, got `{}`",
                    COLUMNS[i], fields[i]
                ),
            ));
        }
        Ok(value)
    };
    let steps = number(4)?;
    if steps == 0.0 {
        // A job without work would finish the instant it starts; Gavel never writes one.
        return Err(at_line(
            origin,
            line,
            "`total_steps` must be positive, got 0",
        ));
    }
    let arrival_s = number(5)?;
    let gpus = fields[6]
        .parse::<u32>()
        .ok()
        .filter(|g| *g >= 1)
        .ok_or_else(|| {
            at_line(
                origin,
                line,
                format!(
                    "`scale_factor` (GPUs) must be a whole number ≥ 1, got `{}`",
                    fields[6]
                ),
            )
        })?;
    Ok(TraceJob {
        arrival_s,
        job_type: job_type.to_owned(),
        gpus,
        steps,
    })
}

/// Converts several Gavel traces and merges them into one, sorted by arrival.
///
/// `files` holds `(origin, text)` pairs; each is converted by [`gavel_trace`] (so errors name
/// the file and line at fault). The merge is stable: jobs arriving at the same second keep the
/// order of `files`, then their line order, so the result does not depend on the sort
/// algorithm. Used for the 15,000-job benchmark (all 15 files of `philly_vc_seed0`, 15,264
/// jobs): Gavel's traces were cut from the virtual clusters of one Philly trace, so their clocks
/// share an origin and merging them rebuilds a larger cluster's load.
///
/// A merged job has no single source line, so the result's `lines` are the rows of its own CSV
/// form ([`Trace::to_csv`], header on line 1) and its `origin` lists the files merged.
pub fn gavel_traces(files: &[(String, String)]) -> Result<Trace> {
    let Some((first, _)) = files.first() else {
        return Err(Error::Input {
            origin: "Gavel traces".into(),
            problem: "no trace to merge".into(),
        });
    };
    if let [(origin, text)] = files {
        return gavel_trace(text, origin);
    }
    let mut jobs = Vec::new();
    for (origin, text) in files {
        jobs.extend(gavel_trace(text, origin)?.jobs);
    }
    // `sort_by` is stable: ties keep file order, then line order.
    jobs.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
    let lines = (2..).take(jobs.len()).collect();
    Ok(Trace {
        origin: format!("merge of {} Gavel traces ({first}, …)", files.len()),
        jobs,
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Gavel line with the given type, steps, arrival and scale factor.
    fn row(job_type: &str, steps: &str, arrival: &str, scale: &str) -> String {
        format!("{job_type}\tcd %s && python3 train.py\t-n\t1\t{steps}\t{arrival}\t{scale}\n")
    }

    fn problem(text: &str) -> String {
        gavel_trace(text, "g.trace").unwrap_err().to_string()
    }

    #[test]
    fn converts_rows_keeping_their_source_lines() {
        let text = row("A3C", "1000", "0.000000", "1")
            + "\n"
            + &row("Transformer (batch size 256)", "27788", "6.000000", "4");
        let trace = gavel_trace(&text, "g.trace").unwrap();
        assert_eq!(trace.origin, "g.trace");
        assert_eq!(
            trace.jobs,
            [
                TraceJob {
                    arrival_s: 0.0,
                    job_type: "A3C".into(),
                    gpus: 1,
                    steps: 1000.0
                },
                TraceJob {
                    arrival_s: 6.0,
                    job_type: "Transformer (batch size 256)".into(),
                    gpus: 4,
                    steps: 27788.0
                },
            ]
        );
        // The blank line is skipped but still counted.
        assert_eq!(trace.lines, [1, 3]);
        let again = Trace::parse(&trace.to_csv(), "t.csv").unwrap();
        assert_eq!(again.jobs, trace.jobs);
    }

    #[test]
    fn tolerates_windows_line_ends() {
        let text = row("A3C", "10", "0", "1").replace('\n', "\r\n");
        assert_eq!(gavel_trace(&text, "g").unwrap().jobs[0].gpus, 1);
    }

    #[test]
    fn bad_lines_are_named() {
        let ok = row("A3C", "10", "0", "1");
        assert!(problem(&(ok.clone() + "A3C\t10\t0\t1\n")).starts_with("g.trace:2: expected 7"));
        assert!(problem(&row("", "10", "0", "1")).contains("g.trace:1: `job_type` is empty"));
        let text = ok.clone() + &row("A3C", "ten", "0", "1");
        assert!(problem(&text).contains("g.trace:2: `total_steps` is not a number: `ten`"));
        let negative = problem(&row("A3C", "10", "-5", "1"));
        assert!(negative.contains("g.trace:1: `arrival_time_s` must be a finite number ≥ 0"));
        assert!(problem(&row("A3C", "-10", "0", "1")).contains("`total_steps` must be a finite"));
        assert!(problem(&row("A3C", "inf", "0", "1")).contains("`total_steps` must be a finite"));
        assert!(problem(&row("A3C", "0", "0", "1")).contains("`total_steps` must be positive"));
        assert!(problem(&row("A3C", "10", "0", "0")).contains("g.trace:1: `scale_factor`"));
        assert!(problem(&row("A3C", "10", "0", "-2")).contains("`scale_factor`"));
        assert!(problem(&row("A3C", "10", "0", "1.5")).contains("`scale_factor`"));
        let unsorted = problem(&(row("A3C", "10", "9", "1") + &row("A3C", "10", "3", "1")));
        assert!(
            unsorted.starts_with("g.trace:2: arrivals must be sorted"),
            "{unsorted}"
        );
        assert!(problem("\n\n").contains("no job"));
    }

    #[test]
    fn merges_by_arrival_keeping_file_then_line_order_on_ties() {
        let a = row("A", "1", "0", "1") + &row("A2", "1", "5", "1") + &row("A3", "1", "5", "1");
        let b = row("B", "1", "5", "1") + &row("B2", "1", "7", "2");
        let merged = gavel_traces(&[("a".into(), a), ("b".into(), b)]).unwrap();
        let types: Vec<&str> = merged.jobs.iter().map(|j| j.job_type.as_str()).collect();
        assert_eq!(types, ["A", "A2", "A3", "B", "B2"]);
        assert_eq!(merged.lines, [2, 3, 4, 5, 6]);
        assert!(merged.origin.contains("2 Gavel traces"));
        let again = Trace::parse(&merged.to_csv(), "m.csv").unwrap();
        assert_eq!(again.jobs, merged.jobs);
    }

    #[test]
    fn merge_errors_name_the_file() {
        assert!(
            gavel_traces(&[])
                .unwrap_err()
                .to_string()
                .contains("no trace")
        );
        let good = ("a".to_owned(), row("A", "1", "0", "1"));
        let bad = ("b".to_owned(), row("B", "1", "0", "0"));
        let e = gavel_traces(&[good.clone(), bad]).unwrap_err().to_string();
        assert!(e.starts_with("b:1: `scale_factor`"), "{e}");
        // A single file is converted as it is, source lines kept.
        assert_eq!(gavel_traces(&[good]).unwrap().lines, [1]);
    }

    #[test]
    fn all_vendored_traces_convert_and_merge() {
        let folder = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../data/gavel/traces/philly_vc_seed0"
        );
        let mut files: Vec<(String, String)> = std::fs::read_dir(folder)
            .unwrap()
            .map(|entry| {
                let path = entry.unwrap().path();
                let text = std::fs::read_to_string(&path).unwrap();
                (path.display().to_string(), text)
            })
            .collect();
        files.sort();
        assert_eq!(files.len(), 15);
        let merged = gavel_traces(&files).unwrap();
        assert_eq!(merged.jobs.len(), 15_264);
        assert!(
            merged
                .jobs
                .windows(2)
                .all(|w| w[0].arrival_s <= w[1].arrival_s)
        );
        // Every job type is one the Gavel catalogs measured.
        let catalog = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../data/catalogs/gavel-v100.json"
        ))
        .unwrap();
        for job in &merged.jobs {
            assert!(
                catalog.contains(&format!("\"{}\"", job.job_type)),
                "{}",
                job.job_type
            );
        }
    }
}
