//! Conversions between these types and their twins generated from the WIT.

/// Generates `From` conversions, both ways, between a type of this crate and its twin
/// generated from the WIT by a bindings generator (wit-bindgen in the guest, wasmtime's
/// `bindgen!` in the host).
///
/// Each field says how it converts: bare (moved as is), `into` (its own twin), `vec` (a list
/// of twins) or `option` (an optional twin). Enums list their variants.
///
/// ```text
/// tandem_api::mirror!(struct wit::Gpu, tandem_api::Gpu { id, node, spec: into, residents: vec });
/// tandem_api::mirror!(enum wit::Objective, tandem_api::Objective { Balanced, MinSlowdown, MaxPacking });
/// ```
#[macro_export]
macro_rules! mirror {
    (struct $wit:ty, $api:ty { $($field:ident $(: $how:ident)?),* $(,)? }) => {
        impl ::core::convert::From<$wit> for $api {
            fn from(value: $wit) -> Self {
                Self { $($field: $crate::mirror!(@field value.$field $(, $how)?)),* }
            }
        }
        impl ::core::convert::From<$api> for $wit {
            fn from(value: $api) -> Self {
                Self { $($field: $crate::mirror!(@field value.$field $(, $how)?)),* }
            }
        }
    };
    (enum $wit:ty, $api:ty { $($variant:ident),* $(,)? }) => {
        impl ::core::convert::From<$wit> for $api {
            fn from(value: $wit) -> Self {
                match value { $(<$wit>::$variant => <$api>::$variant),* }
            }
        }
        impl ::core::convert::From<$api> for $wit {
            fn from(value: $api) -> Self {
                match value { $(<$api>::$variant => <$wit>::$variant),* }
            }
        }
    };
    (@field $value:expr) => { $value };
    (@field $value:expr, into) => { ::core::convert::Into::into($value) };
    (@field $value:expr, vec) => {
        ::core::iter::Iterator::collect(
            ::core::iter::Iterator::map(::core::iter::IntoIterator::into_iter($value), ::core::convert::Into::into),
        )
    };
    (@field $value:expr, option) => { ::core::option::Option::map($value, ::core::convert::Into::into) };
}

/// Invokes [`mirror!`] for every type of the contract. `$wit` is the path of the generated
/// `types` interface module; the variants that carry data (`error`, `cluster-change`) convert
/// by hand. Anonymous types (`option<tuple<f64, f64>>`, the bounds of
/// `synthesize`) are plain Rust on every side and need no conversion.
#[macro_export]
macro_rules! mirror_contract {
    ($wit:path) => {
        use $wit as wit_types;
        $crate::mirror!(enum wit_types::LogLevel, $crate::LogLevel { Trace, Debug, Info, Warn, Error });
        $crate::mirror!(struct wit_types::Profile, $crate::Profile { gpu_util_pct, mem_access_pct, mem_used_mib, gpu_model });
        $crate::mirror!(struct wit_types::GpuSpec, $crate::GpuSpec {
            model, memory_mib, sm_count, cuda_cores, tensor_cores, mem_bandwidth_gbps, mem_clock_mhz,
            price_per_hour, power_watts,
        });
        $crate::mirror!(struct wit_types::ModelSummary, $crate::ModelSummary {
            params_mib, activations_mib, input_mib, batch_size, gflops, conv_layers, linear_layers,
            activation_layers, other_layers,
        });
        $crate::mirror!(enum wit_types::Priority, $crate::Priority { Latency, Cost, Energy });
        $crate::mirror!(struct wit_types::Job, $crate::Job { id, profile: option, declared: option, priority: option, submitted_at_s, work });
        $crate::mirror!(struct wit_types::Gpu, $crate::Gpu { id, node, spec: into, residents: vec });
        $crate::mirror!(enum wit_types::Objective, $crate::Objective { Balanced, MinSlowdown, MaxPacking });
        $crate::mirror!(struct wit_types::Policy, $crate::Policy { objective: into, max_jobs_per_gpu, exploration, model_caps: vec });
        $crate::mirror!(struct wit_types::ModelCap, $crate::ModelCap { gpu_model, max_jobs });
        $crate::mirror!(struct wit_types::Outcome, $crate::Outcome { gpu_model, jobs, solo_s, colocated_s });
        $crate::mirror!(struct wit_types::Assignment, $crate::Assignment { cluster, uncertainty });
        $crate::mirror!(struct wit_types::Prediction, $crate::Prediction { slowdown_pct, packing_saving_pct, uncertainty, peak_mem_mib });
        $crate::mirror!(enum wit_types::MemorySource, $crate::MemorySource { Observed, Transferred, Declared, Unknown });
        $crate::mirror!(struct wit_types::Estimate, $crate::Estimate {
            gpu_model, memory_source: into, peak_mem_mib, reserved_mib, fits_empty, speed, solo_s, cost, energy_kj,
            utilization_pct,
        });
        $crate::mirror!(struct wit_types::Placement, $crate::Placement { jobs, residents, gpu, predicted: into, reason });
        $crate::mirror!(struct wit_types::Unplaced, $crate::Unplaced { job, reason });
        $crate::mirror!(struct wit_types::Recommendation, $crate::Recommendation { placements: vec, unplaced: vec });
        $crate::mirror!(struct wit_types::Fit, $crate::Fit { gpu, fits, reason });
        $crate::mirror!(struct wit_types::GpuScore, $crate::GpuScore { gpu, score });
        $crate::mirror!(struct wit_types::ClusterInfo, $crate::ClusterInfo {
            id, gpu_util_pct, mem_access_pct, mem_share_pct, members, radius,
        });
        $crate::mirror!(struct wit_types::PairInfo, $crate::PairInfo {
            cluster, partner, observations, slowdown_pct, slowdown_std_pct, packing_saving_pct, rank,
        });
        $crate::mirror!(struct wit_types::KnowledgeSummary, $crate::KnowledgeSummary {
            profiles, seed_points, outcomes, residual_observations, memory_rows, memory_margin_pct,
            speed_workloads, clusters: vec, pairs: vec,
        });
        $crate::mirror!(struct wit_types::Sample, $crate::Sample { batch_size, values });
        $crate::mirror!(struct wit_types::Series, $crate::Series { workload, samples: vec });
        $crate::mirror!(enum wit_types::Interpolation, $crate::Interpolation { Linear, Pchip, CubicSpline, Barycentric });
        $crate::mirror!(struct wit_types::MethodScore, $crate::MethodScore { workload, method: into, rmse, mae, predictions });
        $crate::mirror!(struct wit_types::BestMethod, $crate::BestMethod { workload, method: into });
        $crate::mirror!(struct wit_types::Synthesis, $crate::Synthesis { scores: vec, best: vec, generated: vec });
        $crate::mirror!(struct wit_types::ViewGpu, $crate::ViewGpu { handle, gpu: into });
        $crate::mirror!(struct wit_types::Binding, $crate::Binding { gpu, job: into });
        $crate::mirror!(struct wit_types::Unbinding, $crate::Unbinding { gpu, job });
        $crate::mirror!(struct wit_types::ClusterSummary, $crate::ClusterSummary { gpus, nodes, states, handles });
        $crate::mirror!(struct wit_types::Choice, $crate::Choice { gpu, score, reason });

        impl ::core::convert::From<wit_types::ClusterChange> for $crate::ClusterChange {
            fn from(value: wit_types::ClusterChange) -> Self {
                match value {
                    wit_types::ClusterChange::SetGpu(g) => Self::SetGpu(g.into()),
                    wit_types::ClusterChange::RemoveGpu(h) => Self::RemoveGpu(h),
                    wit_types::ClusterChange::Bind(b) => Self::Bind(b.into()),
                    wit_types::ClusterChange::Unbind(u) => Self::Unbind(u.into()),
                    wit_types::ClusterChange::Clear => Self::Clear,
                }
            }
        }
        impl ::core::convert::From<$crate::ClusterChange> for wit_types::ClusterChange {
            fn from(value: $crate::ClusterChange) -> Self {
                match value {
                    $crate::ClusterChange::SetGpu(g) => Self::SetGpu(g.into()),
                    $crate::ClusterChange::RemoveGpu(h) => Self::RemoveGpu(h),
                    $crate::ClusterChange::Bind(b) => Self::Bind(b.into()),
                    $crate::ClusterChange::Unbind(u) => Self::Unbind(u.into()),
                    $crate::ClusterChange::Clear => Self::Clear,
                }
            }
        }

        impl ::core::convert::From<wit_types::Error> for $crate::EngineError {
            fn from(value: wit_types::Error) -> Self {
                match value {
                    wit_types::Error::InvalidInput(m) => Self::InvalidInput(m),
                    wit_types::Error::UnknownJob(m) => Self::UnknownJob(m),
                    wit_types::Error::Infeasible(m) => Self::Infeasible(m),
                }
            }
        }
        impl ::core::convert::From<$crate::EngineError> for wit_types::Error {
            fn from(value: $crate::EngineError) -> Self {
                match value {
                    $crate::EngineError::InvalidInput(m) => Self::InvalidInput(m),
                    $crate::EngineError::UnknownJob(m) => Self::UnknownJob(m),
                    $crate::EngineError::Infeasible(m) => Self::Infeasible(m),
                }
            }
        }
    };
}
