//! The machine's network interfaces in `stats --json`.

use serde_json::{json, Value};

use crate::acc::network::NetStats;

impl NetStats {
    pub fn to_json(&self) -> Value {
        let r = |v: f64| v.round() as u64;
        json!({
            "name": self.label(),
            "kind": self.kind(),
            "rx_bytes": r(self.totals[0]),
            "tx_bytes": r(self.totals[1]),
            "rx_packets": r(self.totals[2]),
            "tx_packets": r(self.totals[3]),
            "rx_peak_bytes_per_s": r(self.peaks[0]),
            "tx_peak_bytes_per_s": r(self.peaks[1]),
            "samples": self.samples,
        })
    }
}
