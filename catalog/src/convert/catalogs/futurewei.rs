//! The Futurewei mini-ML workload set (CentaurusInfra/alnair): Table II (solo completion
//! times), Tables III and IV (co-located completion times), and the measured runs (or the
//! table the papers clustered) that give the jobs' telemetry.

use std::collections::{BTreeMap, HashMap};

use tandem_api::Profile;

use super::input::Input;
use super::table::Table;
use crate::catalog::{Catalog, GpuModel, JobType, Pair};
use crate::error::Result;

/// The GPU of every Futurewei measurement, as `nvidia-smi` names and sizes a Tesla P100 16 GB.
const GPU_MODEL: &str = "P100";
const GPU_MEMORY_MIB: u32 = 16280;

/// Slowdown or saving columns further than this (percentage points) from the value recomputed
/// from the times are reported in the catalog's `source`; closer ones are rounding.
const STATED_TOLERANCE_PCT: f64 = 0.5;

/// The tables and the workload file spell some models differently. After dropping everything
/// but letters and digits and lowercasing, a workload name that starts with the first text is
/// read as starting with the second.
const MODEL_ALIASES: &[(&str, &str)] = &[
    // `small_bert/bert_en_uncased_L-2_H-128_A-2` is the tables' `Small BERT L2-H128-A2`.
    ("smallbertbertenuncased", "smallbert"),
    // The workload's `Reinforcement Learning` (data set `Cart Pole Problem`) is `RL CartPole`.
    ("reinforcementlearning", "rlcartpole"),
];

/// Values of the clustering table and the workload file that are this close are the same
/// figure: both files print at most three decimals, and the runs' figures are kept as `f32`.
const SAME_FIGURE: f64 = 5e-4;

/// How a Table II job is matched to telemetry for its profile.
#[derive(Debug, Clone, Copy)]
pub enum ProfileJoin<'a> {
    /// Same model, batch size and number of epochs in the workload file: the measured run is
    /// that very job. What `data/catalogs/futurewei-p100.json` uses.
    ModelBatchEpochs,
    /// Same model and batch size in the workload file, whatever the epochs, where exactly one
    /// such run exists. The profile is a peak over a run, which depends on what one step does
    /// (model, batch size) rather than on how many steps there are; but the run is not the job
    /// of the tables.
    ModelBatch,
    /// Same model and batch size in the table the papers clustered
    /// (`futurewei_clustering_real_and_synthetic.csv`: `ID, Model, Dataset, Batch Size, MGUP,
    /// MGMAP, MGTSAMP`), which holds the measured runs and the authors' interpolations of each
    /// model across batch sizes, the Table II batch sizes among them. What
    /// `data/catalogs/futurewei-p100-profiled.json` uses. The table numbers its models; a
    /// number is read as the model of the measured runs its rows repeat (same batch size and
    /// figures), so no mapping is typed in. The catalog's `source` says which profiles were
    /// measured and which the authors interpolated.
    Clustered(Input<'a>),
}

impl ProfileJoin<'_> {
    /// The catalog's name under this join: the profiled catalog is kept beside the other.
    fn catalog_name(&self) -> &'static str {
        match self {
            Self::ModelBatchEpochs | Self::ModelBatch => "futurewei-p100",
            Self::Clustered(_) => "futurewei-p100-profiled",
        }
    }
}

/// One measured run of `futurewei_mini_ml_workload.csv`.
struct Run {
    id: String,
    line: u64,
    key: String,
    epochs: u32,
    batch_size: u32,
    gpu_util_pct: f32,
    mem_access_pct: f32,
    mem_alloc_pct: f64,
}

/// One row of the clustering table, its model resolved through the measured runs.
struct ClusteredRow {
    id: String,
    key: String,
    batch_size: u32,
    gpu_util_pct: f32,
    mem_access_pct: f32,
    mem_alloc_pct: f64,
    /// The measured run the row repeats; `None` where the authors interpolated it.
    run: Option<String>,
}

/// One job of Table II.
struct TableJob {
    task: String,
    key: String,
    epochs: u32,
    batch_size: u32,
    solo_s: f64,
}

/// Builds the `futurewei-p100` catalog, or `futurewei-p100-profiled` under
/// [`ProfileJoin::Clustered`].
///
/// - `individual`: `futurewei_tableII_individual_runtime.csv` (`task, model, batch_size,
///   epochs, completion_time_s`, ...): one job type per row, named by `task`, with its solo
///   completion time.
/// - `pairs`: `futurewei_tableIII_IV_pair_interference.csv` (`task_a, task_b,
///   colocated_time_a_s, colocated_time_b_s`, ...): one pair per row, speed = solo time /
///   co-located time of each job, measured times kept in `colocated_time_s`.
/// - `workload`: `futurewei_mini_ml_workload.csv` (`ID, Model, Epoch, BS, MGUP, MaGTSAMP,
///   MGMAP`, ...): profiles of the jobs that match a measured run under `join`; `null` for the
///   others. Under [`ProfileJoin::Clustered`] the profiles come from the clustering table, and
///   the runs only tell which of its rows were measured and which model each number is.
pub fn futurewei(
    individual: Input<'_>,
    pairs: Input<'_>,
    workload: Input<'_>,
    join: ProfileJoin<'_>,
) -> Result<Catalog> {
    let runs = read_runs(workload)?;
    let jobs = read_jobs(individual)?;
    let clustered = match join {
        ProfileJoin::Clustered(table) => Some(read_clustered(table, &runs)?),
        ProfileJoin::ModelBatchEpochs | ProfileJoin::ModelBatch => None,
    };

    let mut matched = Vec::new();
    let mut unmatched = Vec::new();
    let mut job_types = Vec::new();
    for job in &jobs {
        let profile = match &clustered {
            Some(rows) => clustered_profile(job, rows, &mut matched, &mut unmatched),
            None => {
                let same_epochs = matches!(join, ProfileJoin::ModelBatchEpochs);
                run_profile(job, &runs, same_epochs, &mut matched, &mut unmatched)
            }
        };
        job_types.push(job_type(job, profile));
    }

    let solo: HashMap<&str, f64> = jobs.iter().map(|j| (j.task.as_str(), j.solo_s)).collect();
    let (pairs, disagreements) = read_pairs(pairs, &solo)?;

    let join_rule = match join {
        ProfileJoin::ModelBatchEpochs => "same model, batch size and number of epochs",
        ProfileJoin::ModelBatch => {
            "same model and batch size, whatever the number of epochs (an approximation: the \
             run is not the job of the tables)"
        }
        ProfileJoin::Clustered(_) => "",
    };
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_owned()
        } else {
            items.join("; ")
        }
    };
    let disagreements = if disagreements.is_empty() {
        "all of them agree with the times".to_owned()
    } else {
        format!(
            "these rows disagree with the times in the source itself: {}",
            disagreements.join("; ")
        )
    };
    let profiles = match join {
        ProfileJoin::Clustered(_) => format!(
            "Profiles: from futurewei_clustering_real_and_synthetic.csv, the table the papers \
             clustered (the 49 measured runs of futurewei_mini_ml_workload.csv and the authors' \
             interpolations of each model across batch sizes; taken from the repository at a \
             commit before its authors removed it), row of the same model and batch size. Its \
             Model column is a number; each number is read as the model of the measured runs \
             whose batch size, MGUP, MGMAP and MaGTSAMP its rows repeat. gpu_util_pct = MGUP, \
             mem_access_pct = MGTSAMP, mem_used_mib = MGMAP % of {GPU_MEMORY_MIB} MiB, rounded \
             (TensorFlow reserves most device memory up front, so this overstates what a job \
             needs, and many measured pairs sum to more than the GPU). A row that repeats a \
             measured run is that run's telemetry (other epochs than the job of the tables); \
             any other row was interpolated by the papers' authors, not measured: Tandem \
             estimates none of it. Joined: {}. Not joined: {}.",
            list(&matched),
            list(&unmatched),
        ),
        ProfileJoin::ModelBatchEpochs | ProfileJoin::ModelBatch => format!(
            "Profiles: joined to futurewei_mini_ml_workload.csv (repository path \
             open-data/gpu-sharing/Dataset.csv) on {join_rule}; gpu_util_pct = MGUP, \
             mem_access_pct = MaGTSAMP, mem_used_mib = MGMAP % of {GPU_MEMORY_MIB} MiB, rounded \
             (TensorFlow reserves most device memory up front, so this overstates what a job \
             needs). Joined: {}. profile is null where no measured run matches, since no \
             telemetry is ever estimated: {}.",
            list(&matched),
            list(&unmatched),
        ),
    };
    let source = format!(
        "Futurewei mini-ML workload dataset, CentaurusInfra/alnair (Apache-2.0), vendored in \
         data/alnair/ (see data/README.md). GPU: a Tesla P100 with {GPU_MEMORY_MIB} MiB, \
         TensorFlow. Job types: the {} jobs of the papers' Table II \
         (futurewei_tableII_individual_runtime.csv, transcribed from the JRS/PriRecT papers); \
         solo_time_s is their completion time alone. Pairs: the {} co-located pairs of Tables \
         III and IV (futurewei_tableIII_IV_pair_interference.csv); colocated_time_s holds the \
         measured completion times of a and b started together. speed = solo time / co-located \
         time of the same job, assuming that for a fixed amount of work the throughput ratio is \
         the inverse of the time ratio. That is approximate: the two jobs did not overlap for \
         their whole runs, and the one that finished last ran alone after its partner ended, so \
         its speed overstates its throughput while sharing; use colocated_time_s where the \
         measured times themselves matter. The source's slowdown and packing-saving columns \
         are not used (they derive from the times); {disagreements}. {profiles}",
        jobs.len(),
        pairs.len(),
    );

    Catalog::new(
        join.catalog_name(),
        source,
        vec![GpuModel {
            model: GPU_MODEL.to_owned(),
            memory_mib: GPU_MEMORY_MIB,
        }],
        job_types,
        pairs,
    )
}

/// Lowercase letters and digits only, with [`MODEL_ALIASES`] applied.
fn model_key(name: &str) -> String {
    let key: String = name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    for (from, to) in MODEL_ALIASES {
        if let Some(rest) = key.strip_prefix(from) {
            return format!("{to}{rest}");
        }
    }
    key
}

fn read_runs(workload: Input<'_>) -> Result<Vec<Run>> {
    let table = Table::read(workload)?;
    table.require(&["ID", "Model", "Epoch", "BS", "MGUP", "MaGTSAMP", "MGMAP"])?;
    let mut runs = Vec::new();
    for row in table.rows() {
        let percent = |column: &str| -> Result<f32> {
            let value: f32 = row.number(column)?;
            if (0.0..=100.0).contains(&value) {
                Ok(value)
            } else {
                Err(row.error_in(column, format!("{value} is not a percentage")))
            }
        };
        let gpu_util_pct = percent("MGUP")?;
        let mem_access_pct = percent("MaGTSAMP")?;
        let mem_alloc_pct: f64 = row.number("MGMAP")?;
        if !(0.0..=100.0).contains(&mem_alloc_pct) {
            return Err(row.error_in("MGMAP", format!("{mem_alloc_pct} is not a percentage")));
        }
        runs.push(Run {
            id: row.text("ID")?.to_owned(),
            line: row.line(),
            key: model_key(row.text("Model")?),
            epochs: row.number("Epoch")?,
            batch_size: row.number("BS")?,
            gpu_util_pct,
            mem_access_pct,
            mem_alloc_pct,
        });
    }
    Ok(runs)
}

/// A profile on the P100 from the source's percentages.
fn profile(gpu_util_pct: f32, mem_access_pct: f32, mem_alloc_pct: f64) -> Profile {
    Profile {
        gpu_util_pct,
        mem_access_pct,
        mem_used_mib: (mem_alloc_pct / 100.0 * f64::from(GPU_MEMORY_MIB)).round() as u32,
        gpu_model: GPU_MODEL.to_owned(),
    }
}

/// The catalog's entry for a Table II job.
fn job_type(job: &TableJob, profile: Option<Profile>) -> JobType {
    JobType {
        name: job.task.clone(),
        profile,
        declared: None,
        solo_throughput: BTreeMap::new(),
        solo_time_s: BTreeMap::from([(GPU_MODEL.to_owned(), job.solo_s)]),
        gpu_util_pct_approx: None,
        peak_mem_mib: BTreeMap::new(),
    }
}

/// The profile of `job` from the one measured run of its model and batch size (and epochs,
/// when `same_epochs`), noting the run in `matched`, or why there is none in `unmatched`.
fn run_profile(
    job: &TableJob,
    runs: &[Run],
    same_epochs: bool,
    matched: &mut Vec<String>,
    unmatched: &mut Vec<String>,
) -> Option<Profile> {
    let same_model_batch: Vec<&Run> = runs
        .iter()
        .filter(|run| run.key == job.key && run.batch_size == job.batch_size)
        .collect();
    let candidates: Vec<&Run> = same_model_batch
        .iter()
        .copied()
        .filter(|run| !same_epochs || run.epochs == job.epochs)
        .collect();
    match candidates.as_slice() {
        [run] => {
            matched.push(format!(
                "`{}` <- run ID {} (line {}, {} epochs)",
                job.task, run.id, run.line, run.epochs
            ));
            Some(profile(
                run.gpu_util_pct,
                run.mem_access_pct,
                run.mem_alloc_pct,
            ))
        }
        [] => {
            let others: Vec<String> = same_model_batch
                .iter()
                .map(|run| format!("ID {} with {} epochs", run.id, run.epochs))
                .collect();
            unmatched.push(if others.is_empty() {
                format!("`{}` (no run of that model and batch size)", job.task)
            } else {
                format!(
                    "`{}` (same model and batch size only in {})",
                    job.task,
                    others.join(", ")
                )
            });
            None
        }
        several => {
            let ids: Vec<&str> = several.iter().map(|run| run.id.as_str()).collect();
            unmatched.push(format!(
                "`{}` (ambiguous: runs ID {})",
                job.task,
                ids.join(", ")
            ));
            None
        }
    }
}

/// The profile of `job` from the clustering table's row of its model and batch size, noting
/// the row (and whether it was measured) in `matched`, or why there is none in `unmatched`.
fn clustered_profile(
    job: &TableJob,
    rows: &[ClusteredRow],
    matched: &mut Vec<String>,
    unmatched: &mut Vec<String>,
) -> Option<Profile> {
    let candidates: Vec<&ClusteredRow> = rows
        .iter()
        .filter(|row| row.key == job.key && row.batch_size == job.batch_size)
        .collect();
    match candidates.as_slice() {
        [row] => {
            let origin = match &row.run {
                Some(run) => format!("measured: run ID {run}"),
                None => "interpolated by the authors".to_owned(),
            };
            matched.push(format!("`{}` <- row ID {} ({origin})", job.task, row.id));
            Some(profile(
                row.gpu_util_pct,
                row.mem_access_pct,
                row.mem_alloc_pct,
            ))
        }
        [] => {
            unmatched.push(format!(
                "`{}` (no row of that model and batch size)",
                job.task
            ));
            None
        }
        several => {
            let ids: Vec<&str> = several.iter().map(|row| row.id.as_str()).collect();
            unmatched.push(format!(
                "`{}` (ambiguous: rows ID {})",
                job.task,
                ids.join(", ")
            ));
            None
        }
    }
}

/// Reads the clustering table and names each row's model by the measured runs: a row whose
/// batch size and three figures equal a run's repeats that run, and every repeated run of a
/// model number must be of one model. Rows of a number no run names are left out.
fn read_clustered(input: Input<'_>, runs: &[Run]) -> Result<Vec<ClusteredRow>> {
    let table = Table::read(input)?;
    table.require(&["ID", "Model", "Batch Size", "MGUP", "MGMAP", "MGTSAMP"])?;
    let same = |a: f64, b: f64| (a - b).abs() < SAME_FIGURE;
    // Each row with its model number; `key` is filled in once every number is resolved.
    let mut numbered: Vec<(String, ClusteredRow)> = Vec::new();
    // Model number -> (model key, line of the first row that said so).
    let mut models: BTreeMap<String, (String, u64)> = BTreeMap::new();
    for row in table.rows() {
        let percent = |column: &str| -> Result<f64> {
            let value: f64 = row.number(column)?;
            if (0.0..=100.0).contains(&value) {
                Ok(value)
            } else {
                Err(row.error_in(column, format!("{value} is not a percentage")))
            }
        };
        let (util, alloc, access) = (percent("MGUP")?, percent("MGMAP")?, percent("MGTSAMP")?);
        let number = row.text("Model")?.to_owned();
        let batch_size: u32 = row.number("Batch Size")?;
        let run = runs.iter().find(|run| {
            run.batch_size == batch_size
                && same(f64::from(run.gpu_util_pct), util)
                && same(f64::from(run.mem_access_pct), access)
                && same(run.mem_alloc_pct, alloc)
        });
        if let Some(run) = run {
            match models.get(&number) {
                Some((key, line)) if *key != run.key => {
                    return Err(row.error_in(
                        "Model",
                        format!(
                            "model {number} repeats runs of two models (run ID {} here, another \
                             model's run on line {line})",
                            run.id
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    models.insert(number.clone(), (run.key.clone(), row.line()));
                }
            }
        }
        numbered.push((
            number,
            ClusteredRow {
                id: row.text("ID")?.to_owned(),
                key: String::new(),
                batch_size,
                gpu_util_pct: util as f32,
                mem_access_pct: access as f32,
                mem_alloc_pct: alloc,
                run: run.map(|run| run.id.clone()),
            },
        ));
    }
    Ok(numbered
        .into_iter()
        .filter_map(|(number, row)| {
            let (key, _) = models.get(&number)?;
            Some(ClusteredRow {
                key: key.clone(),
                ..row
            })
        })
        .collect())
}

fn read_jobs(individual: Input<'_>) -> Result<Vec<TableJob>> {
    let table = Table::read(individual)?;
    table.require(&["task", "model", "batch_size", "epochs", "completion_time_s"])?;
    let mut jobs: Vec<TableJob> = Vec::new();
    for row in table.rows() {
        let task = row.text("task")?;
        if task.is_empty() {
            return Err(row.error_in("task", "is empty".into()));
        }
        if jobs.iter().any(|job| job.task == task) {
            return Err(row.error_in("task", format!("`{task}` is listed twice")));
        }
        let solo_s: f64 = row.number("completion_time_s")?;
        if solo_s <= 0.0 {
            return Err(row.error_in("completion_time_s", format!("{solo_s} is not positive")));
        }
        jobs.push(TableJob {
            task: task.to_owned(),
            key: model_key(row.text("model")?),
            epochs: row.number("epochs")?,
            batch_size: row.number("batch_size")?,
            solo_s,
        });
    }
    Ok(jobs)
}

/// The pairs, and the rows whose stated slowdown or saving disagrees with their times.
fn read_pairs(pairs: Input<'_>, solo: &HashMap<&str, f64>) -> Result<(Vec<Pair>, Vec<String>)> {
    let table = Table::read(pairs)?;
    table.require(&[
        "task_a",
        "task_b",
        "colocated_time_a_s",
        "colocated_time_b_s",
        "slowdown_a_pct",
        "slowdown_b_pct",
        "packing_saving_pct",
    ])?;
    let mut out = Vec::new();
    let mut disagreements = Vec::new();
    for row in table.rows() {
        let mut tasks = [""; 2];
        let mut solo_s = [0.0; 2];
        let mut together_s = [0.0; 2];
        for (i, side) in ["a", "b"].into_iter().enumerate() {
            let column = format!("task_{side}");
            tasks[i] = row.text(&column)?;
            solo_s[i] = *solo.get(tasks[i]).ok_or_else(|| {
                row.error_in(
                    &column,
                    format!("`{}` is not a job of the individual runtimes", tasks[i]),
                )
            })?;
            let column = format!("colocated_time_{side}_s");
            together_s[i] = row.number(&column)?;
            if together_s[i] <= 0.0 {
                return Err(row.error_in(&column, format!("{} is not positive", together_s[i])));
            }
        }

        let mut stated_off = Vec::new();
        for (i, column) in ["slowdown_a_pct", "slowdown_b_pct"].into_iter().enumerate() {
            let stated: f64 = row.number(column)?;
            let recomputed = 100.0 * crate::individual_slowdown(solo_s[i], together_s[i]);
            if (stated - recomputed).abs() > STATED_TOLERANCE_PCT {
                stated_off.push(format!("{column} {stated} vs {recomputed:.2}"));
            }
        }
        let stated: f64 = row.number("packing_saving_pct")?;
        let recomputed = 100.0 * crate::packing_saving(solo_s, together_s);
        if (stated - recomputed).abs() > STATED_TOLERANCE_PCT {
            stated_off.push(format!("packing_saving_pct {stated} vs {recomputed:.2}"));
        }
        if !stated_off.is_empty() {
            disagreements.push(format!(
                "line {} (`{}` with `{}`: {})",
                row.line(),
                tasks[0],
                tasks[1],
                stated_off.join(", ")
            ));
        }

        out.push(Pair {
            gpu_model: GPU_MODEL.to_owned(),
            a: tasks[0].to_owned(),
            b: tasks[1].to_owned(),
            speed_a: solo_s[0] / together_s[0],
            speed_b: solo_s[1] / together_s[1],
            colocated_time_s: Some(together_s),
        });
    }
    Ok((out, disagreements))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDIVIDUAL: &str = "\
task,model,batch_size,epochs,cluster_id,distance_from_centroid,completion_time_s
\"Inceptionv3 (BS=20, Epoch=5)\",Inceptionv3,20,5,0,115.14,316.2
\"Small BERT L2-H128-A2 (BS=256, Epoch=1)\",Small BERT L2-H128-A2,256,1,1,150.17,253.9
\"DCGAN (BS=256, Epoch=5)\",DCGAN,256,5,1,129.13,69.3
";

    const PAIRS: &str = "\
table,pair_type,task_a,task_b,cluster_a,cluster_b,dist_a,dist_b,colocated_time_a_s,colocated_time_b_s,slowdown_a_pct,slowdown_b_pct,packing_saving_pct
III,inter,\"Inceptionv3 (BS=20, Epoch=5)\",\"Small BERT L2-H128-A2 (BS=256, Epoch=1)\",0,1,115.14,150.17,338.8,294.5,7.14,15.99,40.5
IV,intra,\"Small BERT L2-H128-A2 (BS=256, Epoch=1)\",\"DCGAN (BS=256, Epoch=5)\",1,1,150.17,129.13,278.69,69.4,9.7,0.1,13.7
IV,intra,\"DCGAN (BS=256, Epoch=5)\",\"DCGAN (BS=256, Epoch=5)\",1,1,129.13,129.13,80,80,50,50,30
";

    /// Columns cut to the ones read, in the file's order; values from the real file except
    /// the Inception run, which is made up with the tables' batch size and epochs.
    const WORKLOAD: &str = "\
ID,Model,Dataset,Epoch,BS,MGUP,MaGTSAMP,MGMAP
21,Inception_v3,GTSRB,5,20,66.73,21.07,53.73
27,small_bert/ bert_en_uncased_L-2_H-128_A-2 ,IMDB,3,256,21.13,7.13,16.41
34,DCGAN,MNIST,50,256,46,15.53,16.11
35,DCGAN,MNIST,10,32,36.6,9.13,12.01
";

    fn input(origin: &'static str, text: &'static str) -> Input<'static> {
        Input { origin, text }
    }

    fn convert(join: ProfileJoin<'_>) -> Result<Catalog> {
        futurewei(
            input("individual.csv", INDIVIDUAL),
            input("pairs.csv", PAIRS),
            input("workload.csv", WORKLOAD),
            join,
        )
    }

    #[test]
    fn speeds_are_solo_over_colocated_times() {
        let catalog = convert(ProfileJoin::ModelBatchEpochs).expect("converts");
        assert_eq!(catalog.name(), "futurewei-p100");
        assert_eq!(catalog.gpu_model("P100").map(|g| g.memory_mib), Some(16280));
        assert_eq!(catalog.job_types().len(), 3);
        assert_eq!(catalog.pairs().len(), 3);
        let (a, b) = catalog
            .pair(
                "P100",
                "Small BERT L2-H128-A2 (BS=256, Epoch=1)",
                "Inceptionv3 (BS=20, Epoch=5)",
            )
            .expect("measured");
        assert_eq!((a, b), (253.9 / 294.5, 316.2 / 338.8));
        let first = &catalog.pairs()[0];
        assert_eq!(first.colocated_time_s, Some([338.8, 294.5]));
        let dcgan = catalog.job_type("DCGAN (BS=256, Epoch=5)").expect("listed");
        assert_eq!(dcgan.solo_time_s.get("P100"), Some(&69.3));
        assert!(dcgan.solo_throughput.is_empty());
        // Two instances of one job type.
        let (a, b) = catalog
            .pair("P100", "DCGAN (BS=256, Epoch=5)", "DCGAN (BS=256, Epoch=5)")
            .expect("measured");
        assert_eq!((a, b), (69.3 / 80.0, 69.3 / 80.0));
    }

    #[test]
    fn profiles_come_only_from_a_run_of_the_same_job() {
        let catalog = convert(ProfileJoin::ModelBatchEpochs).expect("converts");
        let inception = catalog
            .job_type("Inceptionv3 (BS=20, Epoch=5)")
            .and_then(|j| j.profile.clone())
            .expect("run 21 matches model, batch size and epochs");
        assert_eq!(
            inception,
            Profile {
                gpu_util_pct: 66.73,
                mem_access_pct: 21.07,
                // 53.73% of 16280 MiB = 8747.2
                mem_used_mib: 8747,
                gpu_model: "P100".into(),
            }
        );
        // Same model and batch size but other epochs: no profile, and the source says why.
        for name in [
            "Small BERT L2-H128-A2 (BS=256, Epoch=1)",
            "DCGAN (BS=256, Epoch=5)",
        ] {
            assert!(catalog.job_type(name).expect("listed").profile.is_none());
        }
        let source = catalog.source();
        assert!(source.contains("`Inceptionv3 (BS=20, Epoch=5)` <- run ID 21 (line 2, 5 epochs)"));
        assert!(source.contains(
            "`DCGAN (BS=256, Epoch=5)` (same model and batch size only in ID 34 with 50 epochs)"
        ));
    }

    #[test]
    fn the_looser_join_ignores_epochs() {
        let catalog = convert(ProfileJoin::ModelBatch).expect("converts");
        let bert = catalog
            .job_type("Small BERT L2-H128-A2 (BS=256, Epoch=1)")
            .and_then(|j| j.profile.clone())
            .expect("run 27 has the same model and batch size");
        // The alias maps the workload's spelling to the tables'.
        assert_eq!(bert.gpu_util_pct, 21.13);
        // 16.41% of 16280 MiB = 2671.548 MiB, rounded
        assert_eq!(bert.mem_used_mib, 2672);
        assert!(catalog.source().contains("whatever the number of epochs"));
    }

    /// The clustering table's shape; model 5 is Inception_v3 (row 1 repeats run 21), model 7
    /// small BERT L2-H128 (row 3 repeats run 27), model 13 DCGAN (row 4 repeats run 34, row
    /// 5 run 35). Row 2 and row 6 are interpolations; model 99 repeats no run.
    const CLUSTERING: &str = "\
ID,Model,Dataset,Batch Size,MGUP,MGMAP,MGTSAMP
1,5,1,20,66.73,53.73,21.07
2,13,3,230,43.64,14.93,14.55
3,7,2,256,21.13,16.41,7.13
4,13,3,256,46,16.11,15.53
5,13,3,32,36.6,12.01,9.13
6,99,9,20,1,1,1
";

    #[test]
    fn the_clustered_join_names_models_by_the_runs_their_rows_repeat() {
        let individual =
            format!("{INDIVIDUAL}\"DCGAN (BS=230, Epoch=5)\",DCGAN,230,5,1,131.43,73.7\n");
        let catalog = futurewei(
            Input {
                origin: "individual.csv",
                text: &individual,
            },
            input("pairs.csv", PAIRS),
            input("workload.csv", WORKLOAD),
            ProfileJoin::Clustered(input("clustering.csv", CLUSTERING)),
        )
        .expect("converts");
        assert_eq!(catalog.name(), "futurewei-p100-profiled");
        let profile = |name: &str| catalog.job_type(name).and_then(|j| j.profile.clone());
        // Row 2 is model 13 at batch size 230, which no run measured: the interpolation.
        let dcgan = profile("DCGAN (BS=230, Epoch=5)").expect("row 2");
        assert_eq!((dcgan.gpu_util_pct, dcgan.mem_access_pct), (43.64, 14.55));
        // 14.93% of 16280 MiB = 2430.6
        assert_eq!(dcgan.mem_used_mib, 2431);
        let source = catalog.source();
        assert!(
            source.contains("`DCGAN (BS=230, Epoch=5)` <- row ID 2 (interpolated by the authors)")
        );
        assert!(source.contains("`DCGAN (BS=256, Epoch=5)` <- row ID 4 (measured: run ID 34)"));
        assert!(
            source.contains("`Inceptionv3 (BS=20, Epoch=5)` <- row ID 1 (measured: run ID 21)")
        );
        assert!(source.contains("Not joined: none."));
    }

    #[test]
    fn a_model_number_that_repeats_two_models_is_an_error() {
        // Row 5 now says model 7 (small BERT) but repeats a DCGAN run.
        let clustering = CLUSTERING.replace("5,13,3,32", "5,7,3,32");
        let error = futurewei(
            input("individual.csv", INDIVIDUAL),
            input("pairs.csv", PAIRS),
            input("workload.csv", WORKLOAD),
            ProfileJoin::Clustered(Input {
                origin: "clustering.csv",
                text: &clustering,
            }),
        )
        .map(|_| ())
        .expect_err("two models under one number");
        assert_eq!(
            error.to_string(),
            "clustering.csv: line 6, column `Model`: model 7 repeats runs of two models (run ID \
             35 here, another model's run on line 4)"
        );
    }

    #[test]
    fn rows_that_contradict_their_times_are_reported() {
        let catalog = convert(ProfileJoin::ModelBatchEpochs).expect("converts");
        // The made-up DCGAN self pair states 50% slowdowns for 15.4% ones.
        assert!(
            catalog
                .source()
                .contains("line 4 (`DCGAN (BS=256, Epoch=5)` with")
        );
        assert!(catalog.source().contains("slowdown_a_pct 50 vs 15.44"));
        assert!(!catalog.source().contains("line 2 ("));
    }

    #[test]
    fn model_names_are_matched_across_spellings() {
        assert_eq!(model_key("Inception_v3"), model_key("Inceptionv3"));
        assert_eq!(model_key("ResNet50"), model_key("ResNet-50"));
        assert_eq!(model_key("Nasnet_Mobile"), model_key("NasnetMobile"));
        assert_eq!(
            model_key("small_bert/bert_en_uncased_L-4_H-512_A-8"),
            model_key("Small BERT L4-H512-A8")
        );
        assert_eq!(
            model_key("Reinforcement Learning "),
            model_key("RL CartPole")
        );
        assert_ne!(
            model_key("small_bert/bert_en_uncased_L-4_H-512_A-8"),
            model_key("Small BERT L2-H128-A2")
        );
    }

    #[test]
    fn bad_sources_are_errors_naming_file_line_and_column() {
        let error = |individual: &str, pairs: &str, workload: &str| -> String {
            let result = futurewei(
                Input {
                    origin: "individual.csv",
                    text: individual,
                },
                Input {
                    origin: "pairs.csv",
                    text: pairs,
                },
                Input {
                    origin: "workload.csv",
                    text: workload,
                },
                ProfileJoin::ModelBatchEpochs,
            );
            match result {
                Ok(_) => panic!("accepted"),
                Err(e) => e.to_string(),
            }
        };
        assert_eq!(
            error(&INDIVIDUAL.replace("316.2", "fast"), PAIRS, WORKLOAD),
            "individual.csv: line 2, column `completion_time_s`: `fast` is not a finite number"
        );
        assert_eq!(
            error(&INDIVIDUAL.replace("69.3", "0"), PAIRS, WORKLOAD),
            "individual.csv: line 4, column `completion_time_s`: 0 is not positive"
        );
        assert_eq!(
            error(INDIVIDUAL, &PAIRS.replace("\"DCGAN", "\"GAN"), WORKLOAD),
            "pairs.csv: line 3, column `task_b`: `GAN (BS=256, Epoch=5)` is not a job of the \
             individual runtimes"
        );
        assert_eq!(
            error(INDIVIDUAL, PAIRS, &WORKLOAD.replace("66.73", "166.73")),
            "workload.csv: line 2, column `MGUP`: 166.73 is not a percentage"
        );
        assert_eq!(
            error(INDIVIDUAL, PAIRS, &WORKLOAD.replace("MaGTSAMP", "GTSAMP")),
            "workload.csv: line 1: missing column `MaGTSAMP`"
        );
        assert_eq!(
            error(INDIVIDUAL, PAIRS, &WORKLOAD.replace(",16.11", "")),
            "workload.csv: line 4: 7 fields where the header has 8"
        );
        let twice = format!("{INDIVIDUAL}\"DCGAN (BS=256, Epoch=5)\",DCGAN,256,5,1,129.13,69.3\n");
        assert_eq!(
            error(&twice, PAIRS, WORKLOAD),
            "individual.csv: line 5, column `task`: `DCGAN (BS=256, Epoch=5)` is listed twice"
        );
    }
}
