//! `record --detail summary`: the threads' sum slots the kernel sends,
//! handed to [`crate::summary::Summaries`] (which takes them per second).

use std::mem::size_of;

use mltrace_log::IoSummary;

use crate::skel::types::sum_slot;

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[super::Event {
    kind: IoSummary::CODE,
    min: size_of::<sum_slot>(),
    commands_io: false,
    decode: |d, _, b, _| d.sums.extend(crate::summary::SlotSum::parse(b)),
}];
