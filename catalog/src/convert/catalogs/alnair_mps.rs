//! The alnair packing study: PyTorch jobs under NVIDIA MPS, time per 10 steps alone and with a
//! second job running beside them.

use std::collections::{BTreeMap, HashMap};

use super::input::Input;
use super::table::{Row, Table, source_error};
use crate::catalog::{Catalog, GpuModel, JobType, Pair};
use crate::error::Result;

/// The source does not say which GPU it used.
const GPU_MODEL: &str = "unstated";
/// An assumption (stated in the catalog's `source`): the source has no memory data at all.
const GPU_MEMORY_MIB: u32 = 16384;
/// The slowdown ratios are printed with two decimals.
const RATIO_TOLERANCE: f64 = 0.005 + 1e-9;

/// A matrix file: one row per measured job, one column per job that ran beside it.
struct Matrix {
    table: Table,
    columns: Vec<String>,
    rows: Vec<MatrixRow>,
}

struct MatrixRow {
    name: String,
    line: u64,
    cells: Vec<f64>,
}

/// Builds the `alnair-mps` catalog.
///
/// - `individual`: `packing_individual.csv` (`job, batch_size, gpu_util_pct_approx,
///   time_per_10_steps_us`): one job type per row, named `job:batch_size`, with its solo
///   throughput in steps per second and its approximate GPU utilization.
/// - `pair_times`: `packing_pair_time_per_10_steps_us.csv`: cell (row r, column c) is the time
///   per 10 steps of job r while job c ran beside it.
/// - `slowdown_ratio`: `packing_pair_slowdown_ratio.csv`, the same matrix divided by the row
///   job's solo time; every cell is checked against that reading of `pair_times`, so a
///   transposed matrix is an error rather than a silently wrong catalog.
///
/// A pair is listed when both of its jobs were measured next to each other (r beside c and c
/// beside r); speed = solo time / co-located time per 10 steps, for each side.
pub fn alnair_mps(
    individual: Input<'_>,
    pair_times: Input<'_>,
    slowdown_ratio: Input<'_>,
) -> Result<Catalog> {
    let table = Table::read(individual)?;
    table.require(&[
        "job",
        "batch_size",
        "gpu_util_pct_approx",
        "time_per_10_steps_us",
    ])?;
    let mut job_types: Vec<JobType> = Vec::new();
    let mut solo_us: HashMap<String, f64> = HashMap::new();
    for row in table.rows() {
        let name = job_name(&row, row.text("job")?, row.text("batch_size")?)?;
        let time: f64 = row.number("time_per_10_steps_us")?;
        if time <= 0.0 {
            return Err(row.error_in("time_per_10_steps_us", format!("{time} is not positive")));
        }
        let util: f32 = row.number("gpu_util_pct_approx")?;
        if !(0.0..=100.0).contains(&util) {
            return Err(row.error_in("gpu_util_pct_approx", format!("{util} is not a percentage")));
        }
        if solo_us.insert(name.clone(), time).is_some() {
            return Err(row.error_in("job", format!("`{name}` is listed twice")));
        }
        job_types.push(JobType {
            name,
            profile: None,
            declared: None,
            // 10 steps per `time` microseconds.
            solo_throughput: BTreeMap::from([(GPU_MODEL.to_owned(), 1e7 / time)]),
            solo_time_s: BTreeMap::new(),
            gpu_util_pct_approx: Some(util),
            peak_mem_mib: BTreeMap::new(),
        });
    }

    let times = read_matrix(pair_times, &solo_us)?;
    let ratios = read_matrix(slowdown_ratio, &solo_us)?;
    check_orientation(&times, &ratios, &solo_us)?;

    let mut cell: HashMap<(&str, &str), f64> = HashMap::new();
    for row in &times.rows {
        for (column, &value) in times.columns.iter().zip(&row.cells) {
            cell.insert((row.name.as_str(), column.as_str()), value);
        }
    }
    let mut pairs = Vec::new();
    let mut one_sided = 0;
    let mut same_type = 0;
    let mut paired_types = 0;
    for (i, a) in job_types.iter().enumerate() {
        let is_row = times.rows.iter().any(|r| r.name == a.name);
        if is_row && times.columns.contains(&a.name) {
            paired_types += 1;
        }
        for b in &job_types[i..] {
            let a_beside_b = cell.get(&(a.name.as_str(), b.name.as_str()));
            let b_beside_a = cell.get(&(b.name.as_str(), a.name.as_str()));
            match (a_beside_b, b_beside_a) {
                (Some(&time_a), Some(&time_b)) => {
                    same_type += usize::from(a.name == b.name);
                    pairs.push(Pair {
                        gpu_model: GPU_MODEL.to_owned(),
                        a: a.name.clone(),
                        b: b.name.clone(),
                        speed_a: solo_us[&a.name] / time_a,
                        speed_b: solo_us[&b.name] / time_b,
                        colocated_time_s: None,
                    });
                }
                (None, None) => {}
                _ => one_sided += 1,
            }
        }
    }

    let source = format!(
        "alnair packing study, CentaurusInfra/alnair (Apache-2.0; method described in \
         alnair-profiler/test/packing-tests/README.md), vendored in data/alnair/ \
         (packing_individual.csv, packing_pair_time_per_10_steps_us.csv, \
         packing_pair_slowdown_ratio.csv; see data/README.md). PyTorch training jobs sharing a \
         GPU under NVIDIA MPS. Job types: the {} jobs run alone, named job:batch_size; \
         solo_throughput = 10 steps / measured time per 10 steps, in steps per second. \
         gpu_util_pct_approx is the study's approximate GPU utilization; profile is null \
         because memory access and memory use were not measured. GPU: not stated by the \
         source, recorded as model `{GPU_MODEL}` with memory_mib {GPU_MEMORY_MIB}, an \
         assumption: the source has no memory data and no job has a memory profile. Pairs: \
         cell (row r, column c) of the time matrix is r's time per 10 steps while c ran beside \
         it, confirmed by packing_pair_slowdown_ratio.csv (every ratio equals the cell divided \
         by r's solo time, to its two decimals; the converter checks each one). As the study \
         describes, the column job ran in the background and only the row job's time was \
         recorded, so the two speeds of a pair come from two runs, one measuring each job. A \
         pair is listed only when both were measured: {} pairs among the {paired_types} job \
         types that are both rows and columns, {same_type} of them two instances of one job \
         type. speed = solo time / co-located time per 10 steps, a steady-state throughput \
         ratio. Left out: {one_sided} measurements of one side only (a row job beside a \
         column job that was never measured beside it).",
        job_types.len(),
        pairs.len(),
    );

    Catalog::new(
        "alnair-mps",
        source,
        vec![GpuModel {
            model: GPU_MODEL.to_owned(),
            memory_mib: GPU_MEMORY_MIB,
        }],
        job_types,
        pairs,
    )
}

/// `job:batch_size`, with the batch size checked to be a whole number.
fn job_name(row: &Row<'_>, job: &str, batch_size: &str) -> Result<String> {
    if job.is_empty() {
        return Err(row.error_in("job", "is empty".into()));
    }
    let batch_size: u32 = row.parse(batch_size, "batch_size")?;
    Ok(format!("{job}:{batch_size}"))
}

/// Reads a matrix whose rows and columns must all be job types of `solo`. Rows without a batch
/// size (the ratio file's `Avg. Effect`) are summaries, not measurements, and are skipped.
fn read_matrix(input: Input<'_>, solo: &HashMap<String, f64>) -> Result<Matrix> {
    let table = Table::read(input)?;
    let headers = table.headers();
    if headers.get(0) != Some("job") || headers.get(1) != Some("batch_size") {
        return Err(table.error_at(
            1,
            "the first two columns must be `job` and `batch_size`".into(),
        ));
    }
    let mut columns: Vec<String> = Vec::new();
    for column in headers.iter().skip(2) {
        if !solo.contains_key(column) {
            return Err(table.error_at(
                1,
                format!("column `{column}` is not a job of the individual runs"),
            ));
        }
        if columns.iter().any(|c| c == column) {
            return Err(table.error_at(1, format!("column `{column}` appears twice")));
        }
        columns.push(column.to_owned());
    }

    let mut rows: Vec<MatrixRow> = Vec::new();
    for row in table.rows() {
        let batch_size = row.at(1)?;
        if batch_size.is_empty() {
            continue;
        }
        let name = job_name(&row, row.at(0)?, batch_size)?;
        if !solo.contains_key(&name) {
            return Err(row.error_in(
                "job",
                format!("`{name}` is not a job of the individual runs"),
            ));
        }
        if rows.iter().any(|r| r.name == name) {
            return Err(row.error_in("job", format!("`{name}` is listed twice")));
        }
        let mut cells = Vec::with_capacity(columns.len());
        for (index, column) in columns.iter().enumerate() {
            let value: f64 = row.parse(row.at(index + 2)?, column)?;
            if value <= 0.0 {
                return Err(row.error_in(column, format!("{value} is not positive")));
            }
            cells.push(value);
        }
        rows.push(MatrixRow {
            name,
            line: row.line(),
            cells,
        });
    }
    Ok(Matrix {
        table,
        columns,
        rows,
    })
}

/// Every ratio must equal the time in the same cell divided by the *row* job's solo time.
fn check_orientation(
    times: &Matrix,
    ratios: &Matrix,
    solo_us: &HashMap<String, f64>,
) -> Result<()> {
    if ratios.columns != times.columns {
        return Err(ratios.table.error_at(
            1,
            format!("the columns differ from those of {}", times.table.origin()),
        ));
    }
    for row in &times.rows {
        let ratio_row = ratios
            .rows
            .iter()
            .find(|r| r.name == row.name)
            .ok_or_else(|| {
                source_error(
                    ratios.table.origin(),
                    "rows".to_owned(),
                    format!(
                        "no row for `{}`, measured in {}",
                        row.name,
                        times.table.origin()
                    ),
                )
            })?;
        for ((column, &time), &ratio) in times.columns.iter().zip(&row.cells).zip(&ratio_row.cells)
        {
            let solo = solo_us[&row.name];
            let computed = time / solo;
            if (computed - ratio).abs() > RATIO_TOLERANCE {
                return Err(source_error(
                    ratios.table.origin(),
                    format!("line {}, column `{column}`", ratio_row.line),
                    format!(
                        "ratio {ratio} but the time matrix gives {time} / {solo} (`{}` alone) \
                         = {computed:.4}: the matrices are not laid out as row job beside \
                         column job",
                        row.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDIVIDUAL: &str = "\
job,batch_size,gpu_util_pct_approx,time_per_10_steps_us
inc,1,43,100000
inc,8,97,200000
lstm,32,75,50000
";

    /// `inc:1` and `inc:8` measured beside each other both ways; `lstm:32` only as a row.
    const TIMES: &str = "\
job,batch_size,inc:1,inc:8
inc,1,110000,150000
inc,8,240000,300000
lstm,32,60000,70000
";

    const RATIOS: &str = "\
job,batch_size,inc:1,inc:8
inc,1,1.10,1.50
inc,8,1.20,1.50
lstm,32,1.20,1.40
Avg. Effect,,1.17,1.47
";

    fn convert(individual: &str, times: &str, ratios: &str) -> Result<Catalog> {
        alnair_mps(
            Input {
                origin: "individual.csv",
                text: individual,
            },
            Input {
                origin: "times.csv",
                text: times,
            },
            Input {
                origin: "ratios.csv",
                text: ratios,
            },
        )
    }

    fn error(individual: &str, times: &str, ratios: &str) -> String {
        match convert(individual, times, ratios) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn each_side_of_a_pair_comes_from_its_own_row() {
        let catalog = convert(INDIVIDUAL, TIMES, RATIOS).expect("converts");
        assert_eq!(catalog.job_types().len(), 3);
        // inc:1 beside inc:1, inc:1 with inc:8, inc:8 beside inc:8; lstm:32 has no column.
        assert_eq!(catalog.pairs().len(), 3);
        // inc:1 takes 150000 us beside inc:8 (100000 alone); inc:8 takes 240000 beside inc:1.
        assert_eq!(
            catalog.pair("unstated", "inc:1", "inc:8"),
            Some((100000.0 / 150000.0, 200000.0 / 240000.0))
        );
        assert_eq!(
            catalog.pair("unstated", "inc:8", "inc:8"),
            Some((200000.0 / 300000.0, 200000.0 / 300000.0))
        );
        assert_eq!(catalog.pair("unstated", "lstm:32", "inc:1"), None);
        let source = catalog.source();
        assert!(source.contains("3 pairs among the 2 job types"), "{source}");
        assert!(source.contains("2 of them two instances"), "{source}");
        assert!(source.contains("Left out: 2 measurements"), "{source}");
    }

    #[test]
    fn job_types_carry_throughput_and_approximate_utilization_only() {
        let catalog = convert(INDIVIDUAL, TIMES, RATIOS).expect("converts");
        let lstm = catalog.job_type("lstm:32").expect("listed");
        assert!(lstm.profile.is_none());
        assert_eq!(lstm.gpu_util_pct_approx, Some(75.0));
        // 10 steps in 50 ms.
        assert_eq!(lstm.solo_throughput.get("unstated"), Some(&200.0));
        assert!(lstm.solo_time_s.is_empty());
        assert_eq!(
            catalog.gpu_model("unstated").map(|g| g.memory_mib),
            Some(16384)
        );
    }

    #[test]
    fn a_transposed_time_matrix_fails_the_ratio_check() {
        // The inc block transposed: each cell now holds the column job's time.
        let transposed = TIMES
            .replace("inc,1,110000,150000", "inc,1,110000,240000")
            .replace("inc,8,240000,300000", "inc,8,150000,300000");
        assert_eq!(
            error(INDIVIDUAL, &transposed, RATIOS),
            "ratios.csv: line 2, column `inc:8`: ratio 1.5 but the time matrix gives 240000 / \
             100000 (`inc:1` alone) = 2.4000: the matrices are not laid out as row job beside \
             column job"
        );
    }

    #[test]
    fn bad_sources_are_errors_naming_file_line_and_column() {
        assert_eq!(
            error(INDIVIDUAL, &TIMES.replace("inc:8\n", "gru:8\n"), RATIOS),
            "times.csv: line 1: column `gru:8` is not a job of the individual runs"
        );
        assert_eq!(
            error(INDIVIDUAL, &TIMES.replace("60000", "-1"), RATIOS),
            "times.csv: line 4, column `inc:1`: -1 is not positive"
        );
        assert_eq!(
            error(INDIVIDUAL, &TIMES.replace("lstm,32", "lstm,x"), RATIOS),
            "times.csv: line 4, column `batch_size`: `x` is not a whole number"
        );
        assert_eq!(
            error(
                INDIVIDUAL,
                TIMES,
                &RATIOS.replace("lstm,32,1.20,1.40\n", "")
            ),
            "ratios.csv: rows: no row for `lstm:32`, measured in times.csv"
        );
        assert_eq!(
            error(&INDIVIDUAL.replace("97", "197"), TIMES, RATIOS),
            "individual.csv: line 3, column `gpu_util_pct_approx`: 197 is not a percentage"
        );
        assert_eq!(
            error(&INDIVIDUAL.replace("inc,8", "inc,1"), TIMES, RATIOS),
            "individual.csv: line 3, column `job`: `inc:1` is listed twice"
        );
    }
}
