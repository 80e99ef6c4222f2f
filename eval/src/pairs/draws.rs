//! Everything random in `eval pairs`: one Xoshiro256++ stream per purpose, seeded by `--seed`,
//! so adding a method or a protocol does not shift another's draws.

use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::bench::Bench;

/// The independent random streams of one evaluation.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stream {
    /// Which job types each queue holds, and their order.
    Queues = 1,
    /// Which measured pairs are observed.
    Split = 2,
    /// The `random` method's matchings.
    RandomPairing = 3,
    /// The id-keying secret.
    Keys = 4,
    /// Each job's length in the mixed-duration protocol.
    Lengths = 5,
}

/// The generator of one stream for `seed`.
pub(crate) fn rng(seed: u64, stream: Stream) -> Xoshiro256PlusPlus {
    // `seed_from_u64` expands through SplitMix64, so nearby inputs give unrelated streams.
    Xoshiro256PlusPlus::seed_from_u64(seed ^ (stream as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Number of pairs observed for a training share: the share of all, rounded to the nearest.
pub(crate) fn training_count(share: f64, pairs: usize) -> usize {
    ((share * pairs as f64).round() as usize).min(pairs)
}

/// `count` queues of `size` distinct job types each, drawn without replacement, in a random
/// order (the order is the queue's submission order).
pub(crate) fn draw_queues(bench: &Bench, count: u32, size: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = rng(seed, Stream::Queues);
    (0..count)
        .map(|_| {
            let mut types: Vec<usize> = (0..bench.types.len()).collect();
            types.shuffle(&mut rng);
            types.truncate(size);
            types
        })
        .collect()
}

/// The id-keying secret, derived from the seed. Keyed ids still hide every name from the
/// engine; deriving the secret (rather than drawing it from the OS) keeps the engine's inputs,
/// and so any tie it breaks by id, the same from run to run.
pub(crate) fn key_secret(seed: u64) -> Vec<u8> {
    let mut secret = vec![0_u8; 32];
    rng(seed, Stream::Keys).fill(secret.as_mut_slice());
    secret
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_counts_round_and_stay_within_the_pairs() {
        assert_eq!(training_count(0.5, 306), 153);
        assert_eq!(training_count(0.1, 306), 31);
        assert_eq!(training_count(0.0, 306), 0);
        assert_eq!(training_count(1.0, 306), 306);
        assert_eq!(training_count(0.9, 0), 0);
    }

    #[test]
    fn streams_are_reproducible_and_distinct() {
        assert_eq!(key_secret(7), key_secret(7));
        assert_ne!(key_secret(7), key_secret(8));
        let mut a = rng(7, Stream::Queues);
        let mut b = rng(7, Stream::Split);
        let draws =
            |r: &mut Xoshiro256PlusPlus| (0..4).map(|_| r.r#gen::<u64>()).collect::<Vec<_>>();
        assert_ne!(draws(&mut a), draws(&mut b));
    }
}
