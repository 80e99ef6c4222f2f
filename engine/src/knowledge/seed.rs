//! The bundled seed profiles a bootstrapped knowledge base clusters before any job is profiled.

use crate::features::Features;

/// The bundled seed profiles: the Futurewei mini-ML workload set (see `data/README.md`).
const SEED_CSV: &str = include_str!("../../data/futurewei_clustering_real_and_synthetic.csv");

/// Parses the bundled seed profiles (columns `MGUP`, `MGMAP`, `MGTSAMP`, in percent).
pub(super) fn seed_points() -> Vec<Features> {
    let mut lines = SEED_CSV.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let column = |name: &str| header.iter().position(|h| h.trim() == name);
    let (Some(util), Some(memory), Some(access)) =
        (column("MGUP"), column("MGMAP"), column("MGTSAMP"))
    else {
        return Vec::new();
    };
    lines
        .filter_map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            let value = |i: usize| {
                cells
                    .get(i)?
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
            };
            Some([
                value(util)? / 100.0,
                value(access)? / 100.0,
                value(memory)? / 100.0,
            ])
        })
        .collect()
}
