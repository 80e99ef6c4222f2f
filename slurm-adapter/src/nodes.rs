//! The cluster's GPU nodes, as Slurm describes them.
//!
//! The service reads `scontrol show node -o` (one line per node, in every Slurm release and
//! without slurmrestd) at start and every `--node-refresh`: each node's `NodeName`, its
//! `State` and its `Gres`, where `gpu:TYPE:N` (or `gpu:N`) names its GPUs. GPU `i` of a node is
//! the `i`-th device of its `gres.conf` lines, which is the CUDA index the job sees when the
//! files are listed in device order (`/dev/nvidia0`, `/dev/nvidia1`, ...). The TYPE names the
//! GPU model (`v100` is the engine's `V100`, see [`tandem_adapter_core::gpu_models`]); nodes
//! that cannot take jobs (down, drained, failing) are left out.

use std::collections::HashMap;
use std::net::IpAddr;

use tandem_api::GpuSpec;

/// One GPU node as Slurm reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmNode {
    /// Slurm's node name.
    pub name: String,
    /// GPU groups of the node: type (empty when untyped) and count, in gres order.
    pub gpus: Vec<(String, u32)>,
    /// Whether the node can take jobs now.
    pub usable: bool,
    /// Its `NodeAddr` and `NodeHostName` (where they differ from its name), by which a
    /// MUNGE credential's encoding host is known for this node.
    pub addresses: Vec<String>,
}

/// Why the node list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NodesError {
    /// scontrol could not be run.
    #[error("cannot run {command}: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// scontrol failed.
    #[error("{command} failed ({status}): {stderr}")]
    Failed {
        /// The command.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it printed on stderr.
        stderr: String,
    },
    /// A line had no `NodeName=`.
    #[error("line {line} of scontrol's output has no NodeName=")]
    NoName {
        /// 1-based line number.
        line: usize,
    },
    /// A GPU count is not a number.
    #[error("node {node}: cannot read the GPU count in Gres entry `{entry}`")]
    BadGres {
        /// The node.
        node: String,
        /// The entry.
        entry: String,
    },
}

/// Reads the nodes with `scontrol show node -o`.
pub async fn read(scontrol: &std::path::Path) -> Result<Vec<SlurmNode>, NodesError> {
    let command = format!("{} show node -o", scontrol.display());
    let output = tokio::process::Command::new(scontrol)
        .args(["show", "node", "-o"])
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|source| NodesError::Spawn {
            command: command.clone(),
            source,
        })?;
    if !output.status.success() {
        return Err(NodesError::Failed {
            command,
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    parse(&String::from_utf8_lossy(&output.stdout))
}

/// Parses `scontrol show node -o` output.
pub fn parse(text: &str) -> Result<Vec<SlurmNode>, NodesError> {
    let mut nodes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
        };
        let name = field("NodeName").ok_or(NodesError::NoName { line: i + 1 })?;
        let state = field("State").unwrap_or("UNKNOWN").to_ascii_uppercase();
        let usable = !["DOWN", "DRAIN", "FAIL", "FUTURE", "POWER", "NOT_RESPONDING"]
            .iter()
            .any(|bad| state.contains(bad))
            && !state.ends_with('*');
        let gpus = field("Gres")
            .map(|gres| gpu_groups(name, gres))
            .transpose()?
            .unwrap_or_default();
        let mut addresses: Vec<String> = ["NodeAddr", "NodeHostName"]
            .iter()
            .filter_map(|key| field(key))
            .filter(|a| *a != name && *a != "(null)")
            .map(str::to_owned)
            .collect();
        addresses.dedup();
        nodes.push(SlurmNode {
            name: name.to_owned(),
            gpus,
            usable,
            addresses,
        });
    }
    Ok(nodes)
}

/// The `gpu` entries of a `Gres=` value (`gpu:v100:2(S:0-1),shard:8`): type and count.
fn gpu_groups(node: &str, gres: &str) -> Result<Vec<(String, u32)>, NodesError> {
    if gres == "(null)" {
        return Ok(Vec::new());
    }
    let mut groups = Vec::new();
    let mut depth = 0_usize;
    let mut start = 0;
    let mut entries = Vec::new();
    // Commas inside `(S:0,1)` belong to the entry.
    for (i, c) in gres.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                entries.push(&gres[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    entries.push(&gres[start..]);
    for entry in entries {
        let bare = entry.split('(').next().unwrap_or_default();
        let parts: Vec<&str> = bare.split(':').collect();
        if parts.first() != Some(&"gpu") {
            continue;
        }
        let bad = || NodesError::BadGres {
            node: node.to_owned(),
            entry: entry.to_owned(),
        };
        let count: u32 = parts.last().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        let kind = match parts.as_slice() {
            [_, _] => String::new(),
            [_, kind, ..] => kind.to_ascii_lowercase(),
            _ => return Err(bad()),
        };
        groups.push((kind, count));
    }
    Ok(groups)
}

/// Which node each address of `nodes` is (their names, `NodeAddr` and `NodeHostName`, as the
/// resolver answers for them; an address two nodes share is left out, it names neither).
pub async fn hosts(nodes: &[SlurmNode]) -> HashMap<IpAddr, String> {
    let mut found: HashMap<IpAddr, Option<String>> = HashMap::new();
    for node in nodes {
        let mut mine = std::collections::BTreeSet::new();
        for name in std::iter::once(&node.name).chain(&node.addresses) {
            let resolved = match name.parse::<IpAddr>() {
                Ok(ip) => vec![ip],
                Err(_) => tokio::net::lookup_host((name.as_str(), 0))
                    .await
                    .map(|all| all.map(|a| a.ip()).collect())
                    .unwrap_or_default(),
            };
            mine.extend(resolved);
        }
        for ip in mine {
            found
                .entry(ip)
                .and_modify(|owner| {
                    if owner.as_deref() != Some(node.name.as_str()) {
                        *owner = None;
                    }
                })
                .or_insert_with(|| Some(node.name.clone()));
        }
    }
    found
        .into_iter()
        .filter_map(|(ip, owner)| Some((ip, owner?)))
        .collect()
}

/// The GPU of a TYPE: the engine's model name and its memory (`--gpu-memory` first, then the
/// known models, then `default_mib`).
pub fn spec(kind: &str, memory: &[(String, u32)], default_mib: u32) -> GpuSpec {
    let (model, known) = tandem_adapter_core::gpu_models::gpu_model(kind);
    let given = memory.iter().find(|(k, _)| k == kind).map(|(_, m)| *m);
    let model = if kind.is_empty() {
        "gpu".to_owned()
    } else {
        model
    };
    GpuSpec::new(model, given.or(known).unwrap_or(default_mib))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCONTROL: &str = "\
NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.13 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:v100:2(S:0),shard:8(S:0) NodeAddr=gpu1 NodeHostName=gpu1 Version=22.05.8 RealMemory=19000 State=IDLE ThreadsPerCore=1 Partitions=main
NodeName=gpu2 Arch=x86_64 Gres=gpu:4,mps:400 State=MIXED Reason=none
NodeName=cpu1 Arch=x86_64 Gres=(null) State=IDLE
NodeName=gpu3 Gres=gpu:a100:1(S:0,1),gpu:k80:2 State=IDLE+DRAIN Reason=fan broken [root@2026-01-01]
NodeName=gpu4 Gres=gpu:t4:1 State=DOWN*
";

    #[test]
    fn gpu_nodes_types_counts_and_states_are_read() {
        let nodes = parse(SCONTROL).unwrap();
        assert_eq!(nodes.len(), 5);
        assert_eq!(nodes[0].name, "gpu1");
        assert_eq!(nodes[0].gpus, [("v100".to_owned(), 2)]);
        assert!(nodes[0].usable);
        assert_eq!(nodes[1].gpus, [(String::new(), 4)]);
        assert!(nodes[1].usable);
        assert!(nodes[2].gpus.is_empty());
        assert_eq!(
            nodes[3].gpus,
            [("a100".to_owned(), 1), ("k80".to_owned(), 2)]
        );
        assert!(!nodes[3].usable);
        assert!(!nodes[4].usable);
        assert!(nodes[0].addresses.is_empty());
        let named =
            parse("NodeName=n1 NodeAddr=10.0.0.7 NodeHostName=n1.cluster State=IDLE\n").unwrap();
        assert_eq!(named[0].addresses, ["10.0.0.7", "n1.cluster"]);
    }

    #[tokio::test]
    async fn addresses_name_their_node_unless_two_nodes_share_one() {
        let node = |name: &str, addr: &str| SlurmNode {
            name: name.into(),
            gpus: Vec::new(),
            usable: true,
            addresses: vec![addr.into()],
        };
        let hosts = hosts(&[
            node("a", "10.0.0.1"),
            node("b", "10.0.0.2"),
            node("c", "10.0.0.2"),
        ])
        .await;
        assert_eq!(
            hosts.get(&"10.0.0.1".parse().unwrap()).map(String::as_str),
            Some("a")
        );
        assert!(!hosts.contains_key(&"10.0.0.2".parse().unwrap()));
    }

    #[test]
    fn bad_lines_are_named() {
        let error = parse("Arch=x86_64 State=IDLE\n").unwrap_err().to_string();
        assert!(error.contains("line 1"), "{error}");
        let error = parse("NodeName=n Gres=gpu:v100:two\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("gpu:v100:two"), "{error}");
    }

    #[test]
    fn types_name_models_and_memories() {
        assert_eq!(spec("v100", &[], 1).memory_mib, 16_384);
        assert_eq!(spec("v100", &[], 1).model, "V100");
        assert_eq!(
            spec("rtx8000", &[("rtx8000".into(), 49_152)], 1).memory_mib,
            49_152
        );
        assert_eq!(spec("", &[], 12_000).memory_mib, 12_000);
    }
}
