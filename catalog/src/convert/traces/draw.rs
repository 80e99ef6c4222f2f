//! Seeded random draws that a seed keeps naming: computed from the generator's raw output, not
//! through `rand`'s distributions.

use rand::RngCore;

/// A uniform draw in [0, 1) from the generator's raw output: the top 53 bits of a `u64` as the
/// mantissa. Done by hand rather than through `rand`'s distributions, whose algorithms may
/// change between versions: a seed must keep naming the same trace.
pub(crate) fn unit(rng: &mut impl RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1_u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_draws_stay_in_range() {
        use rand::SeedableRng;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0);
        let draws: Vec<f64> = (0..10_000).map(|_| unit(&mut rng)).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
    }
}
