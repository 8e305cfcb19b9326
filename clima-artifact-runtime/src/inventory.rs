//! Link-time inventory of the artifacts that `clima_artifact!` call sites in this binary can use
//! (specified in full by the macro helper).
