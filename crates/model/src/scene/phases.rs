//! Training phases (epochs, MLLOG blocks) on their own track.

use super::*;

impl Scene<'_> {
    /// Lays out the phases that meet `[from, to)`, nested where they nest,
    /// on lanes of the "Training phases" group, with the run-wide marks
    /// beside them.
    pub(super) fn phases<E: Encoder>(
        &mut self,
        enc: &mut E,
        (from, to): (u64, u64),
        part: Option<&str>,
    ) -> io::Result<()> {
        let run = self.run;
        let meets = |s: u64, e: u64| e >= from && s < to;
        let phases: Vec<usize> =
            (0..run.phases.len()).filter(|&i| meets(run.phases[i].ts, run.phases[i].ts + run.phases[i].dur)).collect();
        let marks: Vec<usize> = (0..run.marks.len()).filter(|&i| meets(run.marks[i].ts, run.marks[i].ts)).collect();
        if phases.is_empty() && marks.is_empty() {
            return Ok(());
        }
        // The group's own row is the first lane, so that it shows the
        // phases collapsed.
        let group = self.out.id();
        let kind = TrackKind::Slices;
        enc.track(&Track { id: group, parent: None, name: PHASES_GROUP, rank: group_rank(PHASES_GROUP), kind })?;
        self.out.groups.insert(PHASES_GROUP.to_string(), group);
        // Each lane holds slices that nest: a stack of the open ones' ends.
        let mut lanes: Vec<(Vec<u64>, TrackId)> = vec![(Vec::new(), group)];
        for &i in &phases {
            let p = &run.phases[i];
            let (s, e, whole) = crate::annotate::clip(p.ts, p.ts + p.dur, (from, to));
            let fits = |stack: &mut Vec<u64>| {
                while stack.last().is_some_and(|&end| end <= s) {
                    stack.pop();
                }
                stack.last().is_none_or(|&end| e <= end)
            };
            let lane = match lanes.iter_mut().position(|(stack, _)| fits(stack)) {
                Some(l) => l,
                None => {
                    let id = self.out.id();
                    enc.track(&Track { id, parent: Some(group), name: "phases", rank: 0, kind: TrackKind::Slices })?;
                    lanes.push((Vec::new(), id));
                    lanes.len() - 1
                }
            };
            lanes[lane].0.push(e);
            let name = labels::phase(&p.name, p.flags);
            let s = Slice {
                track: lanes[lane].1,
                ts: s,
                dur: e - s,
                name: Name::Str(&name),
                flows_out: &[],
                flows_in: &[],
            };
            enc.slice(
                &s,
                &FnArgs(|a: &mut dyn crate::ArgSink| {
                    a.str(ArgKey::PhaseKind, p.kind.name().as_bytes());
                    if p.rank >= 0 {
                        a.int(ArgKey::Rank, i64::from(p.rank));
                    }
                    if let Some(w) = &whole {
                        a.str(ArgKey::Whole, w.as_bytes());
                    }
                }),
            )?;
            self.stats.slices += 1;
        }
        // Which part of the run this file is: a part opens on a stretch of
        // one phase, and says which (also what keeps the phases a group of
        // their own in the UI, not one of its "Global Track Events").
        if let Some(label) = part {
            let id = self.out.id();
            enc.track(&Track { id, parent: Some(group), name: "this file", rank: 2, kind: TrackKind::Slices })?;
            let s = from.max(run.start());
            let e = to.min(run.end()).max(s);
            let slice = Slice { track: id, ts: s, dur: e - s, name: Name::Str(label), flows_out: &[], flows_in: &[] };
            enc.slice(&slice, &NoArgs)?;
            self.stats.slices += 1;
        }
        if !marks.is_empty() {
            let id = self.out.id();
            enc.track(&Track { id, parent: Some(group), name: "events", rank: 1, kind: TrackKind::Slices })?;
            for &i in &marks {
                let m = &run.marks[i];
                let label = labels::mark(&m.name, &m.value);
                enc.instant(id, m.ts, Name::Str(&label), &event::MarkArgs { rank: m.rank, value: &m.value })?;
                self.stats.instants += 1;
            }
        }
        Ok(())
    }
}
