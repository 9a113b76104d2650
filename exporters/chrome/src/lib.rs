//! Chrome trace-event JSON export (work in progress; see issue 6).
