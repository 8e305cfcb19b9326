//! The `clima-artifacts` command-line tool (to be written).
fn main() {}
