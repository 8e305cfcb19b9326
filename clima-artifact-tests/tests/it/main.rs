//! The integration tests of clima-artifacts in one test binary (one link of the runtime instead
//! of one per file), one module per area.
//!
//! Four tests stay in binaries of their own, next to this folder, because they depend on
//! process-wide state that a shared binary would mix up:
//! - `macro_runtime`, `macro_prefetch` and `provenance_end_to_end` each set the macro's depot
//!   configuration (`set_macro_config`, once per process), and `macro_prefetch` asserts on the
//!   set of `clima_artifact!` call sites linked into its binary;
//! - `provenance_registry` clears the process-wide access log before each of its tests.
//!
//! Nothing here may touch that state; tests in this binary run in parallel with each other.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario; the 100-line rule (issue 36) is for non-test code"
)]

mod bad_inputs;
mod ci_scripts;
mod concurrency;
mod crash;
mod deps;
mod disk;
mod docs;
mod file_sizes;
mod hostile_depot;
mod hostile_redirects;
mod hostile_servers;
mod hostile_tarballs;
mod independent_processes;
mod install_api;
mod install_basic;
mod install_overrides;
mod install_sha256;
mod invenio_server;
mod julia_interop;
mod julia_pidlock;
mod literals;
mod macro_renamed_dep;
mod manifest_corpus;
mod modules;
mod mpi;
mod network_faults;
mod notices;
mod package_server;
mod parallel;
mod provenance_golden;
mod proxies;
mod resume;
mod review_regressions;
mod seekable;
mod seekable_changed;
mod seekable_hostile;
mod seekable_partial;
mod size_policy;
mod tls_trust;
mod tree_hash_git;
mod ui;
