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

/// The rows of a table sorted by each feature, equal values by row index: one total order per
/// feature, computed once per forest. Every tree then partitions these orders instead of
/// sorting each node's rows once per feature (which made training the bundled memory model,
/// six forests of 100 trees, take a large part of an engine call's deadline).
#[derive(Debug, Clone)]
pub(super) struct Presorted<const N: usize> {
    by_feature: [Vec<usize>; N],
}

impl<const N: usize> Presorted<N> {
    /// Sorts the rows of `x` by each feature.
    pub(super) fn new(x: &[[f64; N]]) -> Self {
        Self {
            by_feature: std::array::from_fn(|feature| {
                let mut rows: Vec<usize> = (0..x.len()).collect();
                rows.sort_unstable_by(|&a, &b| {
                    x[a][feature].total_cmp(&x[b][feature]).then(a.cmp(&b))
                });
                rows
            }),
        }
    }
}

/// One row of a node in one feature's order: the row, its value of that feature and its
/// target, side by side so that looking for a split reads memory in order.
#[derive(Debug, Clone, Copy)]
struct Entry {
    row: usize,
    value: f64,
    target: f64,
}

/// A placeholder in the partition's scratch.
const EMPTY: Entry = Entry {
    row: 0,
    value: 0.0,
    target: 0.0,
};

/// What growing one tree works on: the tree's sample sorted by each feature. A node owns the
/// same range `lo..hi` of every column: its rows, in each feature's order.
struct Growth<'a, const N: usize> {
    y: &'a [f64],
    /// The sample as drawn (the root's rows, in the order their sums are taken).
    sample: &'a [usize],
    /// The sample sorted by each feature (value, then row index).
    columns: [Vec<Entry>; N],
    /// Rows of the table going left at the split being applied.
    left: Vec<bool>,
    /// Scratch for partitioning a column, as long as the sample.
    right: Vec<Entry>,
}

impl<const N: usize> Growth<'_, N> {
    /// The targets of the node `lo..hi`, in the order its sums are taken: as drawn at the root,
    /// else sorted by the feature its parent split on.
    fn targets(&self, lo: usize, hi: usize, parent_feature: Option<usize>) -> Vec<f64> {
        match parent_feature {
            None => self.sample.iter().map(|&row| self.y[row]).collect(),
            Some(feature) => self.columns[feature][lo..hi]
                .iter()
                .map(|entry| entry.target)
                .collect(),
        }
    }

    /// Splits every column's range `lo..hi` after `cut`: the rows the cut sends left first,
    /// each side keeping its order.
    fn partition(&mut self, lo: usize, hi: usize, cut: &Cut) {
        let mid = lo + cut.left_rows;
        for entry in &self.columns[cut.feature][lo..mid] {
            self.left[entry.row] = true;
        }
        for feature in (0..N).filter(|&f| f != cut.feature) {
            let column = &mut self.columns[feature];
            // Branch-free: each entry is written to both sides and kept by one (which side is
            // as good as random, and a mispredicted branch per entry cost a third of the time).
            let (mut write, mut kept) = (lo, 0);
            for read in lo..hi {
                let entry = column[read];
                let left = self.left[entry.row];
                column[write] = entry;
                self.right[kept] = entry;
                write += usize::from(left);
                kept += usize::from(!left);
            }
            // Copies of a row have the same features, so they all go the same way.
            debug_assert_eq!(write, mid);
            column[write..hi].copy_from_slice(&self.right[..kept]);
        }
        for entry in &self.columns[cut.feature][lo..mid] {
            self.left[entry.row] = false;
        }
    }
}

impl Tree {
    /// Grows a tree on the rows of `x` and `y` named by `sample` (a bootstrap sample: an index
    /// may repeat), `presorted` being `x`'s rows sorted by each feature. `sample` must not be
    /// empty.
    pub(super) fn grow<const N: usize>(
        x: &[[f64; N]],
        y: &[f64],
        presorted: &Presorted<N>,
        sample: &[usize],
        rng: &mut Xoshiro256PlusPlus,
    ) -> Self {
        let mut copies = vec![0u32; x.len()];
        for &row in sample {
            copies[row] += 1;
        }
        let columns: [Vec<Entry>; N] = std::array::from_fn(|feature| {
            let mut column = Vec::with_capacity(sample.len());
            for &row in &presorted.by_feature[feature] {
                let entry = Entry {
                    row,
                    value: x[row][feature],
                    target: y[row],
                };
                column.extend(std::iter::repeat_n(entry, copies[row] as usize));
            }
            column
        });
        let mut growth = Growth {
            y,
            sample,
            columns,
            left: vec![false; x.len()],
            right: vec![EMPTY; sample.len()],
        };
        let mut tree = Self { nodes: Vec::new() };
        tree.grow_node(&mut growth, 0, sample.len(), None, rng);
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

    /// Adds the subtree for the node `lo..hi` of `growth`'s columns and returns its index.
    fn grow_node<const N: usize>(
        &mut self,
        growth: &mut Growth<'_, N>,
        lo: usize,
        hi: usize,
        parent_feature: Option<usize>,
        rng: &mut Xoshiro256PlusPlus,
    ) -> usize {
        let at = self.nodes.len();
        let targets = growth.targets(lo, hi, parent_feature);
        let total: f64 = targets.iter().sum();
        self.nodes.push(Node::Leaf(total / targets.len() as f64));
        let pure = targets.iter().all(|&t| t == targets[0]);
        if targets.len() < 2 || pure {
            return at;
        }
        let Some(cut) = best_cut(growth, lo, hi, total, shuffled::<N>(rng)) else {
            return at;
        };
        growth.partition(lo, hi, &cut);
        let mid = lo + cut.left_rows;
        let left = self.grow_node(growth, lo, mid, Some(cut.feature), rng);
        let right = self.grow_node(growth, mid, hi, Some(cut.feature), rng);
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

/// The split of the node `lo..hi` (whose targets sum to `total`) that leaves the least squared
/// error, the first in `order` among equally good ones, or `None` when every feature is
/// constant over its rows.
fn best_cut<const N: usize>(
    growth: &Growth<'_, N>,
    lo: usize,
    hi: usize,
    total: f64,
    order: [usize; N],
) -> Option<Cut> {
    let n = hi - lo;
    let mut best: Option<Cut> = None;
    for feature in order {
        let entries = &growth.columns[feature][lo..hi];
        let mut left_sum = 0.0;
        for k in 1..n {
            left_sum += entries[k - 1].target;
            let (below, above) = (entries[k - 1].value, entries[k].value);
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
        let rows: Vec<usize> = (0..x.len()).collect();
        Tree::grow(
            x,
            y,
            &Presorted::new(x),
            &rows,
            &mut Xoshiro256PlusPlus::seed_from_u64(7),
        )
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
            let tree = Tree::grow(&x, &y, &Presorted::new(&x), &[0, 1], &mut rng);
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

    /// The tree as first written: each node sorts its rows by every feature in turn. Growing
    /// from presorted columns must give exactly this tree (same splits, same sums in the same
    /// order), so the forests, the memory guard's margin and every figure built on them stay.
    fn grow_by_sorting<const N: usize>(
        nodes: &mut Vec<Node>,
        x: &[[f64; N]],
        y: &[f64],
        rows: &mut [usize],
        rng: &mut Xoshiro256PlusPlus,
    ) -> usize {
        let sort = |rows: &mut [usize], f: usize| {
            rows.sort_unstable_by(|&a, &b| x[a][f].total_cmp(&x[b][f]).then(a.cmp(&b)));
        };
        let at = nodes.len();
        let total: f64 = rows.iter().map(|&r| y[r]).sum();
        nodes.push(Node::Leaf(total / rows.len() as f64));
        if rows.len() < 2 || rows.iter().all(|&r| y[r] == y[rows[0]]) {
            return at;
        }
        let mut best: Option<Cut> = None;
        for feature in shuffled::<N>(rng) {
            sort(rows, feature);
            let mut left_sum = 0.0;
            for k in 1..rows.len() {
                left_sum += y[rows[k - 1]];
                let (below, above) = (x[rows[k - 1]][feature], x[rows[k]][feature]);
                if below == above {
                    continue;
                }
                let right_sum = total - left_sum;
                let n = rows.len();
                let gain = left_sum * left_sum / k as f64 + right_sum * right_sum / (n - k) as f64;
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
        let Some(cut) = best else {
            return at;
        };
        sort(rows, cut.feature);
        let (left_rows, right_rows) = rows.split_at_mut(cut.left_rows);
        let left = grow_by_sorting(nodes, x, y, left_rows, rng);
        let right = grow_by_sorting(nodes, x, y, right_rows, rng);
        nodes[at] = Node::Split {
            feature: cut.feature,
            threshold: cut.threshold,
            left,
            right,
        };
        at
    }

    fn same_nodes(a: &[Node], b: &[Node]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|pair| match pair {
                (Node::Leaf(p), Node::Leaf(q)) => p.to_bits() == q.to_bits(),
                (
                    Node::Split {
                        feature: f,
                        threshold: t,
                        left: l,
                        right: r,
                    },
                    Node::Split {
                        feature: g,
                        threshold: u,
                        left: m,
                        right: s,
                    },
                ) => f == g && t.to_bits() == u.to_bits() && l == m && r == s,
                _ => false,
            })
    }

    proptest::proptest! {
        #[test]
        fn presorted_growth_is_the_tree_that_sorting_every_node_grows(
            // Few distinct values, so ties within a feature and equally good cuts across
            // features are common; bootstrap samples repeat rows.
            table in proptest::collection::vec(
                (proptest::array::uniform3(0u8..6), 0u8..8), 1..40),
            draws in proptest::collection::vec(0usize..1000, 1..60),
            seed in 0u64..1000,
        ) {
            let x: Vec<[f64; 3]> = table.iter().map(|(f, _)| f.map(f64::from)).collect();
            let y: Vec<f64> = table.iter().map(|&(_, t)| f64::from(t) / 3.0).collect();
            let sample: Vec<usize> = draws.iter().map(|d| d % x.len()).collect();
            let presorted = Tree::grow(
                &x, &y, &Presorted::new(&x), &sample, &mut Xoshiro256PlusPlus::seed_from_u64(seed),
            );
            let mut sorted = Vec::new();
            grow_by_sorting(
                &mut sorted, &x, &y, &mut sample.clone(), &mut Xoshiro256PlusPlus::seed_from_u64(seed),
            );
            proptest::prop_assert!(same_nodes(&presorted.nodes, &sorted), "{presorted:?} != {sorted:?}");
        }
    }
}
