//! build.rs helper (to be written).
