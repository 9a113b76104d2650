//! Judgement: what the accumulated tables mean (the verdict, the
//! suggestions, the ranks' stragglers, the figures two runs are compared
//! by). Uses the accumulation ([`crate::acc`]), never the presentation
//! ([`crate::show`]).

pub mod diff;
pub(crate) mod glob;
pub mod ranks;
pub mod step_waits;
pub mod suggest;
pub(crate) mod verdict;
