//! Gavel's measured throughputs (`simulation_throughputs.json`, stanford-futuredata/gavel).

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use super::input::Input;
use super::table::source_error;
use crate::catalog::{Catalog, GpuModel, JobType, Pair};
use crate::error::Result;

/// One GPU type of Gavel's throughput file and what the catalog records for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GavelGpu {
    /// Section of `simulation_throughputs.json`, such as `v100`.
    pub key: &'static str,
    /// GPU model name in the catalog, such as `V100`.
    pub model: &'static str,
    /// Device memory recorded for the model, in MiB (Gavel states none).
    pub memory_mib: u32,
    /// Why that memory size, for the catalog's `source`.
    pub memory_note: &'static str,
}

/// The three GPU types Gavel measured, with the memory sizes the catalogs assume.
pub const GAVEL_GPUS: [GavelGpu; 3] = [
    GavelGpu {
        key: "k80",
        model: "K80",
        memory_mib: 12288,
        memory_note: "12288 MiB, the memory of one GK210 die: a K80 board carries two dies \
                      that CUDA shows as two GPUs, and Gavel counts each as one (assumption)",
    },
    GavelGpu {
        key: "p100",
        model: "P100",
        memory_mib: 16384,
        memory_note: "16384 MiB, the 16 GB P100 (assumption: Gavel does not say which variant)",
    },
    GavelGpu {
        key: "v100",
        model: "V100",
        memory_mib: 16384,
        memory_note: "16384 MiB, the 16 GB V100 (assumption: Gavel does not say which variant)",
    },
];

/// A value in Gavel's throughput file: a solo throughput (key `"null"`) or, under a partner's
/// key, `[this job's throughput, the partner's throughput]` when the two share one GPU.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
enum Throughput {
    Solo(f64),
    Shared([f64; 2]),
}

/// GPU type -> job key -> partner key (or `"null"`) -> throughput.
type ThroughputFile = BTreeMap<String, BTreeMap<String, BTreeMap<String, Throughput>>>;

/// Builds the `gavel-<key>` catalog for one GPU type from `simulation_throughputs.json`.
///
/// Job keys are Python tuples `('<job type>', <number of GPUs>)`; only single-GPU job types are
/// kept, under Gavel's own names. Each unordered pair (including a job type with itself) is
/// listed once, in the file's key order; `[0.0, 0.0]` means the two cannot share a GPU and the
/// pair is left out. Both orientations of a pair must agree.
pub fn gavel(throughputs: Input<'_>, gpu: &GavelGpu) -> Result<Catalog> {
    let origin = throughputs.origin;
    let mut deserializer = serde_json::Deserializer::from_str(throughputs.text);
    let file: ThroughputFile = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|e| source_error(origin, e.path().to_string(), e.inner().to_string()))?;
    let section = file
        .get(gpu.key)
        .ok_or_else(|| source_error(origin, ".".to_owned(), format!("no `{}` section", gpu.key)))?;

    // Single-GPU job types, in key order, with their solo throughput.
    let mut jobs: Vec<(&str, String, f64)> = Vec::new();
    let mut multi_gpu = 0;
    for (key, entries) in section {
        let at = format!("{}.{key}", gpu.key);
        let (name, gpus) = parse_key(key).ok_or_else(|| {
            source_error(origin, at.clone(), "not a `('job type', GPUs)` key".into())
        })?;
        if gpus != 1 {
            multi_gpu += 1;
            continue;
        }
        let solo = match entries.get("null") {
            Some(Throughput::Solo(solo)) if solo.is_finite() && *solo > 0.0 => *solo,
            Some(other) => {
                return Err(source_error(
                    origin,
                    format!("{at}.null"),
                    format!("the solo throughput must be a positive number, got {other:?}"),
                ));
            }
            None => {
                return Err(source_error(
                    origin,
                    at,
                    "no solo throughput (`null` entry)".into(),
                ));
            }
        };
        jobs.push((key.as_str(), name, solo));
    }
    let index: HashMap<&str, usize> = jobs.iter().enumerate().map(|(i, j)| (j.0, i)).collect();

    // Every partner of a single-GPU job type must be one too.
    for &(key, _, _) in &jobs {
        for partner in section[key].keys() {
            if partner != "null" && !index.contains_key(partner.as_str()) {
                return Err(source_error(
                    origin,
                    format!("{}.{key}.{partner}", gpu.key),
                    "partner is not a single-GPU job type of this section".into(),
                ));
            }
        }
    }

    let mut pairs = Vec::new();
    let mut cannot_share = 0;
    let mut not_measured = 0;
    let mut no_slowdown = 0;
    let mut no_slowdown_entries = 0;
    for (i, (key_a, name_a, solo_a)) in jobs.iter().enumerate() {
        for (key_b, name_b, solo_b) in &jobs[i..] {
            let forward = shared(origin, gpu, section, key_a, key_b)?;
            let backward = shared(origin, gpu, section, key_b, key_a)?;
            let [tput_a, tput_b] = match (forward, backward) {
                (Some(f), Some(b)) if f != [b[1], b[0]] => {
                    return Err(source_error(
                        origin,
                        format!("{}.{key_a}.{key_b}", gpu.key),
                        format!("{f:?} disagrees with the other orientation {b:?} (under {key_b})"),
                    ));
                }
                (Some(f), _) => f,
                (None, Some(b)) => [b[1], b[0]],
                (None, None) => {
                    not_measured += 1;
                    continue;
                }
            };
            if tput_a == 0.0 && tput_b == 0.0 {
                cannot_share += 1;
                continue;
            }
            let (speed_a, speed_b) = (tput_a / solo_a, tput_b / solo_b);
            if speed_a >= 1.0 && speed_b >= 1.0 {
                no_slowdown += 1;
                no_slowdown_entries += if key_a == key_b { 1 } else { 2 };
            }
            pairs.push(Pair {
                gpu_model: gpu.model.to_owned(),
                a: name_a.clone(),
                b: name_b.clone(),
                speed_a,
                speed_b,
                colocated_time_s: None,
            });
        }
    }

    let job_types = jobs
        .iter()
        .map(|(_, name, solo)| JobType {
            name: name.clone(),
            profile: None,
            declared: None,
            solo_throughput: BTreeMap::from([(gpu.model.to_owned(), *solo)]),
            solo_time_s: BTreeMap::new(),
            gpu_util_pct_approx: None,
            peak_mem_mib: BTreeMap::new(),
        })
        .collect::<Vec<_>>();

    let n = jobs.len();
    let unordered = n * (n + 1) / 2;
    let not_measured = if not_measured == 0 {
        String::new()
    } else {
        format!(" {not_measured} pairs have no entry at all and are left out too.")
    };
    let no_slowdown = if no_slowdown == 0 {
        String::new()
    } else {
        format!(
            " {no_slowdown} pairs ({no_slowdown_entries} entries of the file, counting both \
             orientations) show no slowdown at all (both speeds 1, or more): Gavel's \
             co-located values appear capped at the solo throughput; they are kept as measured."
        )
    };
    let source = format!(
        "Gavel, stanford-futuredata/gavel (MIT), simulation_throughputs.json section `{key}`, \
         vendored in data/gavel/ (see data/README.md): measured training throughputs in steps \
         per second. Job types: the {n} single-GPU job types under Gavel's names (public \
         benchmark names); {multi_gpu} multi-GPU entries are skipped. solo_throughput = the \
         `null` entry. Pairs: a partner's entry [this job's throughput, partner's throughput] \
         when both share one GPU; speed = that throughput / the job's solo throughput. Of the \
         {unordered} unordered pairs (a job type with itself included: two instances), \
         {cannot_share} are [0, 0], meaning they cannot share a GPU, and are left out.\
         {not_measured}{no_slowdown} GPU memory: {memory_note}. profile is null: Gavel \
         publishes no per-job telemetry.",
        key = gpu.key,
        memory_note = gpu.memory_note,
    );

    Catalog::new(
        format!("gavel-{}", gpu.key),
        source,
        vec![GpuModel {
            model: gpu.model.to_owned(),
            memory_mib: gpu.memory_mib,
        }],
        job_types,
        pairs,
    )
}

/// The shared throughputs listed under job `key` for partner `partner`, if any.
fn shared(
    origin: &str,
    gpu: &GavelGpu,
    section: &BTreeMap<String, BTreeMap<String, Throughput>>,
    key: &str,
    partner: &str,
) -> Result<Option<[f64; 2]>> {
    let at = || format!("{}.{key}.{partner}", gpu.key);
    match section.get(key).and_then(|entries| entries.get(partner)) {
        None => Ok(None),
        Some(Throughput::Shared(pair)) => {
            if pair.iter().all(|t| t.is_finite() && *t > 0.0) || *pair == [0.0, 0.0] {
                Ok(Some(*pair))
            } else {
                Err(source_error(
                    origin,
                    at(),
                    format!(
                        "throughputs must both be positive, or both 0 (cannot share), got {pair:?}"
                    ),
                ))
            }
        }
        Some(Throughput::Solo(value)) => Err(source_error(
            origin,
            at(),
            format!("a partner entry must be a pair of throughputs, got {value}"),
        )),
    }
}

/// `('ResNet-18 (batch size 16)', 1)` -> (`ResNet-18 (batch size 16)`, 1). Python quotes a name
/// containing `'` with `"` instead.
fn parse_key(key: &str) -> Option<(String, u32)> {
    let inner = key.strip_prefix('(')?.strip_suffix(')')?;
    let quote = inner.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let rest = &inner[1..];
    let (name, tail) = rest.rsplit_once(&format!("{quote},"))?;
    let gpus = tail.trim().parse().ok()?;
    (!name.is_empty()).then(|| (name.to_owned(), gpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three single-GPU job types and one 4-GPU job on `v100`: A with B slowed, A with itself,
    /// B with itself unmeasurable, C with A capped at solo, C with B and C with C not listed.
    const FILE: &str = r#"{
      "v100": {
        "('A (batch size 16)', 1)": {
          "null": 10.0,
          "('A (batch size 16)', 1)": [6.0, 6.0],
          "('B', 1)": [5.0, 2.0],
          "('C', 1)": [10.0, 4.0]
        },
        "('B', 1)": {
          "null": 4.0,
          "('A (batch size 16)', 1)": [2.0, 5.0],
          "('B', 1)": [0.0, 0.0]
        },
        "('C', 1)": {
          "null": 4.0
        },
        "('A (batch size 16)', 4)": {
          "null": 35.0,
          "('A (batch size 16)', 4)": [20.0, 20.0]
        }
      },
      "k80": {}
    }"#;

    const V100: GavelGpu = GAVEL_GPUS[2];

    fn convert(text: &str) -> Result<Catalog> {
        gavel(
            Input {
                origin: "throughputs.json",
                text,
            },
            &V100,
        )
    }

    fn error(text: &str) -> String {
        match convert(text) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn keys_parse_as_python_tuples() {
        assert_eq!(
            parse_key("('ResNet-18 (batch size 16)', 1)"),
            Some(("ResNet-18 (batch size 16)".into(), 1))
        );
        assert_eq!(parse_key("(\"it's\", 4)"), Some(("it's".into(), 4)));
        assert_eq!(parse_key("('a, b', 2)"), Some(("a, b".into(), 2)));
        for bad in [
            "null",
            "('x')",
            "('x', one)",
            "('', 1)",
            "('x', 1",
            "(x, 1)",
        ] {
            assert_eq!(parse_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn single_gpu_pairs_become_speeds() {
        let catalog = convert(FILE).expect("converts");
        assert_eq!(catalog.name(), "gavel-v100");
        let names: Vec<&str> = catalog
            .job_types()
            .iter()
            .map(|j| j.name.as_str())
            .collect();
        assert_eq!(names, ["A (batch size 16)", "B", "C"]);
        let a = &catalog.job_types()[0];
        assert_eq!(a.solo_throughput.get("V100"), Some(&10.0));
        assert!(a.profile.is_none());
        assert_eq!(catalog.pairs().len(), 3);
        assert_eq!(
            catalog.pair("V100", "B", "A (batch size 16)"),
            Some((0.5, 0.5))
        );
        assert_eq!(
            catalog.pair("V100", "A (batch size 16)", "A (batch size 16)"),
            Some((0.6, 0.6))
        );
        // Only listed under A: taken from there.
        assert_eq!(
            catalog.pair("V100", "C", "A (batch size 16)"),
            Some((1.0, 1.0))
        );
        // [0, 0] and absent pairs are not co-locatable.
        assert_eq!(catalog.pair("V100", "B", "B"), None);
        assert_eq!(catalog.pair("V100", "B", "C"), None);
        let source = catalog.source();
        assert!(source.contains("the 3 single-GPU job types"), "{source}");
        assert!(
            source.contains("1 multi-GPU entries are skipped"),
            "{source}"
        );
        assert!(source.contains("Of the 6 unordered pairs"), "{source}");
        assert!(source.contains("1 are [0, 0]"), "{source}");
        assert!(source.contains("2 pairs have no entry at all"), "{source}");
        assert!(
            source.contains("1 pairs (2 entries of the file, counting both orientations) show"),
            "{source}"
        );
        assert_eq!(catalog.gpu_model("V100").map(|g| g.memory_mib), Some(16384));
    }

    #[test]
    fn bad_files_are_errors_naming_the_entry() {
        assert_eq!(
            error(&FILE.replace("[2.0, 5.0]", "[2.0, 5.5]")),
            "throughputs.json: v100.('A (batch size 16)', 1).('B', 1): [5.0, 2.0] disagrees \
             with the other orientation [2.0, 5.5] (under ('B', 1))"
        );
        assert_eq!(
            error(&FILE.replace("\"null\": 4.0,", "\"null\": 0.0,")),
            "throughputs.json: v100.('B', 1).null: the solo throughput must be a positive \
             number, got Solo(0.0)"
        );
        assert_eq!(
            error(&FILE.replace("[0.0, 0.0]", "[0.0, 1.0]")),
            "throughputs.json: v100.('B', 1).('B', 1): throughputs must both be positive, or \
             both 0 (cannot share), got [0.0, 1.0]"
        );
        assert_eq!(
            error(&FILE.replace("('C', 1)\": {", "('C' 1)\": {")),
            "throughputs.json: v100.('C' 1): not a `('job type', GPUs)` key"
        );
        assert_eq!(
            error(&FILE.replace("[10.0, 4.0]", "\"fast\"")),
            "throughputs.json: v100.('A (batch size 16)', 1).('C', 1): data did not match any \
             variant of untagged enum Throughput at line 8 column 9"
        );
        assert_eq!(
            error(&FILE.replace("\"('C', 1)\": [10.0, 4.0]", "\"('D', 1)\": [10.0, 4.0]")),
            "throughputs.json: v100.('A (batch size 16)', 1).('D', 1): partner is not a \
             single-GPU job type of this section"
        );
        assert_eq!(
            error(&FILE.replace("\"v100\"", "\"v1\"")),
            "throughputs.json: .: no `v100` section"
        );
    }
}
