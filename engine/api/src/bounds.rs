//! What a real observation can show: the bounds the engine checks every observation against
//! before it learns from it, and the pure functions that check them.
//!
//! The engine keeps running statistics of what it is told (means and spreads of slowdowns,
//! fits, speeds, memory peaks). One figure no real job can produce, such as a run of 1e-300 s
//! beside a partner that made it last 1e300 s, overflows them to infinity; a knowledge base
//! holding a non-finite number serializes it as `null` and cannot be loaded back. So every
//! figure an observation carries must lie where a real job's can: these bounds are generous
//! (every bundled catalog and the simulator's ground truth lie well inside them, by orders of
//! magnitude), and each rules out only what no GPU job can measure.
//!
//! The engine calls these checks where observations enter it, and adapters may call the same
//! functions up front, to refuse a report with a message naming its field before it reaches
//! the engine. Each check returns [`OutOfBounds`], which names the field in the WIT's terms
//! (`outcome.colocated-s[1]`, `profile.mem-used-mib`) and converts into
//! [`EngineError::InvalidInput`].
//!
//! ```
//! use tandem_api::{Outcome, bounds};
//!
//! let poison = Outcome {
//!     gpu_model: "V100".into(),
//!     jobs: vec!["a".into(), "b".into()],
//!     solo_s: vec![1e-300, 1e-300],
//!     colocated_s: vec![1e300, 1e300],
//! };
//! let refused = bounds::outcome(&poison).unwrap_err();
//! assert_eq!(refused.field, "outcome.solo-s[0]");
//! ```

use std::fmt::Display;

use crate::{EngineError, ModelSummary, Outcome, Profile};

/// Shortest run an outcome may report, alone or co-located, in seconds: 1 ms. A training job
/// that shared a GPU ran for far longer (a CUDA context alone takes longer to create); below it
/// the clocks that measured the run, not the run, are what is reported.
pub const MIN_RUN_S: f64 = 1e-3;

/// Longest run an outcome may report, alone or co-located, in seconds: 366 days. Jobs that
/// run longer on one GPU are checkpointed and resubmitted long before; a year bounds every
/// product of times the engine forms far from overflow.
pub const MAX_RUN_S: f64 = 366.0 * 24.0 * 3600.0;

/// Least ratio of a job's co-located time to its solo time: 0.1. Sharing a GPU does not make
/// a job faster (measurements a little below 1 are run-to-run noise: the bundled catalogs'
/// fastest co-located run is 4% faster than alone); ten times faster is a wrong solo time.
pub const MIN_COLOCATED_RATIO: f64 = 0.1;

/// Largest ratio of a job's co-located time to its solo time: 10,000. Time-slicing a GPU
/// between a few jobs slows each by a small factor (the bundled catalogs' worst pair is 11
/// times slower); ten thousand times slower is a job that stalled, not one that shared.
pub const MAX_COLOCATED_RATIO: f64 = 10_000.0;

/// Least speed `observe-speed` may report, in units of work per second: 1e-9, one unit in
/// about 32 years. Units are the host's (steps, samples, tokens), so the bounds are wide; they
/// keep speeds, their ratios between GPU models and the run times `work / speed` finite.
pub const MIN_WORK_PER_S: f64 = 1e-9;

/// Largest speed `observe-speed` may report, in units of work per second: 1e12 (a trillion
/// tokens a second is beyond any single GPU by several orders of magnitude).
pub const MAX_WORK_PER_S: f64 = 1e12;

/// Most work a job may have left ([`crate::Job::work`]), in the unit of its speeds: 1e18, a
/// year at more than 3e10 units a second. Keeps `work / speed` finite whatever the speed.
pub const MAX_WORK: f64 = 1e18;

/// Largest submission time a job may carry ([`crate::Job::submitted_at_s`]), in seconds on
/// the host's clock, either side of its zero: 1e12 s, about 31,700 years (Unix time is near
/// 2e9 s), so differences of submission times stay finite.
pub const MAX_SUBMITTED_AT_S: f64 = 1e12;

/// Memory of the largest GPU the engine assumes exists, in MiB: 512 GiB. The largest single
/// accelerators announced carry 288 GiB (NVIDIA B300, AMD MI355X); 512 GiB leaves room for
/// the next generation. A profile on a GPU model the engine knows nothing of may report at
/// most this much, and a GPU may have at most this much.
pub const LARGEST_GPU_MEMORY_MIB: u32 = 512 * 1024;

/// Largest size a declared model's parameters, activations or input may have, in MiB: 16 TiB,
/// more than the memory of any machine a single job runs on (the bundled declarations reach
/// 161 GiB of activations, a batch of 7,000).
pub const MAX_MODEL_MIB: f32 = 16.0 * 1024.0 * 1024.0;

/// Largest forward pass a declared model may have, in GFLOPs per batch: 1e12 (a zettaFLOP;
/// the bundled declarations reach 7,914).
pub const MAX_GFLOPS: f32 = 1e12;

/// Largest batch a declared model may have: 2^24 (16.7 million samples).
pub const MAX_BATCH_SIZE: u32 = 1 << 24;

/// Most layers of one kind a declared model may have: 2^20 (the bundled declarations reach
/// 356 convolutions).
pub const MAX_LAYERS: u32 = 1 << 20;

/// The largest memory, in MiB, of the GPUs sold under each short model name the engine and
/// the adapters use (`V100` is a 16 or a 32 GiB board, `A100` a 40 or an 80 GiB one): a
/// profile measured on a GPU of that name used at most this much.
const LARGEST_OF_MODEL: [(&str, u32); 13] = [
    ("K80", 12_288),
    ("P100", 16_384),
    ("P40", 24_576),
    ("T4", 16_384),
    ("V100", 32_768),
    ("A10", 24_576),
    ("A100", 81_920),
    ("L4", 24_576),
    ("L40", 49_152),
    ("H100", 96 * 1024),
    ("RTX3090", 24_576),
    ("RTX3070", 8_192),
    ("RTX2070S", 8_192),
];

/// A figure outside what a real observation can show, or outside its unit's range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {problem}")]
pub struct OutOfBounds {
    /// The field at fault, in the WIT's terms (`outcome.colocated-s[1]`).
    pub field: String,
    /// What is wrong with its value, with the value and the bounds.
    pub problem: String,
}

impl OutOfBounds {
    fn new(field: impl Display, problem: String) -> Self {
        Self {
            field: field.to_string(),
            problem,
        }
    }
}

impl From<OutOfBounds> for EngineError {
    fn from(error: OutOfBounds) -> Self {
        EngineError::InvalidInput(error.to_string())
    }
}

/// The result of one check.
pub type Checked = Result<(), OutOfBounds>;

/// A percentage, 0..=100 (NaN is refused).
pub fn percentage(value: f32, field: impl Display) -> Checked {
    if (0.0..=100.0).contains(&value) {
        return Ok(());
    }
    Err(OutOfBounds::new(
        field,
        format!("must be within 0..=100, got {value:?}"),
    ))
}

/// A run time of an outcome, [`MIN_RUN_S`]`..=`[`MAX_RUN_S`] seconds.
pub fn run_time(seconds: f64, field: impl Display) -> Checked {
    if (MIN_RUN_S..=MAX_RUN_S).contains(&seconds) {
        return Ok(());
    }
    Err(OutOfBounds::new(
        field,
        format!(
            "must be a positive number of seconds within {MIN_RUN_S}..={MAX_RUN_S} (1 ms to \
             366 days), got {seconds:?}"
        ),
    ))
}

/// A job's co-located time against its solo time: their ratio within
/// [`MIN_COLOCATED_RATIO`]`..=`[`MAX_COLOCATED_RATIO`]. `field` is the co-located time's.
pub fn colocated_ratio(solo_s: f64, colocated_s: f64, field: impl Display) -> Checked {
    let ratio = colocated_s / solo_s;
    if (MIN_COLOCATED_RATIO..=MAX_COLOCATED_RATIO).contains(&ratio) {
        return Ok(());
    }
    Err(OutOfBounds::new(
        field,
        format!(
            "is {ratio:?} times the job's solo time ({colocated_s:?} s against {solo_s:?} s); a job \
             sharing a GPU runs between {MIN_COLOCATED_RATIO} and {MAX_COLOCATED_RATIO} times \
             as long as alone"
        ),
    ))
}

/// The times of an outcome: every solo and co-located time a run time ([`run_time`]), and
/// each job's co-located time within the ratios a co-location can show of its solo time
/// ([`colocated_ratio`]). Fields are named `outcome.solo-s[i]` and `outcome.colocated-s[i]`;
/// the lists' lengths and the job ids are the engine's other checks.
pub fn outcome(outcome: &Outcome) -> Checked {
    for (name, list) in [
        ("outcome.solo-s", &outcome.solo_s),
        ("outcome.colocated-s", &outcome.colocated_s),
    ] {
        for (i, &t) in list.iter().enumerate() {
            run_time(t, format_args!("{name}[{i}]"))?;
        }
    }
    for (i, (&solo, &colocated)) in outcome.solo_s.iter().zip(&outcome.colocated_s).enumerate() {
        colocated_ratio(solo, colocated, format_args!("outcome.colocated-s[{i}]"))?;
    }
    Ok(())
}

/// The largest memory, in MiB, of the boards sold under `gpu_model` when it is a short name
/// the engine and the adapters use (`V100`: 32 GiB, `A100`: 80 GiB), matched ignoring case,
/// spaces, `-` and `_`; `None` for any other name.
pub fn known_memory_of(gpu_model: &str) -> Option<u32> {
    let normalized: String = gpu_model
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '_'))
        .map(|c| c.to_ascii_uppercase())
        .collect();
    LARGEST_OF_MODEL
        .iter()
        .find(|(name, _)| *name == normalized)
        .map(|&(_, mib)| mib)
}

/// The most memory, in MiB, a job measured on a GPU named `gpu_model` can have used when
/// nothing else is known of that model: [`known_memory_of`] it, else
/// [`LARGEST_GPU_MEMORY_MIB`].
pub fn largest_memory_of(gpu_model: &str) -> u32 {
    known_memory_of(gpu_model).unwrap_or(LARGEST_GPU_MEMORY_MIB)
}

/// Memory a job used or a GPU has, at most `limit_mib`. `limit_mib` is the GPU's memory where
/// the caller knows it, else [`largest_memory_of`] the model.
pub fn memory(mib: u32, limit_mib: u32, field: impl Display) -> Checked {
    if mib <= limit_mib {
        return Ok(());
    }
    Err(OutOfBounds::new(
        field,
        format!("is {mib} MiB, more than the {limit_mib} MiB the GPU has"),
    ))
}

/// A profile: both percentages 0..=100 and the memory used at most `memory_limit_mib` (the
/// GPU's memory where the caller knows it, else [`largest_memory_of`] its model). Fields are
/// named `{field}.gpu-util-pct` and so on.
pub fn profile(profile: &Profile, memory_limit_mib: u32, field: impl Display) -> Checked {
    percentage(profile.gpu_util_pct, format_args!("{field}.gpu-util-pct"))?;
    percentage(
        profile.mem_access_pct,
        format_args!("{field}.mem-access-pct"),
    )?;
    memory(
        profile.mem_used_mib,
        memory_limit_mib,
        format_args!("{field}.mem-used-mib"),
    )
}

/// A speed `observe-speed` reports, in units of work per second:
/// [`MIN_WORK_PER_S`]`..=`[`MAX_WORK_PER_S`].
pub fn speed(work_per_s: f64, field: impl Display) -> Checked {
    if (MIN_WORK_PER_S..=MAX_WORK_PER_S).contains(&work_per_s) {
        return Ok(());
    }
    Err(OutOfBounds::new(
        field,
        format!(
            "must be a finite, positive speed within {MIN_WORK_PER_S:e}..={MAX_WORK_PER_S:e} units \
             of work per second, got {work_per_s:?}"
        ),
    ))
}

/// A peak `observe-memory` reports: positive, and at most the GPU's memory.
pub fn peak_memory(peak_mib: u32, gpu_memory_mib: u32, field: impl Display) -> Checked {
    if peak_mib == 0 {
        return Err(OutOfBounds::new(field, "must be positive".into()));
    }
    memory(peak_mib, gpu_memory_mib, field)
}

/// Work left ([`crate::Job::work`]): finite, not negative, at most [`MAX_WORK`].
pub fn work(work: f64, field: impl Display) -> Checked {
    if (0.0..=MAX_WORK).contains(&work) {
        return Ok(());
    }
    Err(OutOfBounds::new(
        field,
        format!("must be finite, not negative and at most {MAX_WORK:e}, got {work:?}"),
    ))
}

/// A submission time ([`crate::Job::submitted_at_s`]): finite, within
/// `±`[`MAX_SUBMITTED_AT_S`].
pub fn submitted_at(seconds: f64, field: impl Display) -> Checked {
    if (-MAX_SUBMITTED_AT_S..=MAX_SUBMITTED_AT_S).contains(&seconds) {
        return Ok(());
    }
    Err(OutOfBounds::new(
        field,
        format!("must be finite and within ±{MAX_SUBMITTED_AT_S:e} s, got {seconds:?}"),
    ))
}

/// A declared model ([`ModelSummary`]): sizes finite, not negative and at most
/// [`MAX_MODEL_MIB`], not all zero; GFLOPs at most [`MAX_GFLOPS`]; a batch of 1 to
/// [`MAX_BATCH_SIZE`]; at most [`MAX_LAYERS`] layers of each kind. Fields are named
/// `{field}.params-mib` and so on.
pub fn model_summary(summary: &ModelSummary, field: impl Display) -> Checked {
    for (name, value, most) in [
        ("params-mib", summary.params_mib, MAX_MODEL_MIB),
        ("activations-mib", summary.activations_mib, MAX_MODEL_MIB),
        ("input-mib", summary.input_mib, MAX_MODEL_MIB),
        ("gflops", summary.gflops, MAX_GFLOPS),
    ] {
        if !(0.0..=most).contains(&value) {
            return Err(OutOfBounds::new(
                format_args!("{field}.{name}"),
                format!("must be finite, not negative and at most {most}, got {value:?}"),
            ));
        }
    }
    if !(1..=MAX_BATCH_SIZE).contains(&summary.batch_size) {
        return Err(OutOfBounds::new(
            format_args!("{field}.batch-size"),
            format!(
                "must be within 1..={MAX_BATCH_SIZE}, got {}",
                summary.batch_size
            ),
        ));
    }
    for (name, layers) in [
        ("conv-layers", summary.conv_layers),
        ("linear-layers", summary.linear_layers),
        ("activation-layers", summary.activation_layers),
        ("other-layers", summary.other_layers),
    ] {
        if layers > MAX_LAYERS {
            return Err(OutOfBounds::new(
                format_args!("{field}.{name}"),
                format!("must be at most {MAX_LAYERS}, got {layers}"),
            ));
        }
    }
    if summary.params_mib + summary.activations_mib + summary.input_mib <= 0.0 {
        return Err(OutOfBounds::new(
            field,
            "has params-mib, activations-mib and input-mib all 0; a model has a size".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field a refusal names, or a panic saying the value was accepted.
    fn refused(checked: Checked) -> String {
        checked.expect_err("refused").field
    }

    fn two_jobs(solo_s: [f64; 2], colocated_s: [f64; 2]) -> Outcome {
        Outcome {
            gpu_model: "V100".into(),
            jobs: vec!["a".into(), "b".into()],
            solo_s: solo_s.to_vec(),
            colocated_s: colocated_s.to_vec(),
        }
    }

    #[test]
    fn run_times_are_accepted_from_a_millisecond_to_a_year() {
        for t in [MIN_RUN_S, 1.0, MAX_RUN_S] {
            assert_eq!(run_time(t, "t"), Ok(()), "{t}");
        }
        let below = MIN_RUN_S * (1.0 - 1e-9);
        let above = MAX_RUN_S * (1.0 + 1e-9);
        for t in [below, above, 0.0, -1.0, f64::NAN, f64::INFINITY, 1e-300] {
            assert_eq!(
                refused(run_time(t, "outcome.solo-s[0]")),
                "outcome.solo-s[0]"
            );
        }
        let message = run_time(above, "x").unwrap_err().to_string();
        assert!(
            message.starts_with("x must be a positive number of seconds"),
            "{message}"
        );
    }

    #[test]
    fn colocated_ratios_are_accepted_from_a_tenth_to_ten_thousand() {
        for ratio in [MIN_COLOCATED_RATIO, 1.0, MAX_COLOCATED_RATIO] {
            assert_eq!(colocated_ratio(10.0, 10.0 * ratio, "c"), Ok(()), "{ratio}");
        }
        for ratio in [MIN_COLOCATED_RATIO * 0.999, MAX_COLOCATED_RATIO * 1.001] {
            assert_eq!(refused(colocated_ratio(10.0, 10.0 * ratio, "c")), "c");
        }
    }

    #[test]
    fn an_outcome_names_the_first_item_out_of_bounds() {
        let poison = two_jobs([1e-300, 1e-300], [1e300, 1e300]);
        assert_eq!(refused(outcome(&poison)), "outcome.solo-s[0]");
        let long = two_jobs([100.0, 80.0], [120.0, MAX_RUN_S * 2.0]);
        assert_eq!(refused(outcome(&long)), "outcome.colocated-s[1]");
        let faster = two_jobs([100.0, 80.0], [5.0, 95.0]);
        assert_eq!(refused(outcome(&faster)), "outcome.colocated-s[0]");
        let stalled = two_jobs([100.0, 1.0], [120.0, 20_000.0]);
        assert_eq!(refused(outcome(&stalled)), "outcome.colocated-s[1]");
        assert_eq!(outcome(&two_jobs([100.0, 80.0], [130.0, 95.0])), Ok(()));
        // Noise a little below the solo time is a real measurement.
        assert_eq!(outcome(&two_jobs([100.0, 80.0], [96.0, 80.0])), Ok(()));
    }

    #[test]
    fn speeds_are_accepted_between_their_bounds() {
        for s in [MIN_WORK_PER_S, 1.0, MAX_WORK_PER_S] {
            assert_eq!(speed(s, "work-per-s"), Ok(()), "{s}");
        }
        for s in [
            MIN_WORK_PER_S * 0.999,
            MAX_WORK_PER_S * 1.001,
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
        ] {
            assert_eq!(refused(speed(s, "work-per-s")), "work-per-s", "{s}");
        }
    }

    #[test]
    fn memory_is_bounded_by_the_gpu_and_the_largest_board_of_its_name() {
        assert_eq!(known_memory_of("V100"), Some(32_768));
        assert_eq!(known_memory_of("rtx-3090"), Some(24_576));
        assert_eq!(known_memory_of("a100"), Some(81_920));
        assert_eq!(known_memory_of("B200"), None);
        assert_eq!(largest_memory_of("B200"), LARGEST_GPU_MEMORY_MIB);
        let p = |mem_used_mib| Profile {
            gpu_util_pct: 50.0,
            mem_access_pct: 20.0,
            mem_used_mib,
            gpu_model: "V100".into(),
        };
        assert_eq!(profile(&p(32_768), 32_768, "profile"), Ok(()));
        assert_eq!(
            refused(profile(&p(32_769), 32_768, "profile")),
            "profile.mem-used-mib"
        );
        assert_eq!(peak_memory(16_384, 16_384, "peak-mem-mib"), Ok(()));
        assert_eq!(
            refused(peak_memory(16_385, 16_384, "peak-mem-mib")),
            "peak-mem-mib"
        );
        assert_eq!(
            refused(peak_memory(0, 16_384, "peak-mem-mib")),
            "peak-mem-mib"
        );
    }

    #[test]
    fn percentages_are_zero_to_a_hundred() {
        for v in [0.0, 100.0] {
            assert_eq!(percentage(v, "p"), Ok(()));
        }
        for v in [-0.01, 100.01, f32::NAN, f32::INFINITY] {
            assert_eq!(refused(percentage(v, "p")), "p");
        }
        let bad = Profile {
            gpu_util_pct: 50.0,
            mem_access_pct: 101.0,
            mem_used_mib: 1,
            gpu_model: "V100".into(),
        };
        assert_eq!(
            refused(profile(&bad, 16_384, "queue[2].profile")),
            "queue[2].profile.mem-access-pct"
        );
    }

    #[test]
    fn model_summaries_are_bounded_field_by_field() {
        let fine = ModelSummary {
            params_mib: MAX_MODEL_MIB,
            activations_mib: 0.0,
            input_mib: 1.0,
            batch_size: MAX_BATCH_SIZE,
            gflops: MAX_GFLOPS,
            conv_layers: MAX_LAYERS,
            ..ModelSummary::default()
        };
        assert_eq!(model_summary(&fine, "declared"), Ok(()));
        let cases: [(ModelSummary, &str); 6] = [
            (
                ModelSummary {
                    params_mib: MAX_MODEL_MIB * 1.01,
                    ..fine.clone()
                },
                "declared.params-mib",
            ),
            (
                ModelSummary {
                    activations_mib: f32::NAN,
                    ..fine.clone()
                },
                "declared.activations-mib",
            ),
            (
                ModelSummary {
                    gflops: MAX_GFLOPS * 1.01,
                    ..fine.clone()
                },
                "declared.gflops",
            ),
            (
                ModelSummary {
                    batch_size: MAX_BATCH_SIZE + 1,
                    ..fine.clone()
                },
                "declared.batch-size",
            ),
            (
                ModelSummary {
                    batch_size: 0,
                    ..fine.clone()
                },
                "declared.batch-size",
            ),
            (
                ModelSummary {
                    other_layers: MAX_LAYERS + 1,
                    ..fine.clone()
                },
                "declared.other-layers",
            ),
        ];
        for (bad, field) in cases {
            assert_eq!(refused(model_summary(&bad, "declared")), field);
        }
        let empty = ModelSummary {
            batch_size: 1,
            ..ModelSummary::default()
        };
        assert_eq!(refused(model_summary(&empty, "declared")), "declared");
    }

    #[test]
    fn work_and_submission_times_are_bounded() {
        assert_eq!(work(0.0, "w"), Ok(()));
        assert_eq!(work(MAX_WORK, "w"), Ok(()));
        for w in [-1.0, MAX_WORK * 1.01, f64::NAN] {
            assert_eq!(refused(work(w, "w")), "w");
        }
        for t in [-MAX_SUBMITTED_AT_S, 0.0, MAX_SUBMITTED_AT_S] {
            assert_eq!(submitted_at(t, "s"), Ok(()));
        }
        for t in [MAX_SUBMITTED_AT_S * 1.01, f64::NEG_INFINITY, f64::NAN] {
            assert_eq!(refused(submitted_at(t, "s")), "s");
        }
    }

    #[test]
    fn a_refusal_becomes_invalid_input_naming_the_field() {
        let error: EngineError = speed(0.0, "work-per-s").unwrap_err().into();
        match error {
            EngineError::InvalidInput(message) => {
                assert!(message.starts_with("work-per-s must be"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }
}
