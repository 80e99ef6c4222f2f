//! SchedTune's memory table: peak GPU memory of 12 CNNs at 4 batch sizes on 5 GPUs.

use std::collections::BTreeMap;

use tandem_api::ModelSummary;

use super::input::Input;
use super::table::Table;
use crate::catalog::{Catalog, GpuModel, JobType, UnmeasuredPairs};
use crate::error::Result;

/// The GPUs of the table, recognized by their CUDA cores (the table names none), with their
/// device memory (public specifications).
const GPUS: [(u32, &str, u32); 5] = [
    (2496, "K80", 11_441),
    (2560, "RTX 2070 Super", 8_192),
    (5888, "RTX 3070", 8_192),
    (5120, "V100", 16_384),
    (10496, "RTX 3090", 24_576),
];

/// Every job's assumed speed, in steps per second on every GPU model: the table measured
/// memory, not speed (stated in the catalog's `source`).
const ASSUMED_SPEED: f64 = 1.0;

/// Builds the `schedtune-memory` catalog from `model_stats.csv`
/// (`model,batchsize,activations,parameters,input,peak mem usage,Pipelines/CUDA cores,…`).
///
/// One job type per network and batch size, named `<network>-b<batch>`, declaring its model
/// (parameters, activations and input as the table gives them, batch size; FLOPs and layer
/// counts 0: not in the table) and its measured peak on each GPU. No pairs were measured.
pub fn schedtune(stats: Input<'_>) -> Result<Catalog> {
    let table = Table::read(stats)?;
    let cores_column = "Pipelines/CUDA cores";
    table.require(&[
        "model",
        "batchsize",
        "activations",
        "parameters",
        "input",
        "peak mem usage",
        cores_column,
    ])?;
    let mut job_types: Vec<JobType> = Vec::new();
    for row in table.rows() {
        let batch: u32 = row.number("batchsize")?;
        let name = format!("{}-b{batch}", row.text("model")?);
        let cores: u32 = row.number(cores_column)?;
        let Some(&(_, gpu, _)) = GPUS.iter().find(|(c, _, _)| *c == cores) else {
            return Err(row.error_in(
                cores_column,
                format!("{cores} CUDA cores match none of the table's five GPUs"),
            ));
        };
        let peak: u32 = row.number("peak mem usage")?;
        let declared = ModelSummary {
            params_mib: row.number("parameters")?,
            activations_mib: row.number("activations")?,
            input_mib: row.number("input")?,
            batch_size: batch,
            ..ModelSummary::default()
        };
        let position = match job_types.iter().position(|t| t.name == name) {
            Some(i) => i,
            None => {
                job_types.push(JobType {
                    name: name.clone(),
                    profile: None,
                    declared: Some(declared.clone()),
                    solo_throughput: GPUS
                        .iter()
                        .map(|(_, gpu, _)| ((*gpu).to_owned(), ASSUMED_SPEED))
                        .collect(),
                    solo_time_s: BTreeMap::new(),
                    gpu_util_pct_approx: None,
                    peak_mem_mib: BTreeMap::new(),
                });
                job_types.len() - 1
            }
        };
        let job = &mut job_types[position];
        if job.declared.as_ref() != Some(&declared) {
            return Err(row.error_in(
                "parameters",
                format!("`{name}` is described differently on another line"),
            ));
        }
        if job.peak_mem_mib.insert(gpu.to_owned(), peak).is_some() {
            return Err(row.error_in(
                "peak mem usage",
                format!("`{name}` on the {gpu} is listed twice"),
            ));
        }
    }
    Catalog::new(
        "schedtune-memory",
        "SchedTune (hadeelalbahar/SchedTune, MIT), model_stats.csv: peak GPU memory of 12 CNNs \
         (ResNet, DenseNet, VGG) at batch sizes 8, 16, 32 and 64 on five GPUs, identified by \
         their CUDA cores (2496 K80, 2560 RTX 2070 Super, 5888 RTX 3070, 5120 V100, 10496 RTX \
         3090; device memory from the public specifications). Job type `<network>-b<batch>`; \
         `declared` holds the table's parameters, activations and input (MB, read as MiB) and \
         the batch size (FLOPs and layer counts are not in the table: 0); `peak_mem_mib` the \
         measured peaks. Assumption: the table measured memory only, so every job runs at 1 \
         step/s on every GPU model, and no pair speed was measured: two jobs that fit a GPU's \
         memory share it by time-slicing, each at half speed (`unmeasured_pairs`).",
        GPUS.iter()
            .map(|&(_, model, memory_mib)| GpuModel {
                model: model.to_owned(),
                memory_mib,
            })
            .collect(),
        job_types,
        Vec::new(),
    )
    .map(|catalog| catalog.with_unmeasured_pairs(UnmeasuredPairs::TimeSliced))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(text: &str) -> Input<'_> {
        Input {
            origin: "stats.csv",
            text,
        }
    }

    const HEADER: &str = "model,batchsize,activations,parameters,input,peak mem usage,Pipelines/CUDA cores,Memory bandwidth (GB/s),Memory clock speed (MHz),Tensor cores,SM count\n";

    #[test]
    fn rows_become_one_job_type_per_network_and_batch_with_peaks_per_gpu() {
        let text = format!(
            "{HEADER}vgg19,64,7636.48,527.79,36.75,10088,2496,240.6,5012,0,13\n\
             vgg19,64,7636.48,527.79,36.75,10673,5120,900,1752,640,80\n"
        );
        let catalog = schedtune(input(&text)).unwrap();
        let vgg = &catalog.job_types()[0];
        assert_eq!(vgg.name, "vgg19-b64");
        assert_eq!(vgg.peak_mem_mib["K80"], 10088);
        assert_eq!(vgg.peak_mem_mib["V100"], 10673);
        assert_eq!(vgg.declared.as_ref().map(|d| d.batch_size), Some(64));
        assert_eq!(catalog.gpu_models().len(), 5);
    }

    #[test]
    fn an_unknown_gpu_or_a_repeated_row_is_an_error_naming_the_line() {
        let unknown = format!("{HEADER}vgg19,64,7636.48,527.79,36.75,10088,1234,1,1,0,1\n");
        let err = schedtune(input(&unknown)).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("1234"), "{err}");
        let twice = format!(
            "{HEADER}vgg19,64,7636.48,527.79,36.75,10088,2496,240.6,5012,0,13\n\
             vgg19,64,7636.48,527.79,36.75,10088,2496,240.6,5012,0,13\n"
        );
        let err = schedtune(input(&twice)).unwrap_err().to_string();
        assert!(err.contains("listed twice"), "{err}");
    }
}
