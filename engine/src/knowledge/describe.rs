//! What the knowledge base holds, as the WIT `describe` reports it.

use tandem_api::{ClusterInfo, KnowledgeSummary, PairInfo};

use super::Knowledge;

/// A statistic as the summary reports it, `f32`: finite (the largest `f32` of its sign where
/// the `f64` is beyond it, where `as` would give an infinity).
fn reported(value: f64) -> f32 {
    value.clamp(f64::from(f32::MIN), f64::from(f32::MAX)) as f32
}

impl Knowledge {
    /// The summary `describe` returns: clusters, the measured matrix with rankings, counts.
    pub(crate) fn describe(&self) -> KnowledgeSummary {
        let clusters = self
            .clusters
            .clusters
            .iter()
            .map(|c| ClusterInfo {
                id: c.id,
                gpu_util_pct: reported(c.centre[0] * 100.0),
                mem_access_pct: reported(c.centre[1] * 100.0),
                mem_share_pct: reported(c.centre[2] * 100.0),
                members: c.members,
                radius: reported(c.radius),
            })
            .collect();
        let mut pairs: Vec<PairInfo> = self
            .matrix
            .cells()
            .filter(|(_, cell)| cell.slowdown.count > 0)
            .map(|(&(of, next_to), cell)| {
                let saving = self
                    .matrix
                    .cell(of.min(next_to), of.max(next_to))
                    .map(|c| c.saving);
                PairInfo {
                    cluster: of,
                    partner: next_to,
                    observations: u32::try_from(cell.slowdown.count).unwrap_or(u32::MAX),
                    slowdown_pct: reported(cell.slowdown.mean * 100.0),
                    slowdown_std_pct: reported(
                        cell.slowdown.variance().unwrap_or(0.0).sqrt() * 100.0,
                    ),
                    packing_saving_pct: saving
                        .filter(|s| s.count > 0)
                        .map(|s| reported(s.mean * 100.0)),
                    rank: 0,
                }
            })
            .collect();
        // Relative ranking (JRS): best packing saving first, then least slowdown.
        let mut order: Vec<usize> = (0..pairs.len()).collect();
        order.sort_by(|&a, &b| {
            let saving = |i: usize| pairs[i].packing_saving_pct.unwrap_or(f32::NEG_INFINITY);
            saving(b)
                .total_cmp(&saving(a))
                .then(pairs[a].slowdown_pct.total_cmp(&pairs[b].slowdown_pct))
        });
        for (rank, i) in order.into_iter().enumerate() {
            pairs[i].rank = u32::try_from(rank + 1).unwrap_or(u32::MAX);
        }
        KnowledgeSummary {
            profiles: u32::try_from(self.profiles.len()).unwrap_or(u32::MAX),
            seed_points: u32::try_from(self.seed_points.len()).unwrap_or(u32::MAX),
            outcomes: u32::try_from(self.outcomes).unwrap_or(u32::MAX),
            residual_observations: u32::try_from(self.residual.observations).unwrap_or(u32::MAX),
            memory_rows: u32::try_from(self.memory.model().rows()).unwrap_or(u32::MAX),
            memory_margin_pct: reported(self.memory.model().margin() * 100.0),
            speed_workloads: u32::try_from(self.speeds.workloads()).unwrap_or(u32::MAX),
            clusters,
            pairs,
        }
    }
}
