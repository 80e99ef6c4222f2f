//! What a job may tell Tandem about itself in a live cluster: one vocabulary for every
//! scheduler, parsed and checked here.
//!
//! Kubernetes and Volcano pods carry it as annotations, Slurm jobs as options of the SPANK
//! plugin; the fields and their formats are the same (`docs/DECLARING.md`):
//!
//! | field | annotation | Slurm option | format |
//! |---|---|---|---|
//! | [`Field::Priority`] | `tandem.dev/priority` | `--tandem-priority` | `latency`, `cost` or `energy` |
//! | [`Field::Work`] | `tandem.dev/work` | `--tandem-work` | `90m on V100` (one run's time alone on a GPU model), or `50000 steps` with optional reference speeds: `50000 steps at 12.5/s on V100, 3/s on K80` |
//! | [`Field::Model`] | `tandem.dev/model` | `--tandem-model` | a model summary as JSON (what `tandem declare --format json` prints), or a reference: `configmap:NAME/KEY` (Kubernetes) or `file:PATH` (Slurm) to an ONNX file or a summary |
//! | [`Field::BatchSize`] | `tandem.dev/batch-size` | `--tandem-batch-size` | the training batch size of a referenced ONNX file |
//!
//! A field that is absent changes nothing. A value that does not parse is a [`Refusal`] naming
//! the field as the scheduler spells it and the value: the front-ends refuse the job at the
//! scheduler's first call with it (never a crash, never a silent default) and count it
//! (`tandem_declarations_refused_total{field}`).
//!
//! **Work and speed units.** The engine turns a job's `work` into run times with the speeds it
//! knows for the job (`observe-speed`), so both must be in one unit. A run declared as a
//! duration on a GPU model is one unit of work (one run), its reference speed `1 / seconds` on
//! that model; a run declared in steps (or any other unit) is that many units, with the
//! reference speeds given. Finished runs teach speeds in the same unit: the steps a run declared
//! over its run time, or `1 / run time` for a run that declared none or a duration
//! ([`Declaration::work_done`]). Declare a recurring job's work the same way on every run.

use std::sync::Arc;

use tandem_api::{Job, ModelSummary, Priority};

/// One field of the vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// What the job's user cares about most.
    Priority,
    /// The work of one run.
    Work,
    /// The job's model.
    Model,
    /// The batch size of a referenced ONNX model.
    BatchSize,
}

impl Field {
    /// Every field, in the order of the documentation.
    pub const ALL: [Field; 4] = [Field::Priority, Field::Work, Field::Model, Field::BatchSize];

    /// The field's name in metrics and in the Slurm service's request (`priority`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Field::Priority => "priority",
            Field::Work => "work",
            Field::Model => "model",
            Field::BatchSize => "batch-size",
        }
    }

    /// The pod (or PodGroup) annotation carrying it.
    pub fn annotation(self) -> &'static str {
        match self {
            Field::Priority => "tandem.dev/priority",
            Field::Work => "tandem.dev/work",
            Field::Model => "tandem.dev/model",
            Field::BatchSize => "tandem.dev/batch-size",
        }
    }

    /// The option of the Slurm SPANK plugin carrying it.
    pub fn option(self) -> &'static str {
        match self {
            Field::Priority => "--tandem-priority",
            Field::Work => "--tandem-work",
            Field::Model => "--tandem-model",
            Field::BatchSize => "--tandem-batch-size",
        }
    }
}

/// How a scheduler carries the fields, which decides how messages name them and which model
/// references it can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// Pod or PodGroup annotations (Kubernetes, Volcano): `configmap:` references.
    Annotations,
    /// Options of the SPANK plugin (Slurm): `file:` references.
    Options,
}

impl Carrier {
    /// The field as this carrier spells it, for messages: `annotation tandem.dev/work` or
    /// `option --tandem-work`.
    pub fn name(self, field: Field) -> String {
        match self {
            Carrier::Annotations => format!("annotation {}", field.annotation()),
            Carrier::Options => format!("option {}", field.option()),
        }
    }
}

/// A declaration Tandem refuses: which field, its value and what is wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{} = {value:?}: {problem}", carrier.name(*field))]
pub struct Refusal {
    /// The field.
    pub field: Field,
    /// How the scheduler carried it.
    pub carrier: Carrier,
    /// The value as given (cut to [`QUOTED_CHARS`] characters).
    pub value: String,
    /// What is wrong, for the job's user.
    pub problem: String,
}

/// Most characters of a refused value quoted back.
pub const QUOTED_CHARS: usize = 80;

impl Refusal {
    /// A refusal of `value` given for `field`.
    pub fn new(field: Field, carrier: Carrier, value: &str, problem: impl Into<String>) -> Self {
        let mut quoted: String = value.chars().take(QUOTED_CHARS).collect();
        if quoted.len() < value.len() {
            quoted.push('…');
        }
        Self {
            field,
            carrier,
            value: quoted,
            problem: problem.into(),
        }
    }
}

/// The text of each field, as the scheduler carried it (absent: not given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Raw {
    /// [`Field::Priority`].
    pub priority: Option<String>,
    /// [`Field::Work`].
    pub work: Option<String>,
    /// [`Field::Model`].
    pub model: Option<String>,
    /// [`Field::BatchSize`].
    pub batch_size: Option<String>,
}

impl Raw {
    /// The fields found by `lookup` (an annotation or option name to its value).
    pub fn from_lookup<'a>(carrier: Carrier, lookup: impl Fn(&str) -> Option<&'a str>) -> Self {
        let get = |field: Field| {
            let name = match carrier {
                Carrier::Annotations => field.annotation(),
                Carrier::Options => field.key(),
            };
            lookup(name).map(str::to_owned)
        };
        Self {
            priority: get(Field::Priority),
            work: get(Field::Work),
            model: get(Field::Model),
            batch_size: get(Field::BatchSize),
        }
    }

    /// Whether no field was given.
    pub fn is_empty(&self) -> bool {
        self.priority.is_none()
            && self.work.is_none()
            && self.model.is_none()
            && self.batch_size.is_none()
    }

    /// `self`, with the fields it lacks taken from `fallback` (a pod's own annotations over its
    /// PodGroup's).
    pub fn or(self, fallback: &Raw) -> Raw {
        Raw {
            priority: self.priority.or_else(|| fallback.priority.clone()),
            work: self.work.or_else(|| fallback.work.clone()),
            model: self.model.or_else(|| fallback.model.clone()),
            batch_size: self.batch_size.or_else(|| fallback.batch_size.clone()),
        }
    }
}

/// The work of one run of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct Work {
    /// Units of work (1 for a run declared as a duration).
    pub amount: f64,
    /// The unit (`run` for a duration; the word given otherwise, such as `steps`).
    pub unit: String,
    /// Reference speeds: GPU model and units of work per second alone on it.
    pub speeds: Vec<(String, f64)>,
    /// The field's text, for messages.
    pub text: String,
}

/// Where a referenced model is kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// A key of a ConfigMap in the pod's namespace (`configmap:NAME/KEY`).
    ConfigMap {
        /// The ConfigMap's name.
        name: String,
        /// The key under `data` (a summary) or `binaryData` (an ONNX file).
        key: String,
    },
    /// A file the Slurm service reads (`file:PATH`, relative to its `--model-dir`).
    File(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::ConfigMap { name, key } => write!(f, "configmap:{name}/{key}"),
            Source::File(path) => write!(f, "file:{path}"),
        }
    }
}

/// A model declared by reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// Where it is.
    pub source: Source,
    /// The batch size an ONNX file is summarized at ([`Field::BatchSize`]).
    pub batch_size: Option<u32>,
}

/// A declared model: its summary, or where to read it.
#[derive(Debug, Clone, PartialEq)]
pub enum Model {
    /// Given inline.
    Summary(ModelSummary),
    /// To be read from a ConfigMap or a file ([`Reference::summarize`]).
    Reference(Reference),
}

/// What a job declared, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declaration {
    /// Its priority.
    pub priority: Option<Priority>,
    /// The work of one run.
    pub work: Option<Work>,
    /// Its model.
    pub model: Option<Model>,
}

/// A declaration, or why it was refused: what a front-end holds for each job.
pub type Declared = Result<Arc<Declaration>, Arc<Refusal>>;

/// Largest amount of work, reference speed or run time accepted (anything larger is a typo).
const MAX_AMOUNT: f64 = 1e15;

/// Longest run a duration may declare: a year.
const MAX_SECONDS: f64 = 365.0 * 86_400.0;

impl Declaration {
    /// Parses and checks the fields of `raw` as `carrier` carries them.
    pub fn parse(raw: &Raw, carrier: Carrier) -> Result<Self, Refusal> {
        let priority = raw
            .priority
            .as_deref()
            .map(|text| parse_priority(text, carrier))
            .transpose()?;
        let work = raw
            .work
            .as_deref()
            .map(|text| parse_work(text, carrier))
            .transpose()?;
        let batch_size = raw
            .batch_size
            .as_deref()
            .map(|text| parse_batch_size(text, carrier))
            .transpose()?;
        let model = raw
            .model
            .as_deref()
            .map(|text| parse_model(text, carrier, batch_size))
            .transpose()?;
        if let (Some(_), None | Some(Model::Summary(_))) = (batch_size, &model) {
            return Err(Refusal::new(
                Field::BatchSize,
                carrier,
                raw.batch_size.as_deref().unwrap_or_default(),
                format!(
                    "a batch size goes with a model given by reference ({} = {}); an inline \
                     summary carries its own batch_size",
                    carrier.name(Field::Model),
                    match carrier {
                        Carrier::Annotations => "configmap:NAME/KEY",
                        Carrier::Options => "file:PATH",
                    }
                ),
            ));
        }
        Ok(Self {
            priority,
            work,
            model,
        })
    }

    /// [`Declaration::parse`] as a front-end keeps it: shared, and empty when nothing was
    /// declared.
    pub fn declared(raw: &Raw, carrier: Carrier) -> Declared {
        if raw.is_empty() {
            return Ok(empty());
        }
        Self::parse(raw, carrier).map(Arc::new).map_err(Arc::new)
    }

    /// Whether nothing was declared.
    pub fn is_empty(&self) -> bool {
        self.priority.is_none() && self.work.is_none() && self.model.is_none()
    }

    /// The model summary given inline, if any.
    pub fn inline_model(&self) -> Option<&ModelSummary> {
        match &self.model {
            Some(Model::Summary(summary)) => Some(summary),
            _ => None,
        }
    }

    /// The model reference, if the model was declared by one.
    pub fn reference(&self) -> Option<&Reference> {
        match &self.model {
            Some(Model::Reference(reference)) => Some(reference),
            _ => None,
        }
    }

    /// The engine's record of job `id` with what it declared: `model` is the summary of its
    /// model (the inline one, or the reference's once read).
    pub fn job(&self, id: &str, model: Option<&ModelSummary>) -> Job {
        Job {
            declared: model.cloned(),
            priority: self.priority,
            work: self.work.as_ref().map(|w| w.amount),
            ..Job::new(id)
        }
    }

    /// A refusal of a reference speed on a GPU model that `knows` does not know (neither one
    /// Tandem knows nor one of the cluster's: a typo, which would otherwise teach nothing).
    pub fn unknown_model(&self, carrier: Carrier, knows: impl Fn(&str) -> bool) -> Option<Refusal> {
        let work = self.work.as_ref()?;
        let (model, _) = work.speeds.iter().find(|(model, _)| !knows(model))?;
        Some(Refusal::new(
            Field::Work,
            carrier,
            &work.text,
            format!(
                "names GPU model `{model}`, which is neither one Tandem knows nor one of this cluster's"
            ),
        ))
    }

    /// The work one finished run did, in the unit its declaration uses: the
    /// units declared, else one run (see the module docs). Its speed is this over `seconds`.
    pub fn work_done(&self) -> f64 {
        match &self.work {
            Some(work) => work.amount,
            None => 1.0,
        }
    }
}

/// The declaration of a job that declared nothing.
pub fn empty() -> Arc<Declaration> {
    static EMPTY: std::sync::OnceLock<Arc<Declaration>> = std::sync::OnceLock::new();
    Arc::clone(EMPTY.get_or_init(|| Arc::new(Declaration::default())))
}

fn parse_priority(text: &str, carrier: Carrier) -> Result<Priority, Refusal> {
    match text.trim() {
        "latency" => Ok(Priority::Latency),
        "cost" => Ok(Priority::Cost),
        "energy" => Ok(Priority::Energy),
        _ => Err(Refusal::new(
            Field::Priority,
            carrier,
            text,
            "not a priority: expected latency, cost or energy",
        )),
    }
}

fn parse_batch_size(text: &str, carrier: Carrier) -> Result<u32, Refusal> {
    match text.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Refusal::new(
            Field::BatchSize,
            carrier,
            text,
            "not a batch size: expected a whole number of at least 1",
        )),
    }
}

/// A positive, finite number no larger than `max`.
fn positive(text: &str, max: f64) -> Option<f64> {
    let value: f64 = text.trim().parse().ok()?;
    (value.is_finite() && value > 0.0 && value <= max).then_some(value)
}

/// A duration such as `5400s`, `90m`, `90 min`, `1.5h`, in seconds.
fn duration_seconds(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
        _ => return None,
    };
    positive(number, MAX_SECONDS / scale).map(|n| n * scale)
}

/// A GPU model name as a declaration gives it: a short name such as `V100`, or a product
/// string the engine reads one from.
fn gpu_model_name(text: &str) -> Option<String> {
    let text = text.trim();
    let fine = !text.is_empty()
        && text.len() <= 64
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ' '));
    fine.then(|| crate::gpu_models::gpu_model(text).0)
}

const WORK_FORMS: &str = "expected a run's time alone on a GPU model (`90m on V100`, `5400s on \
                          A100`) or units of work with optional reference speeds (`50000 steps`, \
                          `50000 steps at 12.5/s on V100, 3/s on K80`)";

fn parse_work(text: &str, carrier: Carrier) -> Result<Work, Refusal> {
    let refuse = |problem: String| Refusal::new(Field::Work, carrier, text, problem);
    let trimmed = text.trim();
    // `<duration> on <model>`
    if let Some((time, model)) = trimmed.split_once(" on ")
        && !time.contains(" at ")
    {
        let seconds = duration_seconds(time).ok_or_else(|| {
            refuse(format!(
                "`{}` is not a duration (a positive number with s, m or h, at most a year); \
                 {WORK_FORMS}",
                time.trim()
            ))
        })?;
        let model = gpu_model_name(model)
            .ok_or_else(|| refuse(format!("`{}` is not a GPU model name", model.trim())))?;
        return Ok(Work {
            amount: 1.0,
            unit: "run".to_owned(),
            speeds: vec![(model, 1.0 / seconds)],
            text: text.to_owned(),
        });
    }
    // `<amount> <unit> [at <rate>/s on <model>, ...]`
    let (head, references) = match trimmed.split_once(" at ") {
        Some((head, references)) => (head, Some(references)),
        None => (trimmed, None),
    };
    let mut words = head.split_whitespace();
    let (Some(amount), Some(unit), None) = (words.next(), words.next(), words.next()) else {
        return Err(refuse(WORK_FORMS.to_owned()));
    };
    let amount = positive(amount, MAX_AMOUNT)
        .ok_or_else(|| refuse(format!("`{amount}` is not a positive amount; {WORK_FORMS}")))?;
    if !unit.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(refuse(format!(
            "`{unit}` is not a unit of work (a word such as steps); {WORK_FORMS}"
        )));
    }
    let mut speeds: Vec<(String, f64)> = Vec::new();
    for reference in references.into_iter().flat_map(|r| r.split(',')) {
        let parsed = reference
            .trim()
            .split_once(" on ")
            .and_then(|(rate, model)| {
                let rate = positive(rate.trim().strip_suffix("/s")?, MAX_AMOUNT)?;
                Some((gpu_model_name(model)?, rate))
            });
        let Some((model, rate)) = parsed else {
            return Err(refuse(format!(
                "`{}` is not a reference speed such as `12.5/s on V100`",
                reference.trim()
            )));
        };
        if speeds.iter().any(|(m, _)| *m == model) {
            return Err(refuse(format!("two reference speeds on {model}")));
        }
        speeds.push((model, rate));
    }
    Ok(Work {
        amount,
        unit: unit.to_owned(),
        speeds,
        text: text.to_owned(),
    })
}

fn parse_model(text: &str, carrier: Carrier, batch_size: Option<u32>) -> Result<Model, Refusal> {
    let trimmed = text.trim();
    let refuse = |problem: String| Refusal::new(Field::Model, carrier, text, problem);
    if trimmed.starts_with('{') {
        return tandem_declare::read_summary_json(trimmed)
            .map(Model::Summary)
            .map_err(|e| refuse(format!("not a model summary: {e}")));
    }
    let source = match (carrier, trimmed.split_once(':')) {
        (Carrier::Annotations, Some(("configmap", rest))) => {
            let (name, key) = rest.split_once('/').unwrap_or((rest, ""));
            if !is_dns_label(name) || !is_config_key(key) {
                return Err(refuse(
                    "not a ConfigMap reference: expected configmap:NAME/KEY, NAME a ConfigMap \
                     of the pod's namespace and KEY one of its keys"
                        .to_owned(),
                ));
            }
            Source::ConfigMap {
                name: name.to_owned(),
                key: key.to_owned(),
            }
        }
        (Carrier::Options, Some(("file", path))) => {
            let fine = !path.is_empty()
                && !path.starts_with('/')
                && path.len() <= 255
                && path.split('/').all(|part| !part.is_empty() && part != "..");
            if !fine {
                return Err(refuse(
                    "not a file reference: expected file:PATH, a relative path without `..` \
                     under the service's --model-dir"
                        .to_owned(),
                ));
            }
            Source::File(path.to_owned())
        }
        _ => {
            return Err(refuse(format!(
                "expected a model summary as JSON (what `tandem declare --format json` prints) \
                 or a reference ({})",
                match carrier {
                    Carrier::Annotations => "configmap:NAME/KEY",
                    Carrier::Options => "file:PATH",
                }
            )));
        }
    };
    Ok(Model::Reference(Reference { source, batch_size }))
}

/// Whether `name` can name a ConfigMap (a DNS subdomain: lower-case letters, digits, `-`, `.`).
fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
}

/// Whether `key` can be a ConfigMap key.
fn is_config_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Reference {
    /// The model summary in `bytes`, read from the reference's source: a summary as JSON, or
    /// an ONNX file summarized at the reference's batch size. `Err` says why, for the user.
    pub fn summarize(&self, bytes: &[u8]) -> Result<ModelSummary, String> {
        let looks_like_json = bytes
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'{');
        if looks_like_json {
            if self.batch_size.is_some() {
                return Err(format!(
                    "{} holds a model summary, which carries its own batch_size; the batch size \
                     is for an ONNX file",
                    self.source
                ));
            }
            let text = std::str::from_utf8(bytes)
                .map_err(|_| format!("{} is not UTF-8 text", self.source))?;
            return tandem_declare::read_summary_json(text)
                .map_err(|e| format!("{} is not a model summary: {e}", self.source));
        }
        tandem_declare::summarize(bytes, self.batch_size)
            .map_err(|e| format!("{} is not an ONNX model Tandem can read: {e}", self.source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(field: Field, value: &str) -> Raw {
        let mut raw = Raw::default();
        let slot = match field {
            Field::Priority => &mut raw.priority,
            Field::Work => &mut raw.work,
            Field::Model => &mut raw.model,
            Field::BatchSize => &mut raw.batch_size,
        };
        *slot = Some(value.to_owned());
        raw
    }

    const SUMMARY: &str = r#"{"params_mib": 97.5, "activations_mib": 2300, "input_mib": 18.4,
        "batch_size": 32, "gflops": 131, "conv_layers": 53, "linear_layers": 1,
        "activation_layers": 49, "other_layers": 71}"#;

    #[test]
    fn nothing_declared_changes_nothing() {
        let declared = Declaration::declared(&Raw::default(), Carrier::Annotations).unwrap();
        assert!(declared.is_empty());
        assert_eq!(declared.job("id", None), Job::new("id"));
        assert_eq!(declared.work_done(), 1.0);
    }

    #[test]
    fn every_field_parses_into_the_engines_job() {
        let raw = Raw {
            priority: Some("cost".into()),
            work: Some("50000 steps at 12.5/s on Tesla-V100-SXM2-16GB, 3/s on K80".into()),
            model: Some(SUMMARY.into()),
            batch_size: None,
        };
        let declaration = Declaration::parse(&raw, Carrier::Annotations).unwrap();
        let work = declaration.work.clone().unwrap();
        assert_eq!(work.amount, 50_000.0);
        assert_eq!(work.unit, "steps");
        assert_eq!(
            work.speeds,
            [("V100".to_owned(), 12.5), ("K80".to_owned(), 3.0)]
        );
        let job = declaration.job("id", declaration.inline_model());
        assert_eq!(job.priority, Some(Priority::Cost));
        assert_eq!(job.work, Some(50_000.0));
        assert_eq!(job.declared.map(|m| m.batch_size), Some(32));
        assert_eq!(declaration.work_done(), 50_000.0);
    }

    #[test]
    fn a_duration_is_one_run_at_the_reference_speed() {
        for (text, seconds) in [
            ("90m on V100", 5400.0),
            ("5400s on V100", 5400.0),
            ("1.5h on V100", 5400.0),
            ("90 min on V100", 5400.0),
        ] {
            let work = parse_work(text, Carrier::Options).unwrap();
            assert_eq!(work.amount, 1.0, "{text}");
            assert_eq!(work.speeds.len(), 1);
            assert!((work.speeds[0].1 - 1.0 / seconds).abs() < 1e-12, "{text}");
        }
    }

    #[test]
    fn bad_values_are_refused_naming_the_field_and_the_value() {
        for (field, value, expect) in [
            (Field::Priority, "fastest", "latency, cost or energy"),
            (Field::Work, "soon", "expected a run's time"),
            (Field::Work, "90 parsecs on V100", "not a duration"),
            (Field::Work, "0s on V100", "not a duration"),
            (Field::Work, "90m on", "expected a run's time"),
            (Field::Work, "-5 steps", "not a positive amount"),
            (Field::Work, "5 steps at fast", "reference speed"),
            (
                Field::Work,
                "5 steps at 1/s on V100, 2/s on V100",
                "two reference",
            ),
            (Field::Model, "resnet50", "expected a model summary"),
            (Field::Model, "{\"params_mib\": 1}", "not a model summary"),
            (
                Field::Model,
                "configmap:Bad_Name/key",
                "not a ConfigMap reference",
            ),
            (Field::Model, "file:/etc/passwd", "expected a model summary"),
            (Field::BatchSize, "0", "at least 1"),
        ] {
            let refusal =
                Declaration::parse(&raw(field, value), Carrier::Annotations).expect_err(value);
            assert_eq!(refusal.field, field);
            let message = refusal.to_string();
            assert!(message.contains(field.annotation()), "{message}");
            assert!(message.contains(expect), "{value}: {message}");
        }
        let refusal =
            Declaration::parse(&raw(Field::Model, "file:../x"), Carrier::Options).unwrap_err();
        assert!(
            refusal.to_string().contains("option --tandem-model"),
            "{refusal}"
        );
        assert!(refusal.problem.contains("without `..`"), "{refusal}");
        let long = "x".repeat(500);
        let refusal =
            Declaration::parse(&raw(Field::Priority, &long), Carrier::Options).unwrap_err();
        assert!(refusal.value.chars().count() <= QUOTED_CHARS + 1);
    }

    #[test]
    fn a_batch_size_needs_a_referenced_model() {
        let mut both = raw(Field::BatchSize, "32");
        assert!(
            Declaration::parse(&both, Carrier::Annotations)
                .unwrap_err()
                .problem
                .contains("by reference")
        );
        both.model = Some("configmap:models/resnet.onnx".into());
        let declaration = Declaration::parse(&both, Carrier::Annotations).unwrap();
        assert_eq!(
            declaration.reference(),
            Some(&Reference {
                source: Source::ConfigMap {
                    name: "models".into(),
                    key: "resnet.onnx".into()
                },
                batch_size: Some(32),
            })
        );
        let file = Raw {
            model: Some("file:models/resnet.json".into()),
            ..Raw::default()
        };
        let declaration = Declaration::parse(&file, Carrier::Options).unwrap();
        assert_eq!(
            declaration.reference().map(|r| r.source.to_string()),
            Some("file:models/resnet.json".to_owned())
        );
    }

    #[test]
    fn references_read_summaries_and_onnx_files() {
        let reference = Reference {
            source: Source::File("m.json".into()),
            batch_size: None,
        };
        assert_eq!(
            reference.summarize(SUMMARY.as_bytes()).unwrap().batch_size,
            32
        );
        assert!(
            reference
                .summarize(b"\x00\x01garbage")
                .unwrap_err()
                .contains("not an ONNX model")
        );
        let onnx = tandem_declare::onnx::build::lenet(None);
        let batched = Reference {
            batch_size: Some(16),
            ..reference.clone()
        };
        assert_eq!(batched.summarize(&onnx).unwrap().batch_size, 16);
        assert!(
            batched
                .summarize(SUMMARY.as_bytes())
                .unwrap_err()
                .contains("its own batch_size")
        );
    }

    #[test]
    fn a_pods_fields_fall_back_to_its_groups() {
        let pod = raw(Field::Priority, "latency");
        let group = Raw {
            priority: Some("cost".into()),
            work: Some("1h on V100".into()),
            ..Raw::default()
        };
        let merged = pod.or(&group);
        assert_eq!(merged.priority.as_deref(), Some("latency"));
        assert_eq!(merged.work.as_deref(), Some("1h on V100"));
    }
}
