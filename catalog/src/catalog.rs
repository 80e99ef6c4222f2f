//! The catalog format: types, reading, checks, lookups and atomic writing.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tandem_api::{ModelSummary, Profile};

use crate::error::{Error, Result};

/// A GPU model the catalog's measurements were taken on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuModel {
    /// Model name, such as `V100`; job types and pairs refer to it.
    pub model: String,
    /// Device memory, in MiB (positive).
    pub memory_mib: u32,
}

/// One kind of job whose solo and co-located behaviour the source measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobType {
    /// Unique name within the catalog (a public benchmark name, never user data).
    pub name: String,
    /// Black-box telemetry as the engine would see it, where the source measured all of it;
    /// `null` otherwise (nothing is ever estimated to fill it).
    pub profile: Option<Profile>,
    /// The opt-in model description, where the source gives one.
    pub declared: Option<ModelSummary>,
    /// Solo throughput per GPU model (any unit, consistent within the job type). Empty where
    /// the source gives completion times instead (see `solo_time_s`).
    #[serde(default)]
    pub solo_throughput: BTreeMap<String, f64>,
    /// Solo completion time per GPU model, in seconds, for sources that measured whole runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub solo_time_s: BTreeMap<String, f64>,
    /// Approximate peak GPU utilization, 0..=100, for sources that measured nothing else of the
    /// profile (so `profile` stays `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_util_pct_approx: Option<f32>,
    /// Peak device memory alone per GPU model, in MiB, for sources that measured it. A peak
    /// above the model's memory means the job cannot run there: it runs out of memory.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub peak_mem_mib: BTreeMap<String, u32>,
}

/// Two job types measured sharing one GPU. A pair absent from a catalog was not measured; the
/// catalog's [`UnmeasuredPairs`] says what its users take such a pair to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pair {
    /// GPU model the pair was measured on.
    pub gpu_model: String,
    /// First job type.
    pub a: String,
    /// Second job type (may equal `a`: two instances of one job type).
    pub b: String,
    /// Co-located throughput of `a` / its solo throughput (finite, positive; about 0..1.x).
    pub speed_a: f64,
    /// Co-located throughput of `b` / its solo throughput.
    pub speed_b: f64,
    /// Measured completion times of `a` and `b` when they were started together, in seconds,
    /// for sources that measured whole runs (the speeds are derived from them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colocated_time_s: Option<[f64; 2]>,
}

/// What a pair the catalog does not list does on a GPU, for the catalog's users.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnmeasuredPairs {
    /// It cannot be co-located. For sources that measured pairs and left out those that could
    /// not share a GPU (Gavel's zero-throughput pairs), an absent pair is a failure.
    #[default]
    CannotShare,
    /// It shares the GPU by time-slicing: each job runs at half its solo speed (no saving, no
    /// loss). For sources that measured no pair speed at all (memory only), so that what keeps
    /// two jobs apart is memory alone.
    TimeSliced,
}

impl UnmeasuredPairs {
    /// The speed of each job of an unmeasured pair, if it can share at all.
    pub fn speed(self) -> Option<f64> {
        match self {
            Self::CannotShare => None,
            Self::TimeSliced => Some(0.5),
        }
    }

    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// A checked catalog of measured co-location outcomes (see the crate documentation).
///
/// Every `Catalog` value has passed the format's checks: unique names, references to known job
/// types and GPU models, finite positive speeds and throughputs, each pair at most once per GPU
/// model in either orientation.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    file: CatalogFile,
    gpu_index: HashMap<String, usize>,
    job_index: HashMap<String, usize>,
    /// (GPU model, lower job index, higher job index) -> index in `pairs`.
    pair_index: HashMap<(usize, usize, usize), usize>,
}

/// The JSON document, field for field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    name: String,
    source: String,
    gpu_models: Vec<GpuModel>,
    job_types: Vec<JobType>,
    pairs: Vec<Pair>,
    /// Absent (the default, [`UnmeasuredPairs::CannotShare`]) in most catalogs.
    #[serde(default, skip_serializing_if = "UnmeasuredPairs::is_default")]
    unmeasured_pairs: UnmeasuredPairs,
}

impl Catalog {
    /// Builds and checks a catalog. Errors name the catalog (`catalog <name>`) and the field.
    pub fn new(
        name: impl Into<String>,
        source: impl Into<String>,
        gpu_models: Vec<GpuModel>,
        job_types: Vec<JobType>,
        pairs: Vec<Pair>,
    ) -> Result<Self> {
        let file = CatalogFile {
            name: name.into(),
            source: source.into(),
            gpu_models,
            job_types,
            pairs,
            unmeasured_pairs: UnmeasuredPairs::default(),
        };
        let origin = format!("catalog {}", file.name);
        Self::check(file, &origin)
    }

    /// Reads and checks a catalog file.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses and checks catalog JSON; `origin` (usually the file name) starts every error.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let file: CatalogFile =
            serde_path_to_error::deserialize(&mut deserializer).map_err(|e| Error::Json {
                origin: origin.to_owned(),
                field: e.path().to_string(),
                message: e.inner().to_string(),
            })?;
        deserializer.end().map_err(|e| Error::Json {
            origin: origin.to_owned(),
            field: ".".to_owned(),
            message: e.to_string(),
        })?;
        Self::check(file, origin)
    }

    /// The catalog as pretty-printed JSON, ending with a newline: exactly what
    /// [`write`](Self::write) puts in the file.
    pub fn to_json_pretty(&self) -> Result<String> {
        let mut text = serde_json::to_string_pretty(&self.file).map_err(|e| Error::Invalid {
            origin: format!("catalog {}", self.file.name),
            field: ".".to_owned(),
            problem: format!("cannot serialize: {e}"),
        })?;
        text.push('\n');
        Ok(text)
    }

    /// Writes the catalog as pretty JSON, atomically: into a temporary file in the same folder,
    /// synced, then renamed over `path`. Readers see the old file or the new one, never a part.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let text = self.to_json_pretty()?;
        let fail = |source| Error::Write {
            path: path.to_path_buf(),
            source,
        };
        let file_name = path.file_name().ok_or_else(|| {
            fail(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the path names no file",
            ))
        })?;
        let temp = path.with_file_name(format!(
            ".{}.tmp-{}",
            file_name.to_string_lossy(),
            std::process::id()
        ));
        let written = (|| {
            let mut file = fs::File::create(&temp)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            fs::rename(&temp, path)?;
            // The rename is durable only once the directory entry is.
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            fs::File::open(dir)?.sync_all()
        })();
        if let Err(source) = written {
            // Best effort: the temporary file may not even exist.
            let _ = fs::remove_file(&temp);
            return Err(fail(source));
        }
        Ok(())
    }

    /// The catalog with `rule` for the pairs it does not list (by default they cannot share).
    #[must_use]
    pub fn with_unmeasured_pairs(mut self, rule: UnmeasuredPairs) -> Self {
        self.file.unmeasured_pairs = rule;
        self
    }

    /// What a pair the catalog does not list does on a GPU.
    pub fn unmeasured_pairs(&self) -> UnmeasuredPairs {
        self.file.unmeasured_pairs
    }

    /// The catalog's name, such as `gavel-v100`.
    pub fn name(&self) -> &str {
        &self.file.name
    }

    /// Free-text provenance: repository, path, licence, and every assumption of the conversion.
    pub fn source(&self) -> &str {
        &self.file.source
    }

    /// The GPU models, in file order.
    pub fn gpu_models(&self) -> &[GpuModel] {
        &self.file.gpu_models
    }

    /// The job types, in file order.
    pub fn job_types(&self) -> &[JobType] {
        &self.file.job_types
    }

    /// The measured pairs, in file order.
    pub fn pairs(&self) -> &[Pair] {
        &self.file.pairs
    }

    /// The GPU model of that name.
    pub fn gpu_model(&self, model: &str) -> Option<&GpuModel> {
        self.gpu_index.get(model).map(|&g| &self.file.gpu_models[g])
    }

    /// The job type of that name.
    pub fn job_type(&self, name: &str) -> Option<&JobType> {
        self.job_index.get(name).map(|&j| &self.file.job_types[j])
    }

    /// The speeds of job types `a` and `b` sharing a GPU of `gpu_model`, in the order asked
    /// (`(speed of a, speed of b)`) whichever orientation the catalog stores; `None` if the pair
    /// was not measured there (or a name is unknown).
    pub fn pair(&self, gpu_model: &str, a: &str, b: &str) -> Option<(f64, f64)> {
        let pair = self.find_pair(gpu_model, a, b)?;
        if pair.a == a {
            Some((pair.speed_a, pair.speed_b))
        } else {
            Some((pair.speed_b, pair.speed_a))
        }
    }

    /// The stored record of a measured pair, in whichever orientation the catalog keeps it.
    pub fn find_pair(&self, gpu_model: &str, a: &str, b: &str) -> Option<&Pair> {
        let g = *self.gpu_index.get(gpu_model)?;
        let ja = *self.job_index.get(a)?;
        let jb = *self.job_index.get(b)?;
        let p = *self.pair_index.get(&(g, ja.min(jb), ja.max(jb)))?;
        Some(&self.file.pairs[p])
    }

    /// Checks every rule and builds the lookup indexes.
    fn check(file: CatalogFile, origin: &str) -> Result<Self> {
        let invalid = |field: String, problem: String| Error::Invalid {
            origin: origin.to_owned(),
            field,
            problem,
        };
        if file.name.trim().is_empty() {
            return Err(invalid("name".into(), "must not be empty".into()));
        }

        let mut gpu_index = HashMap::new();
        for (g, gpu) in file.gpu_models.iter().enumerate() {
            if gpu.model.trim().is_empty() {
                return Err(invalid(
                    format!("gpu_models[{g}].model"),
                    "must not be empty".into(),
                ));
            }
            if gpu.memory_mib == 0 {
                return Err(invalid(
                    format!("gpu_models[{g}].memory_mib"),
                    "must be positive".into(),
                ));
            }
            if let Some(first) = gpu_index.insert(gpu.model.clone(), g) {
                return Err(invalid(
                    format!("gpu_models[{g}].model"),
                    format!(
                        "duplicate GPU model `{}` (first at gpu_models[{first}])",
                        gpu.model
                    ),
                ));
            }
        }
        let known_gpu = |field: String, model: &str| {
            if gpu_index.contains_key(model) {
                Ok(())
            } else {
                Err(invalid(
                    field,
                    format!("unknown GPU model `{model}` (not in gpu_models)"),
                ))
            }
        };

        let mut job_index = HashMap::new();
        for (j, job) in file.job_types.iter().enumerate() {
            let at = format!("job_types[{j}]");
            if job.name.trim().is_empty() {
                return Err(invalid(format!("{at}.name"), "must not be empty".into()));
            }
            if let Some(first) = job_index.insert(job.name.clone(), j) {
                return Err(invalid(
                    format!("{at}.name"),
                    format!(
                        "duplicate job type `{}` (first at job_types[{first}])",
                        job.name
                    ),
                ));
            }
            if let Some(profile) = &job.profile {
                let at = format!("{at}.profile");
                known_gpu(format!("{at}.gpu_model"), &profile.gpu_model)?;
                for (field, value) in [
                    ("gpu_util_pct", profile.gpu_util_pct),
                    ("mem_access_pct", profile.mem_access_pct),
                ] {
                    if !(0.0..=100.0).contains(&value) {
                        return Err(invalid(
                            format!("{at}.{field}"),
                            format!("must be within 0..=100, got {value}"),
                        ));
                    }
                }
                let memory = file.gpu_models[gpu_index[&profile.gpu_model]].memory_mib;
                if profile.mem_used_mib > memory {
                    return Err(invalid(
                        format!("{at}.mem_used_mib"),
                        format!(
                            "{} MiB exceeds the {memory} MiB of a {}",
                            profile.mem_used_mib, profile.gpu_model
                        ),
                    ));
                }
            }
            for (field, values) in [
                ("solo_throughput", &job.solo_throughput),
                ("solo_time_s", &job.solo_time_s),
            ] {
                for (model, &value) in values {
                    let field = format!("{at}.{field}.{model}");
                    known_gpu(field.clone(), model)?;
                    positive(value).map_err(|problem| invalid(field, problem))?;
                }
            }
            for (model, &value) in &job.peak_mem_mib {
                let field = format!("{at}.peak_mem_mib.{model}");
                known_gpu(field.clone(), model)?;
                if value == 0 {
                    return Err(invalid(field, "must be positive".into()));
                }
            }
            if let Some(value) = job.gpu_util_pct_approx
                && !(0.0..=100.0).contains(&value)
            {
                return Err(invalid(
                    format!("{at}.gpu_util_pct_approx"),
                    format!("must be within 0..=100, got {value}"),
                ));
            }
        }

        let mut pair_index = HashMap::new();
        for (p, pair) in file.pairs.iter().enumerate() {
            let at = format!("pairs[{p}]");
            known_gpu(format!("{at}.gpu_model"), &pair.gpu_model)?;
            let g = gpu_index[&pair.gpu_model];
            let mut jobs = [0; 2];
            for (slot, (field, name)) in [("a", &pair.a), ("b", &pair.b)].into_iter().enumerate() {
                jobs[slot] = *job_index.get(name).ok_or_else(|| {
                    invalid(
                        format!("{at}.{field}"),
                        format!("unknown job type `{name}` (not in job_types)"),
                    )
                })?;
            }
            for (field, value) in [("speed_a", pair.speed_a), ("speed_b", pair.speed_b)] {
                positive(value).map_err(|problem| invalid(format!("{at}.{field}"), problem))?;
            }
            if let Some(times) = pair.colocated_time_s {
                for (i, value) in times.into_iter().enumerate() {
                    positive(value).map_err(|problem| {
                        invalid(format!("{at}.colocated_time_s[{i}]"), problem)
                    })?;
                }
            }
            let key = (g, jobs[0].min(jobs[1]), jobs[0].max(jobs[1]));
            if let Some(first) = pair_index.insert(key, p) {
                return Err(invalid(
                    at,
                    format!(
                        "`{}` with `{}` on {} is listed twice (first at pairs[{first}])",
                        pair.a, pair.b, pair.gpu_model
                    ),
                ));
            }
        }

        Ok(Self {
            file,
            gpu_index,
            job_index,
            pair_index,
        })
    }
}

impl Serialize for Catalog {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.file.serialize(serializer)
    }
}

/// `Ok` for a finite, positive number; otherwise what is wrong with it.
fn positive(value: f64) -> Result<(), String> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(format!("must be finite and positive, got {value}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"{
      "name": "tiny",
      "source": "made up for tests",
      "gpu_models": [{"model": "V100", "memory_mib": 16384}, {"model": "K80", "memory_mib": 12288}],
      "job_types": [
        {"name": "resnet18-bs16",
         "profile": {"gpu_util_pct": 71.0, "mem_access_pct": 33.0, "mem_used_mib": 2900, "gpu_model": "V100"},
         "declared": null,
         "solo_throughput": {"V100": 12.3, "K80": 4.5}},
        {"name": "lm-bs20", "profile": null, "declared": null, "solo_throughput": {}},
        {"name": "a3c", "profile": null, "declared": null, "solo_time_s": {"K80": 100.0},
         "gpu_util_pct_approx": 40}
      ],
      "pairs": [
        {"gpu_model": "V100", "a": "resnet18-bs16", "b": "lm-bs20", "speed_a": 0.81, "speed_b": 0.74},
        {"gpu_model": "K80", "a": "lm-bs20", "b": "resnet18-bs16", "speed_a": 0.5, "speed_b": 0.6,
         "colocated_time_s": [10.0, 20.0]},
        {"gpu_model": "K80", "a": "a3c", "b": "a3c", "speed_a": 0.9, "speed_b": 0.9}
      ]
    }"#;

    fn small() -> Catalog {
        Catalog::parse(SMALL, "tiny.json").expect("the test catalog is valid")
    }

    /// Parses `SMALL` after `edit`, expecting an error; returns its message.
    fn error_after(edit: impl FnOnce(&mut serde_json::Value)) -> String {
        let mut value: serde_json::Value = serde_json::from_str(SMALL).expect("valid JSON");
        edit(&mut value);
        match Catalog::parse(&value.to_string(), "tiny.json") {
            Ok(_) => panic!("the edited catalog was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn pairs_answer_in_either_orientation() {
        let catalog = small();
        assert_eq!(
            catalog.pair("V100", "resnet18-bs16", "lm-bs20"),
            Some((0.81, 0.74))
        );
        assert_eq!(
            catalog.pair("V100", "lm-bs20", "resnet18-bs16"),
            Some((0.74, 0.81))
        );
        assert_eq!(
            catalog.pair("K80", "resnet18-bs16", "lm-bs20"),
            Some((0.6, 0.5))
        );
        assert_eq!(catalog.pair("K80", "a3c", "a3c"), Some((0.9, 0.9)));
        // Not measured, unknown GPU, unknown job.
        assert_eq!(catalog.pair("V100", "a3c", "lm-bs20"), None);
        assert_eq!(catalog.pair("A100", "resnet18-bs16", "lm-bs20"), None);
        assert_eq!(catalog.pair("V100", "resnet18-bs16", "bert"), None);
        let found = catalog.find_pair("K80", "resnet18-bs16", "lm-bs20");
        assert_eq!(found.and_then(|p| p.colocated_time_s), Some([10.0, 20.0]));
    }

    #[test]
    fn lookups_and_optional_fields() {
        let catalog = small();
        assert_eq!(catalog.name(), "tiny");
        assert_eq!(catalog.gpu_model("K80").map(|g| g.memory_mib), Some(12288));
        let a3c = catalog.job_type("a3c").expect("a3c is listed");
        assert!(a3c.solo_throughput.is_empty());
        assert_eq!(a3c.solo_time_s.get("K80"), Some(&100.0));
        assert_eq!(a3c.gpu_util_pct_approx, Some(40.0));
        let resnet = catalog.job_type("resnet18-bs16").expect("listed");
        assert_eq!(resnet.profile.as_ref().map(|p| p.mem_used_mib), Some(2900));
        assert_eq!(catalog.job_types().len(), 3);
        assert_eq!(catalog.pairs().len(), 3);
    }

    #[test]
    fn round_trips_through_json_and_omits_empty_extensions() {
        let catalog = small();
        let text = catalog.to_json_pretty().expect("serializes");
        assert!(text.ends_with("}\n"));
        let again = Catalog::parse(&text, "again.json").expect("its own output parses");
        assert_eq!(again, catalog);
        let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let lm = &value["job_types"][1];
        assert_eq!(lm["solo_throughput"], serde_json::json!({}));
        assert!(lm.get("solo_time_s").is_none());
        assert!(lm.get("gpu_util_pct_approx").is_none());
        assert!(lm["profile"].is_null() && lm["declared"].is_null());
        assert!(value["pairs"][0].get("colocated_time_s").is_none());
        assert!(value.get("unmeasured_pairs").is_none());
    }

    #[test]
    fn unmeasured_pairs_cannot_share_unless_the_catalog_says_they_time_slice() {
        assert_eq!(small().unmeasured_pairs(), UnmeasuredPairs::CannotShare);
        assert_eq!(UnmeasuredPairs::CannotShare.speed(), None);
        let sliced = small().with_unmeasured_pairs(UnmeasuredPairs::TimeSliced);
        assert_eq!(UnmeasuredPairs::TimeSliced.speed(), Some(0.5));
        let text = sliced.to_json_pretty().expect("serializes");
        assert!(
            text.contains(r#""unmeasured_pairs": "time-sliced""#),
            "{text}"
        );
        assert_eq!(
            Catalog::parse(&text, "sliced.json").expect("parses"),
            sliced
        );
        // The rule changes what users assume, not what was measured.
        assert_eq!(sliced.pair("V100", "a3c", "lm-bs20"), None);
        let error = error_after(|v| v["unmeasured_pairs"] = "sometimes".into());
        assert!(error.contains("unmeasured_pairs"), "{error}");
    }

    #[test]
    fn new_checks_like_parse() {
        let catalog = small();
        let rebuilt = Catalog::new(
            catalog.name(),
            catalog.source(),
            catalog.gpu_models().to_vec(),
            catalog.job_types().to_vec(),
            catalog.pairs().to_vec(),
        )
        .expect("valid");
        assert_eq!(rebuilt, catalog);
        let mut pairs = catalog.pairs().to_vec();
        pairs[0].speed_b = f64::NAN;
        let error = Catalog::new(
            "tiny",
            "",
            catalog.gpu_models().to_vec(),
            catalog.job_types().to_vec(),
            pairs,
        )
        .expect_err("NaN speed");
        assert_eq!(
            error.to_string(),
            "catalog tiny: pairs[0].speed_b: must be finite and positive, got NaN"
        );
    }

    #[test]
    fn shape_errors_name_the_file_and_field() {
        let message = error_after(|v| v["pairs"][1]["speed_a"] = "fast".into());
        assert!(
            message.starts_with("tiny.json: pairs[1].speed_a: invalid type: string \"fast\""),
            "{message}"
        );
        let message = error_after(|v| v["job_types"][0]["colour"] = "red".into());
        assert!(
            message.starts_with("tiny.json: job_types[0].colour: unknown field `colour`"),
            "{message}"
        );
        let message = error_after(|v| v["gpu_models"][0]["memory_mib"] = (-1).into());
        assert!(
            message.starts_with("tiny.json: gpu_models[0].memory_mib: invalid value"),
            "{message}"
        );
        let message = match Catalog::parse("{\"name\": ", "cut.json") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted truncated JSON"),
        };
        assert!(message.starts_with("cut.json: "), "{message}");
        assert!(message.contains("line 1"), "{message}");
        let message = match Catalog::parse(&format!("{SMALL} []"), "tail.json") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted trailing data"),
        };
        assert!(message.starts_with("tail.json: .: trailing"), "{message}");
    }

    #[test]
    fn rule_errors_name_the_file_and_field() {
        type Edit = Box<dyn FnOnce(&mut serde_json::Value)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|v| v["job_types"][1]["name"] = "resnet18-bs16".into()),
                "tiny.json: job_types[1].name: duplicate job type `resnet18-bs16` (first at job_types[0])",
            ),
            (
                Box::new(|v| v["gpu_models"][1]["model"] = "V100".into()),
                "tiny.json: gpu_models[1].model: duplicate GPU model `V100` (first at gpu_models[0])",
            ),
            (
                Box::new(|v| v["gpu_models"][1]["memory_mib"] = 0.into()),
                "tiny.json: gpu_models[1].memory_mib: must be positive",
            ),
            (
                Box::new(|v| v["pairs"][0]["b"] = "bert".into()),
                "tiny.json: pairs[0].b: unknown job type `bert` (not in job_types)",
            ),
            (
                Box::new(|v| v["pairs"][0]["gpu_model"] = "A100".into()),
                "tiny.json: pairs[0].gpu_model: unknown GPU model `A100` (not in gpu_models)",
            ),
            (
                Box::new(|v| v["pairs"][2]["speed_a"] = 0.0.into()),
                "tiny.json: pairs[2].speed_a: must be finite and positive, got 0",
            ),
            (
                Box::new(|v| v["pairs"][1]["colocated_time_s"][1] = (-3.0).into()),
                "tiny.json: pairs[1].colocated_time_s[1]: must be finite and positive, got -3",
            ),
            (
                // The K80 pair again, in the other orientation.
                Box::new(|v| {
                    let twin = serde_json::json!({"gpu_model": "K80", "a": "resnet18-bs16",
                        "b": "lm-bs20", "speed_a": 0.6, "speed_b": 0.5});
                    v["pairs"].as_array_mut().expect("array").push(twin);
                }),
                "tiny.json: pairs[3]: `resnet18-bs16` with `lm-bs20` on K80 is listed twice (first at pairs[1])",
            ),
            (
                Box::new(|v| v["job_types"][0]["solo_throughput"]["P100"] = 3.0.into()),
                "tiny.json: job_types[0].solo_throughput.P100: unknown GPU model `P100` (not in gpu_models)",
            ),
            (
                Box::new(|v| v["job_types"][2]["solo_time_s"]["K80"] = (-1.0).into()),
                "tiny.json: job_types[2].solo_time_s.K80: must be finite and positive, got -1",
            ),
            (
                Box::new(|v| v["job_types"][0]["profile"]["gpu_util_pct"] = 101.0.into()),
                "tiny.json: job_types[0].profile.gpu_util_pct: must be within 0..=100, got 101",
            ),
            (
                Box::new(|v| v["job_types"][0]["profile"]["mem_used_mib"] = 20000.into()),
                "tiny.json: job_types[0].profile.mem_used_mib: 20000 MiB exceeds the 16384 MiB of a V100",
            ),
            (
                Box::new(|v| v["job_types"][0]["profile"]["gpu_model"] = "T4".into()),
                "tiny.json: job_types[0].profile.gpu_model: unknown GPU model `T4` (not in gpu_models)",
            ),
            (
                Box::new(|v| v["job_types"][2]["gpu_util_pct_approx"] = (-5.0).into()),
                "tiny.json: job_types[2].gpu_util_pct_approx: must be within 0..=100, got -5",
            ),
            (
                Box::new(|v| v["name"] = " ".into()),
                "tiny.json: name: must not be empty",
            ),
        ];
        for (edit, expected) in cases {
            assert_eq!(error_after(edit), expected);
        }
    }

    #[test]
    fn writes_atomically_and_reads_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tiny.json");
        let catalog = small();
        catalog.write(&path).expect("writes");
        // Overwriting replaces the file whole and leaves no temporary file behind.
        catalog.write(&path).expect("overwrites");
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("lists")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("tiny.json")]);
        assert_eq!(Catalog::read(&path).expect("reads"), catalog);
        let text = fs::read_to_string(&path).expect("text");
        assert_eq!(text, catalog.to_json_pretty().expect("serializes"));
    }

    #[test]
    fn io_errors_name_the_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = dir.path().join("missing.json");
        let error = Catalog::read(&missing).expect_err("no such file");
        assert!(matches!(error, Error::Read { .. }));
        assert!(
            error
                .to_string()
                .ends_with("missing.json: cannot read the file")
        );
        let nowhere = dir.path().join("no-such-dir").join("out.json");
        let error = small().write(&nowhere).expect_err("no such folder");
        assert!(matches!(error, Error::Write { .. }));
        assert!(
            error
                .to_string()
                .contains("out.json: cannot write the catalog")
        );
    }
}
