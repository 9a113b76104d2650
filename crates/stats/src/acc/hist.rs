//! A log-linear latency histogram: fixed memory, ~3% relative error, so
//! percentiles of any number of events cost 2 KiB per histogram.

/// Sub-buckets per power of two.
const SUB: u32 = 16;
const BUCKETS: usize = 64 * SUB as usize;

#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: Box::new([0; BUCKETS]), total: 0, max: 0 }
    }
}

fn bucket(v: u64) -> usize {
    if v < u64::from(SUB) {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= 4
    let mant = (v >> (exp - 4)) & u64::from(SUB - 1);
    ((exp - 3) * SUB) as usize + mant as usize
}

/// The middle of a bucket's range (its representative value).
fn value(b: usize) -> u64 {
    if b < SUB as usize {
        return b as u64;
    }
    let exp = (b / SUB as usize) as u32 + 3;
    let mant = (b % SUB as usize) as u64;
    let lo = (u64::from(SUB) | mant) << (exp - 4);
    lo + (1u64 << (exp - 4)) / 2
}

/// The smallest value of a bucket.
fn low(b: usize) -> u64 {
    if b < SUB as usize {
        return b as u64;
    }
    let exp = (b / SUB as usize) as u32 + 3;
    (u64::from(SUB) | (b % SUB as usize) as u64) << (exp - 4)
}

impl Histogram {
    pub fn add(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
    }

    /// `n` values of about `v` (a summary's histogram slot).
    pub fn add_n(&mut self, v: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.counts[bucket(v)] += n;
        self.total += n;
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0..=1), `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        if rank == self.total {
            return Some(self.max);
        }
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(value(b).min(self.max));
            }
        }
        Some(self.max)
    }

    /// Counts by power of two (see [`crate::acc::calls::pow2_bin`]): bin k
    /// holds [2^(k-1), 2^k). Exact, as every bucket lies within one.
    pub fn pow2(&self) -> [u64; crate::acc::calls::POW2_BINS] {
        let mut out = [0; crate::acc::calls::POW2_BINS];
        for (b, &c) in self.counts.iter().enumerate() {
            if c > 0 {
                out[crate::acc::calls::pow2_bin(low(b))] += c;
            }
        }
        out
    }

    /// How many values are at most `v` (exact to the bucket holding `v`,
    /// counted in when its smallest value is at most `v`).
    pub fn count_at_most(&self, v: u64) -> u64 {
        let last = bucket(v);
        self.counts[..=last.min(BUCKETS - 1)].iter().sum()
    }

    /// The values' sum, each taken as its bucket's middle (~3%).
    pub fn approx_sum(&self) -> u128 {
        self.counts.iter().enumerate().map(|(b, &c)| u128::from(value(b)) * u128::from(c)).sum()
    }

    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.total += o.total;
        self.max = self.max.max(o.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_a_few_percent() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.add(v * 10);
        }
        for (q, want) in [(0.5, 500_000.0), (0.99, 990_000.0), (0.01, 10_000.0)] {
            let got = h.quantile(q).unwrap() as f64;
            assert!((got - want).abs() / want < 0.04, "q{q}: {got} vs {want}");
        }
        assert_eq!(h.max(), 1_000_000);
        assert_eq!(h.quantile(1.0), Some(1_000_000));
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::default();
        for v in [0, 1, 2, 3, 15] {
            h.add(v);
        }
        assert_eq!(h.quantile(0.0), Some(0));
        assert_eq!(h.quantile(0.5), Some(2));
        assert_eq!(h.quantile(1.0), Some(15));
        for v in [16u64, 17, 31, 32, 1 << 40, u64::MAX] {
            let b = bucket(v);
            assert!(b < BUCKETS);
            let r = value(b) as f64;
            assert!((r - v as f64).abs() / (v as f64) < 0.04, "{v} -> {r}");
        }
        assert!(Histogram::default().quantile(0.5).is_none());
    }

    #[test]
    fn pow2_bins_are_exact() {
        let mut h = Histogram::default();
        for v in [0u64, 1, 3, 15, 16, 31, 32, 4095, 4096, 1 << 40, u64::MAX] {
            h.add(v);
        }
        let p = h.pow2();
        let want = |v: u64| crate::acc::calls::pow2_bin(v);
        let mut expect = [0u64; crate::acc::calls::POW2_BINS];
        for v in [0u64, 1, 3, 15, 16, 31, 32, 4095, 4096, 1 << 40, u64::MAX] {
            expect[want(v)] += 1;
        }
        assert_eq!(p, expect);
    }
}
