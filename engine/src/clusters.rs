//! k-means clustering of profiles with k chosen by the elbow of the distortion curve, and
//! cluster ids that stay stable across re-clustering.
//!
//! - **k**: for k = 1..=[`MAX_CLUSTERS`] (at most the number of points), k-means (linfa,
//!   k-means++ initialisation, seeded) gives the distortion (inertia); the chosen k is the
//!   "knee" of the normalized curve, the point farthest below the chord from k = 1 to k = max
//!   (the Kneedle method). A curve with no drop means one cluster.
//! - **Stable ids**: after a re-fit, each new centre takes the id of the nearest old centre
//!   within [`SAME_CLUSTER_DISTANCE`], nearest pairs first, so what was learned about a cluster
//!   keeps its meaning while the clustering sharpens; other centres get fresh ids.
//! - **Uncertainty** of a point: `d / (d + r)`, with `d` its distance to its centre and `r` the
//!   cluster's mean member distance (at least [`MIN_RADIUS`]). 0 at the centre, ½ at a typical
//!   member's distance, towards 1 far away — monotone in `d` and bounded, so it can rank jobs.

use linfa::prelude::*;
use linfa_clustering::KMeans;
use ndarray::Array2;
use rand_xoshiro::Xoshiro256Plus;
use rand_xoshiro::rand_core::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::features::{Features, distance};

/// Most clusters the elbow search considers.
pub const MAX_CLUSTERS: usize = 8;
/// Largest move (in normalized feature units) after which a centre counts as a new cluster.
pub const SAME_CLUSTER_DISTANCE: f64 = 0.25;
/// Smallest radius a cluster is given, so a tight cluster does not make every outsider
/// maximally uncertain.
pub const MIN_RADIUS: f64 = 0.02;

/// One cluster of similar profiles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// Stable id.
    pub id: u32,
    /// Centre in feature space (`[util, access, memory share]`).
    pub centre: Features,
    /// Points assigned at the last fit.
    pub members: u32,
    /// Mean distance of the members to the centre (at least [`MIN_RADIUS`]).
    pub radius: f64,
}

/// The current clustering.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Clusters {
    /// The clusters, in id order.
    pub clusters: Vec<Cluster>,
    /// Points the last fit saw.
    pub fitted_points: usize,
    next_id: u32,
}

/// Where a point falls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placement {
    /// Id of the nearest cluster.
    pub cluster: u32,
    /// Distance to its centre.
    pub distance: f64,
    /// `d / (d + r)`, see the module docs.
    pub uncertainty: f64,
}

impl Clusters {
    /// Re-clusters `points` from scratch (seeded), keeping ids stable where centres stay.
    pub fn fit(&mut self, points: &[Features], seed: u64) {
        self.fitted_points = points.len();
        if points.is_empty() {
            self.clusters.clear();
            return;
        }
        let data = Array2::from_shape_fn((points.len(), 3), |(i, j)| points[i][j]);
        let dataset = DatasetBase::from(data);
        let max_k = MAX_CLUSTERS.min(points.len());
        let fits: Vec<Option<(Array2<f64>, f64)>> = (1..=max_k)
            .map(|k| {
                KMeans::params_with_rng(k, Xoshiro256Plus::seed_from_u64(seed ^ k as u64))
                    .n_runs(3)
                    .max_n_iterations(100)
                    .tolerance(1e-6)
                    .fit(&dataset)
                    .ok()
                    .map(|model| (model.centroids().clone(), model.inertia()))
            })
            .collect();
        let inertias: Vec<f64> = fits
            .iter()
            .map(|f| f.as_ref().map_or(f64::INFINITY, |(_, inertia)| *inertia))
            .collect();
        let k = choose_k(&inertias);
        let Some((centroids, _)) = fits.into_iter().nth(k - 1).flatten() else {
            // k-means failed at every k (degenerate input): one cluster at the mean.
            let mean = mean_of(points);
            self.relabel(vec![mean], points);
            return;
        };
        let centres = centroids
            .rows()
            .into_iter()
            .map(|row| [row[0], row[1], row[2]])
            .collect();
        self.relabel(centres, points);
    }

    /// Gives the new centres ids (stable where possible) and member statistics.
    fn relabel(&mut self, centres: Vec<Features>, points: &[Features]) {
        let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
        for (n, centre) in centres.iter().enumerate() {
            for (o, old) in self.clusters.iter().enumerate() {
                let d = distance(centre, &old.centre);
                if d <= SAME_CLUSTER_DISTANCE {
                    pairs.push((d, n, o));
                }
            }
        }
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut ids: Vec<Option<u32>> = vec![None; centres.len()];
        let mut taken = vec![false; self.clusters.len()];
        for (_, n, o) in pairs {
            if ids[n].is_none() && !taken[o] {
                ids[n] = Some(self.clusters[o].id);
                taken[o] = true;
            }
        }
        let mut members = vec![0_u32; centres.len()];
        let mut spread = vec![0.0_f64; centres.len()];
        for point in points {
            let (nearest, d) = nearest(&centres, point);
            members[nearest] += 1;
            spread[nearest] += d;
        }
        let mut clusters: Vec<Cluster> = centres
            .into_iter()
            .enumerate()
            .map(|(n, centre)| {
                let id = ids[n].unwrap_or_else(|| {
                    let id = self.next_id;
                    self.next_id += 1;
                    id
                });
                let radius = if members[n] == 0 {
                    MIN_RADIUS
                } else {
                    (spread[n] / f64::from(members[n])).max(MIN_RADIUS)
                };
                Cluster {
                    id,
                    centre,
                    members: members[n],
                    radius,
                }
            })
            .collect();
        clusters.sort_by_key(|c| c.id);
        self.clusters = clusters;
    }

    /// The nearest cluster of `point`, if there is any cluster.
    pub fn place(&self, point: &Features) -> Option<Placement> {
        self.clusters
            .iter()
            .map(|c| (c, distance(&c.centre, point)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(cluster, d)| Placement {
                cluster: cluster.id,
                distance: d,
                uncertainty: d / (d + cluster.radius),
            })
    }
}

fn nearest(centres: &[Features], point: &Features) -> (usize, f64) {
    centres
        .iter()
        .enumerate()
        .map(|(i, c)| (i, distance(c, point)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((0, 0.0))
}

fn mean_of(points: &[Features]) -> Features {
    let mut mean = [0.0; 3];
    for p in points {
        for (m, x) in mean.iter_mut().zip(p) {
            *m += x / points.len() as f64;
        }
    }
    mean
}

/// The knee of a distortion curve (`inertias[k - 1]` for k = 1..), by the Kneedle method.
pub fn choose_k(inertias: &[f64]) -> usize {
    let finite: Vec<f64> = inertias
        .iter()
        .copied()
        .take_while(|i| i.is_finite())
        .collect();
    let n = finite.len();
    if n <= 1 {
        return 1;
    }
    let (first, last) = (finite[0], finite[n - 1]);
    // No drop, or (almost) all of it already at k = 1: one cluster.
    if first <= 0.0 || (first - last) <= 1e-9 * first.max(1e-12) {
        return 1;
    }
    if n == 2 {
        // Two points on the curve: split only if it halves the distortion.
        return if last < 0.5 * first { 2 } else { 1 };
    }
    let mut best = (1, f64::NEG_INFINITY);
    for (i, inertia) in finite.iter().enumerate() {
        let x = i as f64 / (n - 1) as f64;
        let y = (inertia - last) / (first - last);
        let below_chord = (1.0 - x) - y;
        if below_chord > best.1 + 1e-12 {
            best = (i + 1, below_chord);
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blobs() -> Vec<Features> {
        let mut points = Vec::new();
        for (i, centre) in [[0.1, 0.1, 0.1], [0.9, 0.5, 0.2], [0.5, 0.9, 0.9]]
            .iter()
            .enumerate()
        {
            for j in 0..20 {
                let jitter = (j as f64 - 10.0) * 0.002 * (i as f64 + 1.0);
                points.push([
                    centre[0] + jitter,
                    centre[1] - jitter,
                    centre[2] + jitter / 2.0,
                ]);
            }
        }
        points
    }

    #[test]
    fn three_blobs_make_three_clusters() {
        let mut clusters = Clusters::default();
        clusters.fit(&blobs(), 1);
        assert_eq!(clusters.clusters.len(), 3, "{clusters:?}");
        assert_eq!(clusters.clusters.iter().map(|c| c.members).sum::<u32>(), 60);
    }

    #[test]
    fn ids_survive_a_refit_with_more_points() {
        let mut clusters = Clusters::default();
        clusters.fit(&blobs(), 1);
        let before = clusters.place(&[0.9, 0.5, 0.2]).unwrap().cluster;
        let mut more = blobs();
        more.extend(blobs().iter().map(|p| [p[0] + 0.01, p[1], p[2]]));
        clusters.fit(&more, 99);
        assert_eq!(clusters.place(&[0.9, 0.5, 0.2]).unwrap().cluster, before);
    }

    #[test]
    fn uncertainty_rises_with_distance_from_the_centre() {
        let mut clusters = Clusters::default();
        clusters.fit(&blobs(), 1);
        let centre = clusters.clusters[0].centre;
        let mut last = -1.0;
        for step in 0..10 {
            let p = [centre[0] + 0.01 * f64::from(step), centre[1], centre[2]];
            let placed = clusters.place(&p).unwrap();
            if placed.cluster != clusters.clusters[0].id {
                break;
            }
            assert!(placed.uncertainty > last, "{step}: {placed:?}");
            last = placed.uncertainty;
        }
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        let mut clusters = Clusters::default();
        clusters.fit(&[], 0);
        assert!(clusters.place(&[0.5; 3]).is_none());
        clusters.fit(&[[0.5; 3]], 0);
        assert_eq!(clusters.clusters.len(), 1);
        clusters.fit(&[[0.5; 3]; 50], 0);
        assert_eq!(clusters.clusters.len(), 1);
    }

    #[test]
    fn ten_thousand_profiles_cluster() {
        let points: Vec<Features> = (0..10_000)
            .map(|i| {
                let f = f64::from(i);
                [
                    (f * 0.618).fract(),
                    (f * 0.414).fract(),
                    (f * 0.732).fract(),
                ]
            })
            .collect();
        let mut clusters = Clusters::default();
        clusters.fit(&points, 7);
        assert!(!clusters.clusters.is_empty());
        assert_eq!(
            clusters
                .clusters
                .iter()
                .map(|c| c.members as usize)
                .sum::<usize>(),
            10_000
        );
    }

    #[test]
    fn the_knee_of_a_sharp_elbow() {
        assert_eq!(choose_k(&[100.0, 10.0, 9.0, 8.5, 8.0]), 2);
        assert_eq!(choose_k(&[100.0, 60.0, 5.0, 4.0, 3.5]), 3);
        assert_eq!(choose_k(&[5.0, 5.0, 5.0]), 1);
        assert_eq!(choose_k(&[]), 1);
    }
}
