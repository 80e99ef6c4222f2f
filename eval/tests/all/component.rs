//! The bundled-table evaluations (`eval memory`, `eval utilization`) run the engine's forests
//! natively; these tests check whether that measures what ships: for every bundled
//! measurement, do the native bundled model and the engine component give the same estimate,
//! to the precision the WIT contract carries (whole MiB for memory, `f32` for utilization)?
//!
//! They must: the engine's forests draw from a generator that does not depend on the target
//! (`tandem_engine::forest`). When they did not (smartcore's `SmallRng` is 32-bit on wasm32),
//! every one of the 240 memory rows and 49 utilization runs differed, by up to 2.35% and
//! 6.07 points.

use tandem_api::{GpuSpec, Job, ModelSummary, Policy};
use tandem_engine::memory::{self, GpuTraits, MemoryModel};
use tandem_engine::utilization::{self, UtilizationModel};
use tandem_host::{HostConfig, Recommender, Runtime};

/// The engine component this workspace builds.
use tandem_engine_embedded::COMPONENT as ENGINE;

fn recommender() -> Recommender {
    let runtime = Runtime::from_bytes(ENGINE, HostConfig::default()).expect("the engine loads");
    runtime
        .bootstrap(&Policy::default(), 0)
        .expect("the engine bootstraps")
}

/// Whole MiB, rounded up, as the engine reports memory through the WIT.
fn mib(value: f64) -> Option<u32> {
    (value.is_finite() && value >= 0.0).then(|| value.ceil().min(f64::from(u32::MAX)) as u32)
}

/// A GPU spec that gives the engine exactly `traits` (no lookup by name).
fn spec(traits: GpuTraits) -> GpuSpec {
    GpuSpec {
        cuda_cores: Some(traits.cuda_cores as u32),
        mem_bandwidth_gbps: Some(traits.bandwidth_gbps as f32),
        mem_clock_mhz: Some(traits.mem_clock_mhz as u32),
        tensor_cores: Some(traits.tensor_cores as u32),
        sm_count: Some(traits.sm_count as u32),
        ..GpuSpec::new("eval-gpu", 81_920)
    }
}

fn declared(id: String, summary: ModelSummary) -> Job {
    Job {
        declared: Some(summary),
        ..Job::new(id)
    }
}

#[test]
fn the_native_memory_forest_is_the_components() {
    let mut engine = recommender();
    let native = MemoryModel::bundled();
    let rows = memory::bundled();
    let mut differ = Vec::new();
    let mut relative = Vec::new();
    for (i, labelled) in rows.iter().enumerate() {
        let row = labelled.row;
        let summary = ModelSummary {
            params_mib: row.params_mib as f32,
            activations_mib: row.activations_mib as f32,
            input_mib: row.input_mib as f32,
            batch_size: row.batch_size as u32,
            ..ModelSummary::default()
        };
        let spec = spec(row.gpu);
        // The same inputs on both sides: the traits as the engine reads them from the spec.
        let traits = GpuTraits::of(&spec).expect("every trait is given");
        let expected = native.estimate(&summary, traits);
        let estimate = engine
            .estimate(&declared(format!("row-{i}"), summary), &[spec])
            .expect("the engine estimates a declared job")
            .remove(0);
        let native = (mib(expected.peak_mib), mib(expected.reserved_mib));
        let component = (estimate.peak_mem_mib, estimate.reserved_mib);
        if let (Some(n), Some(c)) = (native.0, component.0) {
            relative.push((f64::from(n) - f64::from(c)).abs() / f64::from(c));
        }
        if native != component {
            differ.push(format!(
                "row {i}: native {native:?}, component {component:?}"
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} rows differ (peak: mean {:.2}%, max {:.2}% apart):\n{}",
        differ.len(),
        rows.len(),
        100.0 * relative.iter().sum::<f64>() / relative.len().max(1) as f64,
        100.0 * relative.iter().copied().fold(0.0, f64::max),
        differ.join("\n")
    );
    let margin = engine
        .describe()
        .expect("the engine describes")
        .memory_margin_pct;
    assert_eq!(margin, (native.margin() * 100.0) as f32, "the guard margin");
}

#[test]
fn the_native_utilization_forest_is_the_components() {
    let mut engine = recommender();
    let native = UtilizationModel::bundled();
    let rows = utilization::bundled();
    let mut differ = Vec::new();
    let mut apart = Vec::new();
    for (i, labelled) in rows.iter().enumerate() {
        let f = labelled.row.features;
        let summary = ModelSummary {
            batch_size: f[0] as u32,
            gflops: f[1] as f32,
            params_mib: f[2] as f32,
            activations_mib: f[3] as f32,
            input_mib: f[4] as f32,
            conv_layers: f[5] as u32,
            linear_layers: f[6] as u32,
            activation_layers: f[7] as u32,
            other_layers: f[8] as u32,
        };
        let expected = native.predict(&summary) as f32;
        let estimate = engine
            .estimate(
                &declared(format!("run-{i}"), summary),
                &[GpuSpec::new("P100", 16_384)],
            )
            .expect("the engine estimates a declared job")
            .remove(0);
        if let Some(component) = estimate.utilization_pct {
            apart.push((expected - component).abs());
        }
        if estimate.utilization_pct != Some(expected) {
            differ.push(format!(
                "run {i} ({}): native {expected}, component {:?}",
                labelled.name, estimate.utilization_pct
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} runs differ (mean {:.2}, max {:.2} percentage points apart):\n{}",
        differ.len(),
        rows.len(),
        apart.iter().sum::<f32>() / apart.len().max(1) as f32,
        apart.iter().copied().fold(0.0, f32::max),
        differ.join("\n")
    );
}
