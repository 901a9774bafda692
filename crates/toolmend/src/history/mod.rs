//! History: the pairing invariant providers enforce; check, sanitize, group-preserving trim.
