//! What a run recorded with `record --detail summary` counts from its
//! [`IoSummary`](mltrace_log::IoSummary) records.

use mltrace_log::IoSummary;

/// The latency that stands for a histogram slot's calls: the middle of
/// its power of two (768 ns for slot 0, under 1,024 ns).
pub fn slot_value(slot: usize) -> u64 {
    match slot {
        0 => 768,
        s => IoSummary::slot_floor(s) + IoSummary::slot_floor(s) / 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_stand_for_their_middle() {
        assert_eq!(slot_value(1), 1536);
        assert_eq!(slot_value(11), 1_572_864);
        assert!(slot_value(21) >= 1 << 30);
    }
}
