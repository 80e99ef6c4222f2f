//! The cluster file: groups of identical GPU nodes, one group per CSV row.
//!
//! ```text
//! nodes,gpus_per_node,gpu_model
//! 4,4,K80
//! 2,8,V100
//! ```
//!
//! `gpu_model` must be a model the run's catalogs measured (its memory comes from them, checked
//! when the simulation is built). Nodes are named `<model>-<n>` (numbered per model from 0) and
//! their GPUs `<node>/<index>`, in file order: the order in which order-sensitive policies
//! (first fit) see them.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::csv_input;
use crate::error::{Error, Result, at_line};

/// One group of identical nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeGroup {
    /// How many nodes.
    pub nodes: u32,
    /// GPUs on each.
    pub gpus_per_node: u32,
    /// Their GPU model.
    pub gpu_model: String,
}

/// One GPU of the simulated cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuSlot {
    /// `<node>/<index>`.
    pub id: String,
    /// The node's name.
    pub node: String,
    /// The GPU model.
    pub model: String,
}

/// A checked cluster file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cluster {
    /// Where it came from, for errors.
    pub origin: String,
    /// The node groups, in file order.
    pub groups: Vec<NodeGroup>,
    /// The 1-based line of each group.
    pub lines: Vec<u64>,
}

const COLUMNS: [&str; 3] = ["nodes", "gpus_per_node", "gpu_model"];

/// Most GPUs a cluster file may describe: far above any cluster the simulator replays, far
/// below what listing them ([`Cluster::gpus`]) could not allocate.
pub const MAX_GPUS: u64 = 1_000_000;

impl Cluster {
    /// Reads and checks a cluster file.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let (text, origin) = csv_input::read(path.as_ref())?;
        Self::parse(&text, &origin)
    }

    /// Parses and checks cluster CSV; `origin` starts every error.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let (mut reader, index) = csv_input::open(text, origin, &COLUMNS)?;
        let mut cluster = Cluster {
            origin: origin.to_owned(),
            ..Cluster::default()
        };
        let mut total = 0_u64;
        for record in reader.records() {
            let (record, line) = csv_input::row(record, text, origin)?;
            let field = |i: usize| record.get(index[i]).unwrap_or_default();
            let count = |i: usize| -> Result<u32> {
                field(i)
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| {
                        at_line(
                            origin,
                            line,
                            format!(
                                "`{}` must be a whole number ≥ 1, got `{}`",
                                COLUMNS[i],
                                field(i)
                            ),
                        )
                    })
            };
            let group = NodeGroup {
                nodes: count(0)?,
                gpus_per_node: count(1)?,
                gpu_model: field(2).to_owned(),
            };
            if group.gpu_model.is_empty() {
                return Err(at_line(origin, line, "`gpu_model` is empty"));
            }
            total += u64::from(group.nodes) * u64::from(group.gpus_per_node);
            if total > MAX_GPUS {
                return Err(at_line(
                    origin,
                    line,
                    format!("the cluster would have {total} GPUs; at most {MAX_GPUS} are allowed"),
                ));
            }
            cluster.groups.push(group);
            cluster.lines.push(line);
        }
        if cluster.groups.is_empty() {
            return Err(Error::Input {
                origin: origin.to_owned(),
                problem: "the cluster has no node".into(),
            });
        }
        Ok(cluster)
    }

    /// Every GPU, in file order.
    pub fn gpus(&self) -> Vec<GpuSlot> {
        let mut per_model = std::collections::HashMap::<&str, u32>::new();
        let mut gpus = Vec::new();
        for group in &self.groups {
            for _ in 0..group.nodes {
                let n = per_model.entry(&group.gpu_model).or_default();
                let node = format!("{}-{n}", group.gpu_model.to_lowercase());
                *n += 1;
                for index in 0..group.gpus_per_node {
                    gpus.push(GpuSlot {
                        id: format!("{node}/{index}"),
                        node: node.clone(),
                        model: group.gpu_model.clone(),
                    });
                }
            }
        }
        gpus
    }

    /// The cluster as CSV: what [`parse`](Self::parse) reads back.
    pub fn to_csv(&self) -> String {
        let mut text = format!("{}\n", COLUMNS.join(","));
        for g in &self.groups {
            text.push_str(&format!(
                "{},{},{}\n",
                g.nodes, g.gpus_per_node, g.gpu_model
            ));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_groups_into_named_gpus() {
        let cluster =
            Cluster::parse("nodes,gpus_per_node,gpu_model\n2,2,K80\n1,1,V100\n", "c").unwrap();
        let ids: Vec<String> = cluster.gpus().into_iter().map(|g| g.id).collect();
        assert_eq!(
            ids,
            ["k80-0/0", "k80-0/1", "k80-1/0", "k80-1/1", "v100-0/0"]
        );
        assert_eq!(
            Cluster::parse(&cluster.to_csv(), "c").unwrap().groups,
            cluster.groups
        );
    }

    #[test]
    fn bad_rows_are_named_by_line() {
        let e = |t: &str| Cluster::parse(t, "c.csv").unwrap_err().to_string();
        assert!(e("nodes,gpu_model\n1,K80\n").contains("c.csv:1: missing column `gpus_per_node`"));
        assert!(
            e("nodes,gpus_per_node,gpu_model\n1,4,K80\n0,4,K80\n").starts_with("c.csv:3: `nodes`")
        );
        assert!(
            e("nodes,gpus_per_node,gpu_model\n1,-4,K80\n").starts_with("c.csv:2: `gpus_per_node`")
        );
        assert!(
            e("nodes,gpus_per_node,gpu_model\n1,4,\n").contains("c.csv:2: `gpu_model` is empty")
        );
        // Absurd counts are refused, not allocated.
        assert!(
            e("nodes,gpus_per_node,gpu_model\n1,8,K80\n4294967295,4294967295,V100\n").starts_with(
                "c.csv:3: the cluster would have 18446744065119617033 GPUs; at most 1000000"
            )
        );
        assert!(Cluster::parse("nodes,gpus_per_node,gpu_model\n125000,8,K80\n", "c").is_ok());
        assert!(e("nodes,gpus_per_node,gpu_model\n").contains("no node"));
    }
}
