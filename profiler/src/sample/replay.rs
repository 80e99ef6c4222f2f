//! Replaying recorded samples: tests, demos, and profiling from a recording made elsewhere.
//!
//! # The replay format
//!
//! JSON Lines, one line per GPU per tick, in time order. Lines with the same `t_ms` that follow
//! each other make one tick; blank lines and lines starting with `#` are skipped.
//!
//! ```text
//! # t_ms: milliseconds since the recording started
//! {"t_ms": 0, "gpu": {"index": 0, "model": "Tesla V100-SXM2-16GB", "memory_total_mib": 16384},
//!  "device": {"sm_util": 41, "mem_util": 14},
//!  "processes": [{"pid": 4242, "used_memory_mib": 3900, "sm_util": 40, "mem_util": 13,
//!                 "cgroup": "0::/kubepods.slice/kubepods-pod0f3c..._....slice/cri-containerd-ab12.scope"}]}
//! ```
//! (one line in the file; wrapped here).
//!
//! | field | meaning |
//! |---|---|
//! | `t_ms` | when, in ms |
//! | `gpu.index`, `gpu.model`, `gpu.memory_total_mib` | the GPU as NVML names it (`name()`), and its memory |
//! | `device.sm_util`, `device.mem_util` | `utilization_rates()`: SM busy %, memory-access % |
//! | `processes[].pid`, `.used_memory_mib` | `running_compute_processes()` |
//! | `processes[].sm_util`, `.mem_util` | optional: `process_utilization_stats()` where the driver reports it |
//! | `processes[].cgroup` | optional: the process's `/proc/<pid>/cgroup`, so recorded processes are attributed as live ones are; without it `/proc` is read |
//!
//! `profiler/testdata/two-jobs.jsonl` is a commented example. Every field is checked: an
//! unknown or missing one is an error naming the line and the field.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{DeviceUtilization, GpuInfo, GpuSample, ProcessSample, SampleError, Snapshot, Source};

/// One line of a replay file: one GPU at one tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayLine {
    /// When, in milliseconds.
    pub t_ms: u64,
    /// The GPU.
    pub gpu: GpuInfo,
    /// Its device-wide utilization.
    pub device: DeviceUtilization,
    /// Its compute processes.
    #[serde(default)]
    pub processes: Vec<ProcessSample>,
}

/// Samples read from a replay file.
#[derive(Debug)]
pub struct ReplaySource {
    ticks: std::vec::IntoIter<Snapshot>,
}

impl ReplaySource {
    /// Reads and checks the whole file.
    pub fn open(path: &Path) -> Result<Self, SampleError> {
        let text = std::fs::read_to_string(path).map_err(|source| SampleError::ReplayRead {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses replay text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, SampleError> {
        let mut ticks: Vec<Snapshot> = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let line_no = number + 1;
            let mut json = serde_json::Deserializer::from_str(trimmed);
            let parsed: ReplayLine = serde_path_to_error::deserialize(&mut json).map_err(|e| {
                SampleError::ReplayLine {
                    path: PathBuf::from(path),
                    line: line_no,
                    field: e.path().to_string(),
                    source: e.into_inner(),
                }
            })?;
            let sample = GpuSample {
                gpu: parsed.gpu,
                device: parsed.device,
                processes: parsed.processes,
            };
            match ticks.last_mut() {
                Some(tick) if tick.t_ms == parsed.t_ms => tick.gpus.push(sample),
                Some(tick) if tick.t_ms > parsed.t_ms => {
                    return Err(SampleError::ReplayOrder {
                        path: PathBuf::from(path),
                        line: line_no,
                        t_ms: parsed.t_ms,
                        previous: tick.t_ms,
                    });
                }
                _ => ticks.push(Snapshot {
                    t_ms: parsed.t_ms,
                    gpus: vec![sample],
                }),
            }
        }
        Ok(Self {
            ticks: ticks.into_iter(),
        })
    }
}

impl Source for ReplaySource {
    fn sample(&mut self) -> Result<Option<Snapshot>, SampleError> {
        Ok(self.ticks.next())
    }

    fn is_live(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE_0: &str = r#"{"t_ms": 0, "gpu": {"index": 0, "model": "Tesla V100-SXM2-16GB", "memory_total_mib": 16384}, "device": {"sm_util": 40, "mem_util": 10}, "processes": [{"pid": 7, "used_memory_mib": 100}]}"#;

    #[test]
    fn lines_of_one_time_make_one_tick_and_comments_are_skipped() {
        let gpu1 = LINE_0.replace(r#""index": 0"#, r#""index": 1"#);
        let later = LINE_0.replace(r#""t_ms": 0"#, r#""t_ms": 1000"#);
        let text = format!("# a comment\n\n{LINE_0}\n{gpu1}\n{later}\n");
        let mut source = ReplaySource::parse(Path::new("r.jsonl"), &text).unwrap();
        let first = source.sample().unwrap().unwrap();
        assert_eq!(first.t_ms, 0);
        assert_eq!(first.gpus.len(), 2);
        assert_eq!(first.gpus[0].processes[0].sm_util, None);
        assert_eq!(source.sample().unwrap().unwrap().t_ms, 1000);
        assert_eq!(source.sample().unwrap(), None);
        assert!(!source.is_live());
    }

    #[test]
    fn errors_name_the_line_and_the_field() {
        let bad = LINE_0.replace(r#""used_memory_mib": 100"#, r#""used_memory_mib": "lots""#);
        let error = ReplaySource::parse(Path::new("r.jsonl"), &format!("# c\n{bad}\n"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "r.jsonl:2: not a replay sample at `processes[0].used_memory_mib`"
        );
        let extra = LINE_0.replace(r#""pid": 7"#, r#""pid": 7, "comm": "python""#);
        let error = ReplaySource::parse(Path::new("r.jsonl"), &extra).unwrap_err();
        assert!(
            matches!(error, SampleError::ReplayLine { line: 1, .. }),
            "{error}"
        );
        let earlier = LINE_0.replace(r#""t_ms": 0"#, r#""t_ms": 5"#);
        let error = ReplaySource::parse(Path::new("r.jsonl"), &format!("{earlier}\n{LINE_0}"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("r.jsonl:2: t_ms 0 is earlier"), "{error}");
    }
}
