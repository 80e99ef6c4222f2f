//! The queue file: the GPUs of a cluster, a policy, and the jobs to place.
//!
//! ```json
//! {"gpus": [{"id": "node-a/0", "node": "node-a", "model": "V100", "memory_mib": 16384, "residents": []}],
//!  "policy": {"objective": "balanced", "max_jobs_per_gpu": 2},
//!  "jobs": [{"id": "job-1", "profile": {"gpu_util_pct": 64.7, "mem_access_pct": 29.4,
//!            "mem_used_mib": 5106, "gpu_model": "V100"}}]}
//! ```
//! `residents` are ids of jobs already running on a GPU; their profiles may be given in `jobs`
//! with `"running_on": "<gpu id>"`. Every other job is queued. The field names are a contract
//! for scripts: later versions only add fields.
//!
//! Heterogeneity (all optional): a GPU may give its characteristics (`cuda_cores`,
//! `tensor_cores`, `sm_count`, `mem_bandwidth_gbps`, `mem_clock_mhz`; well-known models need
//! none) and its `price_per_hour` and `power_watts`. A job may declare its model, as a summary
//! (`"declared": {"params_mib": …, "activations_mib": …, "input_mib": …, "batch_size": …, …}`)
//! or as an ONNX file (`"onnx": {"file": "model.onnx", "batch_size": 32}`, relative to the
//! queue file); give its `priority` (`latency`, `cost` or `energy`), its `work` left and its
//! measured `speeds` (work per second alone, per GPU model: `{"V100": 10.5}`). The policy may
//! cap jobs per GPU for particular GPU models, overriding `max_jobs_per_gpu` there:
//! `"model_caps": [{"gpu_model": "K80", "max_jobs": 1}]`.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tandem_api::{Gpu, GpuSpec, Job, ModelSummary, Policy, Priority, Profile};

/// A problem with the user's input, naming the file and the field (or line) at fault.
#[derive(Debug, thiserror::Error)]
pub struct InputError {
    /// The file, if the problem is in one.
    pub file: Option<PathBuf>,
    /// The field path (`jobs[2].profile.mem_used_mib`), if known.
    pub field: Option<String>,
    /// What is wrong.
    pub problem: String,
}

impl InputError {
    /// A problem with the command line itself.
    pub fn usage(problem: impl Into<String>) -> Self {
        Self {
            file: None,
            field: None,
            problem: problem.into(),
        }
    }

    pub(crate) fn in_file(
        file: &Path,
        field: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        let field = field.into();
        Self {
            file: Some(file.to_owned()),
            field: (!field.is_empty() && field != ".").then_some(field),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.problem)
    }
}

/// One GPU of the queue file.
///
/// A mirror of [`tandem_api::Gpu`] with its [`GpuSpec`] flattened, kept because the file format
/// is flat (`{"id", "node", "model", "memory_mib", …}`) while the contract nests the model's
/// characteristics in `spec`; `serde(flatten)` cannot be combined with `deny_unknown_fields`,
/// which is what makes a misspelt field an error naming it rather than a silently ignored key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuEntry {
    /// Unique id, conventionally `<node>/<index>`.
    pub id: String,
    /// Node the GPU belongs to.
    pub node: String,
    /// GPU model (for example `V100`).
    pub model: String,
    /// Device memory in MiB.
    pub memory_mib: u32,
    /// Ids of jobs already running on it.
    #[serde(default)]
    pub residents: Vec<String>,
    /// Streaming multiprocessors, if known.
    #[serde(default)]
    pub sm_count: Option<u32>,
    /// CUDA cores, if known.
    #[serde(default)]
    pub cuda_cores: Option<u32>,
    /// Tensor cores, if known.
    #[serde(default)]
    pub tensor_cores: Option<u32>,
    /// Memory bandwidth in GB/s, if known.
    #[serde(default)]
    pub mem_bandwidth_gbps: Option<f32>,
    /// Memory clock in MHz, if known.
    #[serde(default)]
    pub mem_clock_mhz: Option<u32>,
    /// Price of one GPU-hour, for the `cost` priority.
    #[serde(default)]
    pub price_per_hour: Option<f32>,
    /// Board power in watts, for the `energy` priority.
    #[serde(default)]
    pub power_watts: Option<f32>,
}

impl GpuEntry {
    fn spec(&self) -> GpuSpec {
        GpuSpec {
            sm_count: self.sm_count,
            cuda_cores: self.cuda_cores,
            tensor_cores: self.tensor_cores,
            mem_bandwidth_gbps: self.mem_bandwidth_gbps,
            mem_clock_mhz: self.mem_clock_mhz,
            price_per_hour: self.price_per_hour,
            power_watts: self.power_watts,
            ..GpuSpec::new(self.model.clone(), self.memory_mib)
        }
    }
}

/// A model declared as an ONNX file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnnxEntry {
    /// The file, relative to the queue file.
    pub file: PathBuf,
    /// Training batch size (required when the model's batch dimension is symbolic).
    #[serde(default)]
    pub batch_size: Option<u32>,
}

/// One job of the queue file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobEntry {
    /// Unique id.
    pub id: String,
    /// Telemetry from its profiling window, if profiled.
    #[serde(default)]
    pub profile: Option<Profile>,
    /// The GPU it already runs on, if it is a resident rather than queued.
    #[serde(default)]
    pub running_on: Option<String>,
    /// Submission time in seconds; orders first-come-first-served placement.
    #[serde(default)]
    pub submitted_at_s: Option<f64>,
    /// The job's model, declared as a summary.
    #[serde(default)]
    pub declared: Option<ModelSummary>,
    /// The job's model, declared as an ONNX file (read into `declared`).
    #[serde(default)]
    pub onnx: Option<OnnxEntry>,
    /// What its user cares about most.
    #[serde(default)]
    pub priority: Option<Priority>,
    /// Work left, in the unit of `speeds`.
    #[serde(default)]
    pub work: Option<f64>,
    /// Measured work per second alone, per GPU model.
    #[serde(default)]
    pub speeds: std::collections::BTreeMap<String, f64>,
}

/// A parsed and checked queue file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueFile {
    /// The GPUs jobs may go to.
    pub gpus: Vec<GpuEntry>,
    /// How to place them.
    #[serde(default)]
    pub policy: Policy,
    /// Queued and running jobs.
    pub jobs: Vec<JobEntry>,
}

/// What the engine is asked: the policy, the queued jobs and the GPUs with their residents.
#[derive(Debug, Clone)]
pub struct Request {
    /// The policy to create the recommender with.
    pub policy: Policy,
    /// Jobs to place.
    pub queue: Vec<Job>,
    /// GPUs with their residents.
    pub gpus: Vec<Gpu>,
}

impl QueueFile {
    /// Reads and checks a queue file; every error names the file and the field at fault.
    pub fn read(path: &Path) -> Result<Self, InputError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| InputError::in_file(path, "", format!("cannot read the file: {e}")))?;
        Self::parse(path, &text)
    }

    /// Parses and checks queue-file text, then reads the ONNX files its jobs name (relative to
    /// `path`'s directory); `path` is otherwise only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Self, InputError> {
        let mut queue = Self::parse_unread(path, text)?;
        queue.read_onnx(path)?;
        Ok(queue)
    }

    /// Parses and checks queue-file text without reading any file: a job that names an ONNX
    /// file keeps it in `onnx`, unread. `path` is only used in messages.
    pub fn parse_unread(path: &Path, text: &str) -> Result<Self, InputError> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let queue: Self = serde_path_to_error::deserialize(&mut deserializer)
            .map_err(|e| InputError::in_file(path, e.path().to_string(), e.inner().to_string()))?;
        queue
            .check()
            .map_err(|(field, problem)| InputError::in_file(path, field, problem))?;
        Ok(queue)
    }

    /// Reads every job's ONNX file (relative to the queue file) into its declared summary.
    fn read_onnx(&mut self, path: &Path) -> Result<(), InputError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        for (j, job) in self.jobs.iter_mut().enumerate() {
            let Some(onnx) = job.onnx.take() else {
                continue;
            };
            let file = dir.join(&onnx.file);
            let field = format!("jobs[{j}].onnx.file");
            let bytes = std::fs::read(&file).map_err(|e| {
                InputError::in_file(path, &field, format!("cannot read {}: {e}", file.display()))
            })?;
            let summary = tandem_declare::summarize(&bytes, onnx.batch_size).map_err(|e| {
                InputError::in_file(path, &field, format!("{}: {e}", file.display()))
            })?;
            job.declared = Some(summary);
        }
        Ok(())
    }

    /// Measured speeds of every job: `(job id, GPU model, work per second)`.
    pub fn speeds(&self) -> Vec<(String, String, f64)> {
        self.jobs
            .iter()
            .flat_map(|job| {
                job.speeds
                    .iter()
                    .map(|(model, &speed)| (job.id.clone(), model.clone(), speed))
            })
            .collect()
    }

    /// The rules JSON types cannot express: ranges, unique ids, references between entries.
    fn check(&self) -> Result<(), (String, String)> {
        let policy = &self.policy;
        if policy.max_jobs_per_gpu == 0 {
            return Err((
                "policy.max_jobs_per_gpu".into(),
                "must be at least 1".into(),
            ));
        }
        if !(0.0..=1.0).contains(&policy.exploration) {
            return Err((
                "policy.exploration".into(),
                format!("must be within 0..=1, got {}", policy.exploration),
            ));
        }
        for (i, cap) in policy.model_caps.iter().enumerate() {
            let field = format!("policy.model_caps[{i}]");
            if cap.max_jobs == 0 {
                return Err((format!("{field}.max_jobs"), "must be at least 1".into()));
            }
            if policy.model_caps[..i]
                .iter()
                .any(|c| c.gpu_model == cap.gpu_model)
            {
                return Err((
                    format!("{field}.gpu_model"),
                    format!("a second cap for {}", cap.gpu_model),
                ));
            }
        }

        let mut gpu_index = HashMap::new();
        for (g, gpu) in self.gpus.iter().enumerate() {
            for (field, value) in [("id", &gpu.id), ("node", &gpu.node), ("model", &gpu.model)] {
                if value.is_empty() {
                    return Err((format!("gpus[{g}].{field}"), "must not be empty".into()));
                }
            }
            if gpu.memory_mib == 0 {
                return Err((format!("gpus[{g}].memory_mib"), "must be positive".into()));
            }
            if let Some(first) = gpu_index.insert(gpu.id.as_str(), g) {
                return Err((
                    format!("gpus[{g}].id"),
                    format!("duplicate GPU id `{}` (first at gpus[{first}])", gpu.id),
                ));
            }
        }

        let mut job_index = HashMap::new();
        for (j, job) in self.jobs.iter().enumerate() {
            if job.id.is_empty() {
                return Err((format!("jobs[{j}].id"), "must not be empty".into()));
            }
            if let Some(first) = job_index.insert(job.id.as_str(), j) {
                return Err((
                    format!("jobs[{j}].id"),
                    format!("duplicate job id `{}` (first at jobs[{first}])", job.id),
                ));
            }
            if let Some(profile) = &job.profile {
                check_profile(profile)
                    .map_err(|(field, problem)| (format!("jobs[{j}].profile.{field}"), problem))?;
            }
            if job.declared.is_some() && job.onnx.is_some() {
                return Err((
                    format!("jobs[{j}].onnx"),
                    "give `declared` or `onnx`, not both".into(),
                ));
            }
            if let Some(summary) = &job.declared {
                tandem_declare::check_summary(summary)
                    .map_err(|e| (format!("jobs[{j}].declared"), e.to_string()))?;
            }
            if let Some(work) = job.work
                && (!work.is_finite() || work < 0.0)
            {
                return Err((
                    format!("jobs[{j}].work"),
                    format!("must be a non-negative number, got {work}"),
                ));
            }
            for (model, &speed) in &job.speeds {
                if !(speed.is_finite() && speed > 0.0) {
                    return Err((
                        format!("jobs[{j}].speeds.{model}"),
                        format!("must be a positive number of work units per second, got {speed}"),
                    ));
                }
            }
            if let Some(t) = job.submitted_at_s
                && (!t.is_finite() || t < 0.0)
            {
                return Err((
                    format!("jobs[{j}].submitted_at_s"),
                    format!("must be a non-negative number of seconds, got {t}"),
                ));
            }
            if let Some(gpu) = &job.running_on
                && !gpu_index.contains_key(gpu.as_str())
            {
                return Err((
                    format!("jobs[{j}].running_on"),
                    format!("unknown GPU `{gpu}` (not in `gpus`)"),
                ));
            }
        }

        let mut resident_on: HashMap<&str, &str> = HashMap::new();
        for (g, gpu) in self.gpus.iter().enumerate() {
            for (r, resident) in gpu.residents.iter().enumerate() {
                let field = format!("gpus[{g}].residents[{r}]");
                if let Some(other) = resident_on.insert(resident, &gpu.id) {
                    return Err((
                        field,
                        format!("job `{resident}` is already a resident of GPU `{other}`"),
                    ));
                }
                let running_on = job_index
                    .get(resident.as_str())
                    .and_then(|&j| self.jobs[j].running_on.as_deref());
                if let Some(elsewhere) = running_on.filter(|on| *on != gpu.id) {
                    return Err((
                        field,
                        format!(
                            "job `{resident}` is listed here but its `running_on` says `{elsewhere}`"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Splits jobs into the queue and the GPUs' residents, in the engine's types.
    pub fn into_request(self) -> Request {
        let mut residents: HashMap<String, String> = HashMap::new();
        for gpu in &self.gpus {
            for id in &gpu.residents {
                residents.insert(id.clone(), gpu.id.clone());
            }
        }
        for job in &self.jobs {
            if let Some(gpu) = &job.running_on {
                residents.insert(job.id.clone(), gpu.clone());
            }
        }
        let mut jobs: HashMap<String, JobEntry> = HashMap::new();
        let mut queue = Vec::new();
        for entry in self.jobs {
            if residents.contains_key(&entry.id) {
                jobs.insert(entry.id.clone(), entry);
            } else {
                queue.push(to_job(entry));
            }
        }
        let gpus = self
            .gpus
            .into_iter()
            .map(|entry| {
                // Residents listed on the GPU first, in their order, then those that only
                // name the GPU through `running_on`, in file order.
                let mut ids = entry.residents.clone();
                let mut extra: Vec<&JobEntry> = jobs
                    .values()
                    .filter(|j| j.running_on.as_deref() == Some(entry.id.as_str()))
                    .filter(|j| !entry.residents.contains(&j.id))
                    .collect();
                extra.sort_by(|a, b| a.id.cmp(&b.id));
                ids.extend(extra.into_iter().map(|j| j.id.clone()));
                Gpu {
                    residents: ids
                        .into_iter()
                        .map(|id| match jobs.get(&id) {
                            Some(entry) => to_job(entry.clone()),
                            None => Job::new(id),
                        })
                        .collect(),
                    spec: entry.spec(),
                    id: entry.id,
                    node: entry.node,
                }
            })
            .collect();
        Request {
            policy: self.policy,
            queue,
            gpus,
        }
    }
}

pub(crate) fn check_profile(profile: &Profile) -> Result<(), (String, String)> {
    for (field, value) in [
        ("gpu_util_pct", profile.gpu_util_pct),
        ("mem_access_pct", profile.mem_access_pct),
    ] {
        if !(0.0..=100.0).contains(&value) {
            return Err((field.into(), format!("must be within 0..=100, got {value}")));
        }
    }
    if profile.gpu_model.is_empty() {
        return Err(("gpu_model".into(), "must not be empty".into()));
    }
    // No GPU of the model has more memory than this (512 GiB for a model Tandem does not know).
    let limit = tandem_api::bounds::largest_memory_of(&profile.gpu_model);
    tandem_api::bounds::memory(profile.mem_used_mib, limit, "")
        .map_err(|e| ("mem_used_mib".to_owned(), e.problem))?;
    Ok(())
}

fn to_job(entry: JobEntry) -> Job {
    Job {
        id: entry.id,
        profile: entry.profile,
        declared: entry.declared,
        priority: entry.priority,
        submitted_at_s: entry.submitted_at_s.unwrap_or(0.0),
        work: entry.work,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<QueueFile, InputError> {
        QueueFile::parse(Path::new("q.json"), text)
    }

    const GPU: &str =
        r#"{"id": "g0", "node": "n", "model": "V100", "memory_mib": 16384, "residents": []}"#;

    fn job(id: &str, mem: &str) -> String {
        format!(
            r#"{{"id": "{id}", "profile": {{"gpu_util_pct": 50, "mem_access_pct": 20, "mem_used_mib": {mem}, "gpu_model": "V100"}}}}"#
        )
    }

    #[test]
    fn a_valid_queue_parses_with_policy_defaults() {
        let q = parse(&format!(
            r#"{{"gpus": [{GPU}], "jobs": [{}]}}"#,
            job("a", "100")
        ))
        .unwrap();
        assert_eq!(q.policy, Policy::default());
        let request = q.into_request();
        assert_eq!(request.queue.len(), 1);
        assert!(request.gpus[0].residents.is_empty());
    }

    #[test]
    fn negative_memory_names_the_field() {
        let err = parse(&format!(
            r#"{{"gpus": [{GPU}], "jobs": [{}]}}"#,
            job("a", "-5")
        ))
        .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("jobs[0].profile.mem_used_mib"));
        assert!(
            err.to_string()
                .starts_with("q.json: jobs[0].profile.mem_used_mib: "),
            "{err}"
        );
    }

    /// The queue `cargo xtask fuzz` starts its `queue` target from passes the checks, and its
    /// ONNX file is left unread.
    #[test]
    fn the_queue_fuzz_seed_parses_unread() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/seeds/queue/residents-declared-onnx.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let queue = QueueFile::parse_unread(&path, &text).unwrap_or_else(|e| panic!("{e}"));
        assert!(queue.jobs.iter().any(|job| job.onnx.is_some()));
        let error = QueueFile::parse(&path, &text).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("jobs[3].onnx.file"));
    }

    #[test]
    fn residents_take_their_profiles_from_running_jobs() {
        let text = format!(
            r#"{{"gpus": [{{"id": "g0", "node": "n", "model": "V100", "memory_mib": 16384, "residents": ["r"]}}],
                "jobs": [{}, {}]}}"#,
            job("a", "100"),
            job("r", "9000").replacen('{', r#"{"running_on": "g0", "#, 1)
        );
        let request = parse(&text).unwrap().into_request();
        assert_eq!(request.queue.len(), 1);
        let resident = &request.gpus[0].residents[0];
        assert_eq!(resident.id, "r");
        assert_eq!(
            resident.profile.as_ref().map(|p| p.mem_used_mib),
            Some(9000)
        );
    }
}
