//! `tandem trace`: build simulator inputs from public traces, or generate a synthetic one.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use tandem_catalog::Catalog;
use tandem_sim::{Truth, convert, demo};

use crate::atomic::write_shared;
use crate::error::from_sim;
use crate::queue::InputError;

/// The subcommands of `tandem trace`.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Convert Gavel's Philly-derived traces (tab-separated, seven columns) to a trace CSV.
    ///
    /// Several files are merged by arrival time (the 15 files of data/gavel/traces/
    /// philly_vc_seed0 make 15,264 jobs).
    Gavel {
        /// Gavel trace files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Multiply every arrival time by this factor (compress or stretch the trace).
        #[arg(long, value_name = "F", default_value_t = 1.0)]
        time_scale: f64,
        /// Keep only the first N jobs.
        #[arg(long, value_name = "N")]
        first: Option<usize>,
        /// The trace CSV to write (atomically).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Convert the Alibaba GPU-sharing trace (cluster-trace-gpu-v2023) to a trace and a
    /// cluster.
    ///
    /// Pods carry no job type, so each gets one drawn (seeded) from the catalogs' types, with
    /// its observed run time as its solo time on the reference GPU model. Only nodes of GPU
    /// models the catalogs measured are kept.
    Alibaba {
        /// The pod list (for example data/alibaba/openb_pod_list_default.csv).
        #[arg(long, value_name = "FILE")]
        pods: PathBuf,
        /// The node list (data/alibaba/openb_node_list_gpu_node.csv).
        #[arg(long, value_name = "FILE")]
        nodes: PathBuf,
        /// Catalogs whose job types and GPU models to use, repeatable [default: the built-in
        /// Gavel catalogs].
        #[arg(long = "catalog", value_name = "FILE")]
        catalogs: Vec<PathBuf>,
        /// GPU model whose solo throughput turns a pod's run time into work.
        #[arg(long, value_name = "MODEL", default_value = "V100")]
        reference_model: String,
        /// Seed of the job-type draw.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The trace CSV to write.
        #[arg(long, value_name = "FILE")]
        out_trace: PathBuf,
        /// The cluster CSV to write.
        #[arg(long, value_name = "FILE")]
        out_cluster: PathBuf,
    },
    /// Generate a synthetic trace: Poisson arrivals and a uniform mix of the catalogs' job
    /// types, solo durations log-uniform on the reference GPU model.
    Synthetic {
        /// Jobs to generate.
        #[arg(long, value_name = "N", default_value_t = 1000)]
        jobs: usize,
        /// Mean time between arrivals, s.
        #[arg(long, value_name = "S", default_value_t = 300.0)]
        mean_interarrival_s: f64,
        /// Share of jobs needing 2, 4 or 8 GPUs.
        #[arg(long, value_name = "F", default_value_t = 0.1)]
        multi_gpu_share: f64,
        /// Shortest solo duration on the reference model, s.
        #[arg(long, value_name = "S", default_value_t = 600.0)]
        min_duration_s: f64,
        /// Longest solo duration on the reference model, s.
        #[arg(long, value_name = "S", default_value_t = 36_000.0)]
        max_duration_s: f64,
        /// Catalogs whose job types to draw from, repeatable [default: the built-in Gavel
        /// catalogs].
        #[arg(long = "catalog", value_name = "FILE")]
        catalogs: Vec<PathBuf>,
        /// GPU model whose solo throughput turns a duration into work.
        #[arg(long, value_name = "MODEL", default_value = "V100")]
        reference_model: String,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The trace CSV to write.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

impl Command {
    /// Converts or generates, and writes the files atomically.
    pub(crate) fn execute(self) -> anyhow::Result<()> {
        let input = |e: tandem_sim::Error| -> anyhow::Error { from_sim(e, |_| true) };
        let read = |path: &Path| -> anyhow::Result<String> {
            std::fs::read_to_string(path).map_err(|e| {
                InputError::usage(format!("cannot read {}: {e}", path.display())).into()
            })
        };
        let truth_of = |catalogs: &[PathBuf]| -> anyhow::Result<Truth> {
            let catalogs: Vec<Catalog> = if catalogs.is_empty() {
                demo::catalogs().map_err(input)?
            } else {
                catalogs
                    .iter()
                    .map(|p| Catalog::read(p).map_err(|e| input(e.into())))
                    .collect::<anyhow::Result<_>>()?
            };
            Truth::new(&catalogs).map_err(input)
        };
        let reference = |truth: &Truth, model: &str| -> anyhow::Result<usize> {
            truth.model(model).ok_or_else(|| {
                InputError::usage(format!(
                    "--reference-model: `{model}` is not a GPU model of the catalogs"
                ))
                .into()
            })
        };
        match self {
            Command::Gavel {
                files,
                time_scale,
                first,
                out,
            } => {
                let texts = files
                    .iter()
                    .map(|p| Ok((p.display().to_string(), read(p)?)))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let mut trace = convert::gavel_traces(&texts).map_err(|e| input(e.into()))?;
                if let Some(n) = first {
                    convert::take_first(&mut trace, n);
                }
                convert::rescale(&mut trace, time_scale).map_err(|e| input(e.into()))?;
                write_shared(&out, &trace.to_csv())?;
                println!("wrote {} ({} jobs)", out.display(), trace.jobs.len());
            }
            Command::Alibaba {
                pods,
                nodes,
                catalogs,
                reference_model,
                seed,
                out_trace,
                out_cluster,
            } => {
                let truth = truth_of(&catalogs)?;
                let m = reference(&truth, &reference_model)?;
                let models: Vec<&str> = truth.models().iter().map(|m| m.name.as_str()).collect();
                let (cluster, kept) =
                    convert::alibaba_cluster(&read(&nodes)?, &nodes.display().to_string(), &models)
                        .map_err(|e| input(e.into()))?;
                let types: Vec<String> = truth
                    .types()
                    .iter()
                    .enumerate()
                    .filter(|(t, _)| truth.throughput(*t, m).is_some())
                    .map(|(_, t)| t.name.clone())
                    .collect();
                let (mut trace, summary) = convert::alibaba_trace(
                    &read(&pods)?,
                    &pods.display().to_string(),
                    &types,
                    seed,
                )
                .map_err(|e| input(e.into()))?;
                convert::scale_to_steps(&mut trace, |name| {
                    truth.job_type(name).and_then(|t| truth.throughput(t, m))
                })
                .map_err(|e| input(e.into()))?;
                write_shared(&out_trace, &trace.to_csv())?;
                write_shared(&out_cluster, &cluster.to_csv())?;
                println!(
                    "wrote {} ({} jobs of {} pods) and {} ({} nodes, {} GPUs kept; {} nodes of other models dropped)",
                    out_trace.display(),
                    trace.jobs.len(),
                    summary.pods,
                    out_cluster.display(),
                    kept.kept_nodes(),
                    kept.kept_gpus(),
                    kept.dropped_nodes()
                );
            }
            Command::Synthetic {
                jobs,
                mean_interarrival_s,
                multi_gpu_share,
                min_duration_s,
                max_duration_s,
                catalogs,
                reference_model,
                seed,
                out,
            } => {
                let truth = truth_of(&catalogs)?;
                let m = reference(&truth, &reference_model)?;
                let spec = convert::SyntheticSpec {
                    jobs,
                    mean_interarrival_s,
                    job_types: truth
                        .types()
                        .iter()
                        .enumerate()
                        .filter(|(t, _)| truth.throughput(*t, m).is_some())
                        .map(|(_, t)| (t.name.clone(), 1.0))
                        .collect(),
                    multi_gpu_share,
                    duration_s: (min_duration_s, max_duration_s),
                    seed,
                };
                let trace = convert::synthetic_trace(&spec, |name| {
                    truth.job_type(name).and_then(|t| truth.throughput(t, m))
                })
                .map_err(|e| input(e.into()))?;
                write_shared(&out, &trace.to_csv())?;
                println!("wrote {} ({} jobs)", out.display(), trace.jobs.len());
            }
        }
        Ok(())
    }
}
