//! The `clima_artifact!` proc macro (to be written).
