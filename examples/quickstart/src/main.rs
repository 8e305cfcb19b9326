//! Quickstart model (to be written).
fn main() {}
