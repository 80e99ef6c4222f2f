//! One regression tree (CART): every split is the one that leaves the least squared error, among
//! every feature and every threshold halfway between two neighbouring values; a node stops
//! splitting when it holds one row, or rows that all have the same target or the same features.
//!
//! Each node looks at the features in an order drawn from the forest's generator, and keeps the
//! first of equally good splits. On tables like SchedTune's, where the five GPU columns all
//! separate the same GPUs, that spreads the forest's trees over every column (as scikit-learn's
//! and smartcore's do) instead of always asking the same one, which decides where a GPU the forest
//! never saw falls. The draw uses `u64`s only and every sum is taken in the same order, so a tree
//! grown from the same rows and generator is the same tree natively and inside the wasm32
//! component.

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// A grown tree: its nodes, the root first.
#[derive(Debug, Clone)]
pub(super) struct Tree {
    nodes: Vec<Node>,
}

#[derive(Debug, Clone, Copy)]
enum Node {
    /// The mean target of the training rows that reached it.
    Leaf(f64),
    /// Rows whose `feature` is at most `threshold` go to `left`, the others to `right`.
    Split {
        feature: usize,
        threshold: f64,
        left: usize,
        right: usize,
    },
}

/// The best split of one node: where it cuts, and how good it is.
#[derive(Debug, Clone, Copy)]
struct Cut {
    feature: usize,
    threshold: f64,
    /// Rows that go left, in the node's rows sorted by `feature`.
    left_rows: usize,
    /// `Σleft²/n_left + Σright²/n_right`: the larger, the less squared error the split leaves
    /// (the total squared error minus this is what remains).
    gain: f64,
}

impl Tree {
    /// Grows a tree on the rows of `x` and `y` named by `rows` (a bootstrap sample: an index may
    /// repeat). `rows` must not be empty.
    pub(super) fn grow<const N: usize>(
        x: &[[f64; N]],
        y: &[f64],
        rows: &mut [usize],
        rng: &mut Xoshiro256PlusPlus,
    ) -> Self {
        let mut tree = Self { nodes: Vec::new() };
        tree.grow_node(x, y, rows, rng);
        tree
    }

    /// The tree's prediction for `features`.
    pub(super) fn predict<const N: usize>(&self, features: &[f64; N]) -> f64 {
        let mut at = 0;
        loop {
            match self.nodes[at] {
                Node::Leaf(value) => return value,
                Node::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    at = if features[feature] <= threshold {
                        left
                    } else {
                        right
                    }
                }
            }
        }
    }

    /// Adds the subtree for `rows` and returns its node's index.
    fn grow_node<const N: usize>(
        &mut self,
        x: &[[f64; N]],
        y: &[f64],
        rows: &mut [usize],
        rng: &mut Xoshiro256PlusPlus,
    ) -> usize {
        let at = self.nodes.len();
        let mean = rows.iter().map(|&r| y[r]).sum::<f64>() / rows.len() as f64;
        self.nodes.push(Node::Leaf(mean));
        let pure = rows.iter().all(|&r| y[r] == y[rows[0]]);
        if rows.len() < 2 || pure {
            return at;
        }
        let Some(cut) = best_cut(x, y, rows, shuffled::<N>(rng)) else {
            return at;
        };
        sort_by_feature(x, rows, cut.feature);
        let (left_rows, right_rows) = rows.split_at_mut(cut.left_rows);
        let left = self.grow_node(x, y, left_rows, rng);
        let right = self.grow_node(x, y, right_rows, rng);
        self.nodes[at] = Node::Split {
            feature: cut.feature,
            threshold: cut.threshold,
            left,
            right,
        };
        at
    }
}

/// The features `0..N` in an order drawn from `rng` (Fisher–Yates over `u64` draws).
fn shuffled<const N: usize>(rng: &mut Xoshiro256PlusPlus) -> [usize; N] {
    let mut order = std::array::from_fn(|feature| feature);
    for i in (1..N).rev() {
        let j = rng.gen_range(0..=i as u64) as usize;
        order.swap(i, j);
    }
    order
}

/// The split of `rows` that leaves the least squared error, the first in `order` among equally
/// good ones, or `None` when every feature is constant over them.
fn best_cut<const N: usize>(
    x: &[[f64; N]],
    y: &[f64],
    rows: &mut [usize],
    order: [usize; N],
) -> Option<Cut> {
    let n = rows.len();
    let total: f64 = rows.iter().map(|&r| y[r]).sum();
    let mut best: Option<Cut> = None;
    for feature in order {
        sort_by_feature(x, rows, feature);
        let mut left_sum = 0.0;
        for k in 1..n {
            left_sum += y[rows[k - 1]];
            let (below, above) = (x[rows[k - 1]][feature], x[rows[k]][feature]);
            if below == above {
                continue;
            }
            let right_sum = total - left_sum;
            let gain = left_sum * left_sum / k as f64 + right_sum * right_sum / (n - k) as f64;
            // Strictly better only: the first of equally good cuts stays.
            if best.is_none_or(|b| gain > b.gain) {
                best = Some(Cut {
                    feature,
                    threshold: halfway(below, above),
                    left_rows: k,
                    gain,
                });
            }
        }
    }
    best
}

/// Sorts `rows` by one feature, equal values by row index, so the order is one total order.
fn sort_by_feature<const N: usize>(x: &[[f64; N]], rows: &mut [usize], feature: usize) {
    rows.sort_unstable_by(|&a, &b| x[a][feature].total_cmp(&x[b][feature]).then(a.cmp(&b)));
}

/// A threshold between `below < above` that sends `below` left and `above` right, even when the
/// two are neighbouring floats and their midpoint rounds onto `above`.
fn halfway(below: f64, above: f64) -> f64 {
    let mid = below + (above - below) / 2.0;
    if mid < above { mid } else { below }
}

#[cfg(test)]
mod tests {
    use rand_xoshiro::rand_core::SeedableRng;

    use super::*;

    fn grow<const N: usize>(x: &[[f64; N]], y: &[f64]) -> Tree {
        let mut rows: Vec<usize> = (0..x.len()).collect();
        Tree::grow(x, y, &mut rows, &mut Xoshiro256PlusPlus::seed_from_u64(7))
    }

    #[test]
    fn a_tree_reproduces_distinct_training_rows_exactly() {
        let x = [[1.0, 5.0], [2.0, 5.0], [3.0, 1.0], [4.0, 9.0]];
        let y = [10.0, 20.0, 30.0, 40.0];
        let tree = grow(&x, &y);
        for (row, want) in x.iter().zip(y) {
            assert_eq!(tree.predict(row), want);
        }
    }

    #[test]
    fn the_split_with_least_error_is_chosen() {
        // Feature 1 separates the targets perfectly; feature 0 is noise.
        let x = [[3.0, 0.0], [1.0, 0.0], [2.0, 1.0], [0.0, 1.0]];
        let y = [1.0, 1.0, 9.0, 9.0];
        let tree = grow(&x, &y);
        let Node::Split {
            feature, threshold, ..
        } = tree.nodes[0]
        else {
            panic!("no split: {tree:?}");
        };
        assert_eq!((feature, threshold), (1, 0.5));
        assert_eq!(tree.predict(&[100.0, -3.0]), 1.0);
        assert_eq!(tree.predict(&[-100.0, 4.0]), 9.0);
    }

    #[test]
    fn rows_with_the_same_features_end_in_one_leaf_of_their_mean() {
        let x = [[1.0], [1.0], [1.0]];
        let tree = grow(&x, &[1.0, 2.0, 6.0]);
        assert_eq!(tree.nodes.len(), 1);
        assert_eq!(tree.predict(&[7.0]), 3.0);
    }

    #[test]
    fn equally_good_features_are_all_used_across_draws() {
        // Both features separate the rows the same way: which one a node asks is drawn.
        let x = [[0.0, 10.0], [1.0, 11.0]];
        let y = [0.0, 1.0];
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut used = [false; 2];
        for _ in 0..32 {
            let tree = Tree::grow(&x, &y, &mut [0, 1], &mut rng);
            if let Node::Split { feature, .. } = tree.nodes[0] {
                used[feature] = true;
            }
        }
        assert_eq!(used, [true, true]);
    }

    #[test]
    fn neighbouring_floats_still_split() {
        let above = f64::from_bits(1.0f64.to_bits() + 1);
        let x = [[1.0], [above]];
        let tree = grow(&x, &[0.0, 1.0]);
        assert_eq!(tree.predict(&[1.0]), 0.0);
        assert_eq!(tree.predict(&[above]), 1.0);
    }
}
