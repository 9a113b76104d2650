//! Presentation: `stats` as text and as JSON, from the accumulated
//! tables ([`crate::acc`]) and the judgement ([`crate::judge`]).

pub(crate) mod async_io;
pub(crate) mod diff;
pub(crate) mod hosts;
pub(crate) mod json;
pub(crate) mod network;
pub(crate) mod python_lines;
pub(crate) mod ranks;
pub(crate) mod render;
pub(crate) mod render_maps;
pub(crate) mod tables;
pub(crate) mod verdict;
