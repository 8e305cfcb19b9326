//! Provenance metadata keys recognised in artifact entries (Julia ignores extra keys in table
//! entries, so these are compatible). Filled in by the provenance work.
