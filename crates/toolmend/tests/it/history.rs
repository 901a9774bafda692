//! history: check, sanitize, trim.
