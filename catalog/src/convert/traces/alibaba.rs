//! Alibaba's cluster-trace-gpu-v2023 (alibaba/clusterdata, CC BY 4.0; the trace of the FGD
//! paper, USENIX ATC '23), vendored in `data/alibaba/`.
//!
//! Two files are used:
//!
//! - the node list, `sn,cpu_milli,memory_mib,gpu,model`: one production node per row, with its
//!   GPU count and GPU model, becomes a [`Cluster`] ([`alibaba_cluster`]);
//! - the pod list, `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
//!   creation_time,deletion_time,scheduled_time` (times in seconds), becomes a [`Trace`]
//!   ([`alibaba_trace`]).
//!
//! The trace records resources and times but no workload: a pod has no job type and no work
//! measured in training steps. A converted pod therefore gets a job type drawn (seeded) from
//! the caller's catalogs, and its observed run time, in seconds, as `steps`; [`scale_to_steps`]
//! then turns seconds into the type's unit, so that the job alone on the reference GPU model
//! runs exactly as long as the pod did. Pods asking for a fraction of a GPU (`gpu_milli` <
//! 1000) become one-GPU jobs: the trace format has no fractions, and sharing a GPU is what the
//! simulated policies decide for themselves.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::draw::unit;
use crate::cluster::{Cluster, NodeGroup};
use crate::csv_input;
use crate::error::{Error, Result, at_line};
use crate::trace::{Trace, TraceJob};

/// The catalog GPU model an Alibaba node model stands for.
///
/// `V100M16` and `V100M32` are the 16 GB and 32 GB V100: one chip, so both map to `V100`, the
/// model the Gavel catalogs measured. The catalogs' V100 has 16 GB, so a `V100M32` node is
/// simulated with half its memory; that can only turn a fitting co-location into a predicted
/// OOM, never the reverse. Every other model (`P100`, `T4`, `A10` and the undisclosed `G2`,
/// `G3`) keeps its name; it is kept only if the caller's catalogs name it too.
pub fn catalog_model(alibaba_model: &str) -> &str {
    match alibaba_model {
        "V100M16" | "V100M32" => "V100",
        other => other,
    }
}

/// What became of the nodes of one Alibaba GPU model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelTally {
    /// The model as the node list spells it (`V100M32`).
    pub model: String,
    /// The catalog model it maps to ([`catalog_model`]).
    pub catalog_model: String,
    /// Whether its nodes are in the cluster (the catalog model is one of `keep_models`).
    pub kept: bool,
    /// Its nodes.
    pub nodes: u32,
    /// Their GPUs.
    pub gpus: u32,
}

/// What [`alibaba_cluster`] kept and dropped, so a report can say how much of the production
/// cluster the simulation covers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AlibabaClusterSummary {
    /// One tally per Alibaba model, sorted by model name.
    pub models: Vec<ModelTally>,
    /// Nodes without any GPU (skipped; the GPU-node list has none, the all-node list has some).
    pub gpuless_nodes: u32,
}

impl AlibabaClusterSummary {
    /// Nodes kept, over all models.
    pub fn kept_nodes(&self) -> u32 {
        self.models.iter().filter(|m| m.kept).map(|m| m.nodes).sum()
    }

    /// GPUs kept, over all models.
    pub fn kept_gpus(&self) -> u32 {
        self.models.iter().filter(|m| m.kept).map(|m| m.gpus).sum()
    }

    /// GPU nodes dropped because no catalog measured their model.
    pub fn dropped_nodes(&self) -> u32 {
        self.models
            .iter()
            .filter(|m| !m.kept)
            .map(|m| m.nodes)
            .sum()
    }

    /// GPUs of the dropped nodes.
    pub fn dropped_gpus(&self) -> u32 {
        self.models.iter().filter(|m| !m.kept).map(|m| m.gpus).sum()
    }
}

/// Builds a [`Cluster`] from Alibaba's node list (`openb_node_list_gpu_node.csv`).
///
/// Nodes are grouped by (catalog model, GPU count); groups are sorted by model name, then GPU
/// count, so the result does not depend on the order of the file. Nodes whose model maps
/// ([`catalog_model`]) to none of `keep_models` (the models the run's catalogs measured, such
/// as `["P100", "V100"]`) are dropped, and nodes without GPUs skipped; the summary counts both.
/// A cluster has no source line per group, so its `lines` are the rows of its own CSV form
/// ([`Cluster::to_csv`]).
///
/// Errors name the line: a missing column, a GPU count that is not a whole number, a GPU node
/// without a model; and, without a line, a list in which no node is kept.
pub fn alibaba_cluster(
    node_csv: &str,
    origin: &str,
    keep_models: &[&str],
) -> Result<(Cluster, AlibabaClusterSummary)> {
    let (mut reader, index) = csv_input::open(node_csv, origin, &["sn", "gpu", "model"])?;
    let mut tallies = BTreeMap::<String, ModelTally>::new();
    let mut groups = BTreeMap::<(String, u32), u32>::new();
    let mut summary = AlibabaClusterSummary::default();
    for record in reader.records() {
        let (record, line) = csv_input::row(record, node_csv, origin)?;
        let field = |i: usize| record.get(index[i]).unwrap_or_default();
        let gpus = field(1).parse::<u32>().map_err(|_| {
            at_line(
                origin,
                line,
                format!("`gpu` must be a whole number ≥ 0, got `{}`", field(1)),
            )
        })?;
        if gpus == 0 {
            summary.gpuless_nodes += 1;
            continue;
        }
        let model = field(2);
        if model.is_empty() {
            return Err(at_line(
                origin,
                line,
                format!("node `{}` has {gpus} GPUs but no `model`", field(0)),
            ));
        }
        let mapped = catalog_model(model);
        let kept = keep_models.contains(&mapped);
        let tally = tallies
            .entry(model.to_owned())
            .or_insert_with(|| ModelTally {
                model: model.to_owned(),
                catalog_model: mapped.to_owned(),
                kept,
                nodes: 0,
                gpus: 0,
            });
        tally.nodes += 1;
        tally.gpus += gpus;
        if kept {
            *groups.entry((mapped.to_owned(), gpus)).or_default() += 1;
        }
    }
    summary.models = tallies.into_values().collect();
    if groups.is_empty() {
        return Err(Error::Input {
            origin: origin.to_owned(),
            problem: format!(
                "no GPU node has a model in {keep_models:?} (the list's models: {})",
                summary
                    .models
                    .iter()
                    .map(|m| m.model.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let groups: Vec<NodeGroup> = groups
        .into_iter()
        .map(|((gpu_model, gpus_per_node), nodes)| NodeGroup {
            nodes,
            gpus_per_node,
            gpu_model,
        })
        .collect();
    let cluster = Cluster {
        origin: origin.to_owned(),
        lines: (2..).take(groups.len()).collect(),
        groups,
    };
    Ok((cluster, summary))
}

/// What [`alibaba_trace`] did with the pods of the list. Skipped pods are legitimate in the
/// source, so they are counted rather than refused.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AlibabaTraceSummary {
    /// Pods in the list.
    pub pods: usize,
    /// Pods converted into jobs.
    pub kept: usize,
    /// Of those, pods that asked for a fraction of one GPU (`gpu_milli` < 1000): one-GPU jobs
    /// in the trace.
    pub fractional: usize,
    /// Pods without a GPU (`num_gpu` = 0): nothing for a GPU scheduler to place.
    pub cpu_only: usize,
    /// GPU pods never scheduled (empty `scheduled_time`, phase `Pending`): they never ran, so
    /// nothing says how much work they were.
    pub never_scheduled: usize,
    /// GPU pods without a deletion time: still running when the list was taken, their run
    /// time unknown.
    pub never_deleted: usize,
    /// GPU pods deleted no later than they were scheduled: they ran for no time at all.
    pub no_runtime: usize,
}

/// Columns [`alibaba_trace`] reads; the list's others (CPU, memory, QoS, phase, GPU type
/// constraints) describe resources the simulator does not model.
const POD_COLUMNS: [&str; 6] = [
    "name",
    "num_gpu",
    "gpu_milli",
    "creation_time",
    "deletion_time",
    "scheduled_time",
];

/// Builds a [`Trace`] from Alibaba's pod list (`openb_pod_list_default.csv`).
///
/// A pod asking for at least one GPU (or a fraction of one), that was scheduled and deleted
/// later, becomes a job: `arrival_s` = its creation time minus the earliest creation time of
/// the jobs kept (the trace starts at 0), `gpus` = `num_gpu` (a fraction counts as one), and
/// `steps` = its **run time in seconds**, from scheduling to deletion. The run time, not the
/// time since creation: the wait before scheduling was queueing in Alibaba's cluster, which
/// the simulator replaces by its own. Call [`scale_to_steps`] next to express the run time in
/// the unit of the type's throughput. The job type is drawn uniformly from `job_types` with
/// Xoshiro256++ seeded by `seed`, one draw per kept pod in file order, so one seed gives one
/// trace. Jobs are sorted by arrival (stably: equal times keep file order); each keeps its line
/// in the pod list.
///
/// Errors name the line (a missing column, a number that is not one, a negative time, an
/// empty creation time); pods that cannot be jobs are counted in the summary.
pub fn alibaba_trace(
    pod_csv: &str,
    origin: &str,
    job_types: &[String],
    seed: u64,
) -> Result<(Trace, AlibabaTraceSummary)> {
    if job_types.is_empty() || job_types.iter().any(String::is_empty) {
        return Err(Error::Input {
            origin: origin.to_owned(),
            problem: "the job types to draw from must be non-empty names, at least one".into(),
        });
    }
    let (mut reader, index) = csv_input::open(pod_csv, origin, &POD_COLUMNS)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut summary = AlibabaTraceSummary::default();
    // (creation time, line, job) of the pods kept, in file order.
    let mut kept = Vec::new();
    for record in reader.records() {
        let (record, line) = csv_input::row(record, pod_csv, origin)?;
        summary.pods += 1;
        let field = |i: usize| record.get(index[i]).unwrap_or_default();
        let whole = |i: usize| -> Result<u32> {
            field(i).parse::<u32>().map_err(|_| {
                at_line(
                    origin,
                    line,
                    format!(
                        "`{}` must be a whole number ≥ 0, got `{}`",
                        POD_COLUMNS[i],
                        field(i)
                    ),
                )
            })
        };
        // A time, or `None` where the list leaves it empty.
        let time = |i: usize| -> Result<Option<f64>> {
            if field(i).is_empty() {
                return Ok(None);
            }
            match field(i).parse::<f64>() {
                Ok(t) if t.is_finite() && t >= 0.0 => Ok(Some(t)),
                _ => Err(at_line(
                    origin,
                    line,
                    format!(
                        "`{}` must be a time in seconds ≥ 0, got `{}`",
                        POD_COLUMNS[i],
                        field(i)
                    ),
                )),
            }
        };
        let num_gpu = whole(1)?;
        let gpu_milli = whole(2)?;
        let created = time(3)?.ok_or_else(|| at_line(origin, line, "`creation_time` is empty"))?;
        let deleted = time(4)?;
        let scheduled = time(5)?;
        if num_gpu == 0 {
            summary.cpu_only += 1;
            continue;
        }
        let Some(scheduled) = scheduled else {
            summary.never_scheduled += 1;
            continue;
        };
        let Some(deleted) = deleted else {
            summary.never_deleted += 1;
            continue;
        };
        // The list never schedules a pod before creating it; should one, it cannot have run
        // before it existed.
        let run_s = deleted - scheduled.max(created);
        if run_s <= 0.0 {
            summary.no_runtime += 1;
            continue;
        }
        if gpu_milli < 1000 {
            summary.fractional += 1;
        }
        let job = TraceJob {
            arrival_s: created,
            job_type: pick(&mut rng, job_types).to_owned(),
            gpus: num_gpu,
            steps: run_s,
        };
        kept.push((line, job));
    }
    summary.kept = kept.len();
    let Some(start) = kept.iter().map(|(_, j)| j.arrival_s).min_by(f64::total_cmp) else {
        return Err(Error::Input {
            origin: origin.to_owned(),
            problem: format!(
                "no pod can be a job ({} pods: {} without GPU, {} never scheduled, {} never \
                 deleted, {} without run time)",
                summary.pods,
                summary.cpu_only,
                summary.never_scheduled,
                summary.never_deleted,
                summary.no_runtime
            ),
        });
    };
    // Stable: pods created in the same second keep their file order.
    kept.sort_by(|a, b| a.1.arrival_s.total_cmp(&b.1.arrival_s));
    let mut trace = Trace {
        origin: origin.to_owned(),
        ..Trace::default()
    };
    for (line, mut job) in kept {
        job.arrival_s -= start;
        trace.jobs.push(job);
        trace.lines.push(line);
    }
    Ok((trace, summary))
}

/// Turns the seconds of a trace from [`alibaba_trace`] into work in the unit of each job
/// type's throughput.
///
/// `throughput_of` gives a type's solo throughput on the reference GPU model (for the Gavel
/// catalogs, steps/s on `V100`). Every job's `steps` (its observed run time, s) is multiplied
/// by it, so that `steps / throughput` is again the run time: the job takes as long alone on
/// the reference model as the pod did in Alibaba's cluster, and longer or shorter on slower or
/// faster models, as its type's measurements say. A job on `n` GPUs progresses at `n` times
/// its type's solo throughput in the simulator (linear scaling), so its work is `n` times
/// larger for the same run time.
///
/// Errors name the job's line and type when the type has no throughput, or one that is not a
/// positive finite number.
pub fn scale_to_steps(
    trace: &mut Trace,
    throughput_of: impl Fn(&str) -> Option<f64>,
) -> Result<()> {
    for (job, &line) in trace.jobs.iter_mut().zip(&trace.lines) {
        let throughput = throughput_of(&job.job_type)
            .filter(|t| t.is_finite() && *t > 0.0)
            .ok_or_else(|| {
                at_line(
                    &trace.origin,
                    line,
                    format!(
                        "job type `{}` has no positive solo throughput on the reference GPU model",
                        job.job_type
                    ),
                )
            })?;
        job.steps *= throughput * f64::from(job.gpus);
    }
    Ok(())
}

/// A uniform choice from a non-empty slice.
///
/// The draw is computed from the generator's raw output rather than through `rand`'s
/// distributions, whose algorithms may change between versions: a seed must keep naming the
/// same trace.
fn pick<'a>(rng: &mut Xoshiro256PlusPlus, from: &'a [String]) -> &'a str {
    let index = (unit(rng) * from.len() as f64) as usize;
    from.get(index.min(from.len().saturating_sub(1)))
        .map_or("", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "sn,cpu_milli,memory_mib,gpu,model\n\
        n0,64000,262144,2,P100\n\
        n1,96000,786432,8,V100M32\n\
        n2,96000,786432,8,V100M16\n\
        n3,32000,262144,0,\n\
        n4,64000,262144,2,T4\n\
        n5,64000,262144,1,P100\n\
        n6,64000,262144,2,P100\n";

    const POD_HEADER: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,\
        creation_time,deletion_time,scheduled_time\n";

    fn types() -> Vec<String> {
        vec!["A".into(), "B".into(), "C".into()]
    }

    #[test]
    fn maps_v100_variants_and_keeps_other_names() {
        assert_eq!(catalog_model("V100M16"), "V100");
        assert_eq!(catalog_model("V100M32"), "V100");
        assert_eq!(catalog_model("P100"), "P100");
        assert_eq!(catalog_model("G2"), "G2");
    }

    #[test]
    fn groups_kept_nodes_and_tallies_the_rest() {
        let (cluster, summary) = alibaba_cluster(NODES, "n.csv", &["P100", "V100"]).unwrap();
        let group = |nodes, gpus_per_node, model: &str| NodeGroup {
            nodes,
            gpus_per_node,
            gpu_model: model.into(),
        };
        assert_eq!(
            cluster.groups,
            [
                group(1, 1, "P100"),
                group(2, 2, "P100"),
                group(2, 8, "V100")
            ]
        );
        assert_eq!(cluster.lines, [2, 3, 4]);
        assert_eq!(summary.gpuless_nodes, 1);
        assert_eq!((summary.kept_nodes(), summary.kept_gpus()), (5, 21));
        assert_eq!((summary.dropped_nodes(), summary.dropped_gpus()), (1, 2));
        let names: Vec<&str> = summary.models.iter().map(|m| m.model.as_str()).collect();
        assert_eq!(names, ["P100", "T4", "V100M16", "V100M32"]);
        assert!(!summary.models[1].kept);
        assert_eq!(summary.models[3].catalog_model, "V100");
        // The converted cluster is a valid cluster file.
        let again = Cluster::parse(&cluster.to_csv(), "c.csv").unwrap();
        assert_eq!(again.groups, cluster.groups);
    }

    #[test]
    fn cluster_errors_are_named() {
        let e = |text: &str, keep: &[&str]| {
            alibaba_cluster(text, "n.csv", keep)
                .unwrap_err()
                .to_string()
        };
        assert!(e("sn,gpu\nn0,2\n", &["P100"]).starts_with("n.csv:1: missing column `model`"));
        assert!(e("sn,gpu,model\nn0,two,P100\n", &["P100"]).starts_with("n.csv:2: `gpu`"));
        assert!(e("sn,gpu,model\nn0,-2,P100\n", &["P100"]).starts_with("n.csv:2: `gpu`"));
        assert!(e("sn,gpu,model\nn0,2,\n", &["P100"]).contains("n.csv:2: node `n0` has 2 GPUs"));
        assert!(e("sn,gpu,model\nn0,2\n", &["P100"]).starts_with("n.csv:2: malformed row"));
        assert!(e(NODES, &["K80"]).contains("no GPU node has a model in [\"K80\"]"));
    }

    #[test]
    fn keeps_scheduled_gpu_pods_with_their_run_time() {
        let text = POD_HEADER.to_owned()
            + "p0,1000,1024,1,1000,,LS,Running,100,400,150\n" // run 250 s
            + "p1,1000,1024,0,0,,BE,Running,110,300,110\n" // CPU only
            + "p2,1000,1024,1,500,,BE,Pending,120,900,\n" // never scheduled
            + "p3,1000,1024,1,1000,,LS,Running,130,,130\n" // never deleted
            + "p4,1000,1024,2,1000,,LS,Failed,90,500,95\n" // run 405 s, earliest
            + "p5,1000,1024,1,300,,BE,Pending,140,140,140\n" // no run time
            + "p6,1000,1024,1,250,,BE,Running,100,160,100\n"; // run 60 s, fractional
        let (trace, summary) = alibaba_trace(&text, "p.csv", &types(), 7).unwrap();
        assert_eq!(
            summary,
            AlibabaTraceSummary {
                pods: 7,
                kept: 3,
                fractional: 1,
                cpu_only: 1,
                never_scheduled: 1,
                never_deleted: 1,
                no_runtime: 1,
            }
        );
        let arrivals: Vec<f64> = trace.jobs.iter().map(|j| j.arrival_s).collect();
        assert_eq!(arrivals, [0.0, 10.0, 10.0]);
        let steps: Vec<f64> = trace.jobs.iter().map(|j| j.steps).collect();
        assert_eq!(steps, [405.0, 250.0, 60.0]);
        assert_eq!(trace.jobs[0].gpus, 2);
        // Sorted by arrival, ties in file order, each job keeping its line in the list.
        assert_eq!(trace.lines, [6, 2, 8]);
        assert!(trace.jobs.iter().all(|j| types().contains(&j.job_type)));
        let again = Trace::parse(&trace.to_csv(), "t.csv").unwrap();
        assert_eq!(again.jobs, trace.jobs);
    }

    #[test]
    fn job_types_follow_the_seed() {
        let mut text = POD_HEADER.to_owned();
        for i in 0..300 {
            text.push_str(&format!(
                "p{i},1000,1024,1,1000,,LS,Running,{i},{},{i}\n",
                i + 60
            ));
        }
        let draw = |seed| -> Vec<String> {
            let (trace, _) = alibaba_trace(&text, "p.csv", &types(), seed).unwrap();
            trace.jobs.into_iter().map(|j| j.job_type).collect()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
        // Uniform: each of three types near 100 of 300.
        let counts: Vec<usize> = ["A", "B", "C"]
            .iter()
            .map(|t| draw(1).iter().filter(|j| j == t).count())
            .collect();
        assert!(counts.iter().all(|c| (70..=130).contains(c)), "{counts:?}");
    }

    #[test]
    fn pod_errors_are_named() {
        let e = |text: &str| {
            alibaba_trace(text, "p.csv", &types(), 1)
                .unwrap_err()
                .to_string()
        };
        let short = "name,num_gpu,gpu_milli\np0,1,1000\n";
        assert!(e(short).starts_with("p.csv:1: missing column `creation_time`"));
        let row = |fields: &str| POD_HEADER.to_owned() + fields + "\n";
        assert!(e(&row("p0,1,1,one,1000,,LS,Running,0,10,0")).starts_with("p.csv:2: `num_gpu`"));
        assert!(
            e(&row("p0,1,1,1,1000,,LS,Running,x,10,0")).starts_with("p.csv:2: `creation_time`")
        );
        assert!(
            e(&row("p0,1,1,1,1000,,LS,Running,0,-1,0")).starts_with("p.csv:2: `deletion_time`")
        );
        assert!(e(&row("p0,1,1,1,1000,,LS,Running,,10,0")).contains("`creation_time` is empty"));
        assert!(e(&row("p0,1,1,0,0,,LS,Running,0,10,0")).contains("no pod can be a job"));
        let none: &[String] = &[];
        let e = alibaba_trace(&row("p0,1,1,1,1000,,LS,Running,0,10,0"), "p.csv", none, 1);
        assert!(e.unwrap_err().to_string().contains("job types"));
    }

    #[test]
    fn scales_seconds_by_the_reference_throughput() {
        let text = POD_HEADER.to_owned()
            + "p0,1,1,1,1000,,LS,Running,0,100,0\n"
            + "p1,1,1,1,1000,,LS,Running,5,25,5\n";
        let (mut trace, _) = alibaba_trace(&text, "p.csv", &["A".to_owned()], 1).unwrap();
        scale_to_steps(&mut trace, |t| (t == "A").then_some(2.5)).unwrap();
        let steps: Vec<f64> = trace.jobs.iter().map(|j| j.steps).collect();
        assert_eq!(steps, [250.0, 50.0]);
        let e = scale_to_steps(&mut trace, |_| None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("p.csv:2: job type `A`"), "{e}");
        let e = scale_to_steps(&mut trace, |_| Some(0.0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no positive solo throughput"));
    }

    /// The vendored files, as the project uses them.
    #[test]
    fn vendored_files_convert() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/alibaba");
        let nodes = std::fs::read_to_string(format!("{dir}/openb_node_list_gpu_node.csv")).unwrap();
        let (cluster, summary) = alibaba_cluster(&nodes, "nodes", &["P100", "V100"]).unwrap();
        let shape: Vec<(u32, u32, &str)> = cluster
            .groups
            .iter()
            .map(|g| (g.nodes, g.gpus_per_node, g.gpu_model.as_str()))
            .collect();
        assert_eq!(
            shape,
            [
                (3, 1, "P100"),
                (131, 2, "P100"),
                (19, 1, "V100"),
                (37, 4, "V100"),
                (29, 8, "V100")
            ]
        );
        assert_eq!((summary.kept_nodes(), summary.kept_gpus()), (219, 664));
        assert_eq!(summary.kept_nodes() + summary.dropped_nodes(), 1213);
        assert_eq!(summary.gpuless_nodes, 0);

        let pods = std::fs::read_to_string(format!("{dir}/openb_pod_list_default.csv")).unwrap();
        let (trace, summary) = alibaba_trace(&pods, "pods", &types(), 1).unwrap();
        assert_eq!(summary.pods, 8152);
        assert_eq!(summary.cpu_only, 1088);
        assert_eq!(summary.never_scheduled, 861);
        assert_eq!(summary.kept, 7064 - 861);
        assert_eq!(summary.fractional, 2573);
        assert_eq!(summary.no_runtime + summary.never_deleted, 0);
        assert_eq!(trace.jobs.len(), summary.kept);
        assert_eq!(trace.jobs[0].arrival_s, 0.0);
        assert!(trace.jobs.iter().any(|j| j.gpus == 8));
        Trace::parse(&trace.to_csv(), "t.csv").unwrap();
    }
}
