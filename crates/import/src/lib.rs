//! Importers: old text traces into mltrace logs (work in progress; see issue 6).
