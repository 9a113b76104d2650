//! The one naming rule of the Chrome export alone: how a counter track's
//! name is split into an event name and an arg key. Every other name comes
//! from [`mltrace_log::labels`], which the Perfetto export uses too.

/// A Chrome counter event is a name and an arg key, which trace_processor
/// joins with a space into the track name: split the wanted name at its
/// last space so the track reads the same as in the Perfetto export. A
/// single word cannot be split: its key is the unit (`busy %`, `read B/s`),
/// which JSON has no other place for, or `value` as in Chrome's counters.
pub fn counter_parts<'a>(track: &'a str, unit: &'a str) -> (&'a str, &'a str) {
    // A group's own row: `CPU · busy`, or a host's in a merged log:
    // `nodeA · CPU · busy`.
    if let Some((group, what)) = track.rsplit_once(" · ") {
        return (group, what);
    }
    match track.rfind(' ') {
        Some(i) if i > 0 && i + 1 < track.len() => (&track[..i], &track[i + 1..]),
        _ if unit.is_empty() => (track, "value"),
        _ => (track, unit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_names_split_at_the_last_space() {
        assert_eq!(counter_parts("requests in flight", "count"), ("requests in", "flight"));
        assert_eq!(counter_parts("GPU 0 (NVIDIA H100) SM", "%"), ("GPU 0 (NVIDIA H100)", "SM"));
        assert_eq!(counter_parts("Disk vda (254:0) · in flight", "count"), ("Disk vda (254:0)", "in flight"));
        assert_eq!(counter_parts("nodeB · CPU · busy", "%"), ("nodeB · CPU", "busy"));
        assert_eq!(counter_parts("iowait", "%"), ("iowait", "%"));
        assert_eq!(counter_parts("level", ""), ("level", "value"));
        assert_eq!(counter_parts("trailing ", ""), ("trailing ", "value"));
    }
}
