//! The `clima_artifact!` macro: an artifact path checked against `Artifacts.toml` at compile time.

/// The directory of an artifact (or a file or folder inside it), installed on first use.
///
/// ```ignore
/// use clima_artifact_runtime::{clima_artifact, Singleton};
///
/// let era5 = clima_artifact!("era5")?;                    // serial: coordinated by the depot lock
/// let ctx = Singleton;                                   // or an MPI communicator
/// let era5 = clima_artifact!("era5", &ctx)?;              // collective: root installs, all ranks get it
/// let u = clima_artifact!("era5/2008/u.nc", &ctx)?;       // a path inside the artifact (must exist)
/// let name = format!("era{}", 5);
/// let era5 = clima_artifact!(name, &ctx)?;                // a name computed at run time
/// # Ok::<(), clima_artifact_runtime::Error>(())
/// ```
///
/// Evaluates to `Result<PathBuf, `[`Error`](crate::Error)`>`.
///
/// **At compile time** the macro reads `JuliaArtifacts.toml`, else `Artifacts.toml`, in the
/// calling crate's directory (`CARGO_MANIFEST_DIR`), parses and validates it, and embeds what the
/// run time needs (hashes, downloads, `lazy`, platform tags, metadata, the call site) as static
/// data. A literal name that the manifest does not define, a malformed manifest, a missing
/// manifest, and a sub-path with `..` or a leading `/` are compile errors pointing at the name.
/// A name that is not a literal is checked at run time against the whole embedded manifest.
///
/// **Rebuilds.** Each expansion includes the manifest with `include_bytes!`, so editing it
/// recompiles the crates that use it. Two cases only a build script can cover: creating a
/// `JuliaArtifacts.toml` next to an existing `Artifacts.toml` (it takes precedence), and creating
/// the manifest after a build failed because it was missing. Call
/// `clima_artifact_build::validate()` from `build.rs` for both (it emits `rerun-if-changed`).
///
/// **At run time** the first call selects the host's platform variant, installs it
/// ([`ensure_variant`](crate::ensure_variant), or
/// [`ensure_collective`](crate::ensure_collective) with a context), checks the
/// sub-path exists, and records the access in the provenance [`access_log`](crate::access_log). Later
/// calls for the same artifact are answered from memory (no file-system work) and recorded too.
/// Every call site is listed by [`inventory::declared_artifacts`](crate::inventory::declared_artifacts).
///
/// # Calls with a context are COLLECTIVE, and the in-memory cache keeps them so
///
/// `clima_artifact!(.., &ctx)` is a collective operation over `ctx`: **every rank of `ctx` makes
/// the call, for the same artifact, in the same order** (see [`Context`](crate::Context)). To
/// keep repeated calls cheap, the answer is remembered in memory, and a later call is answered
/// from memory **without any communication** only when every rank is guaranteed to do the same:
///
/// | the call | answered from memory when |
/// |---|---|
/// | no context, or a one-rank context ([`Singleton`](crate::Singleton)) | this process resolved the artifact before, by any call |
/// | a context of several ranks | this process resolved the artifact before **in a collective call on the same communicator** ([`Context::communicator_id`](crate::Context::communicator_id)) |
/// | a context of several ranks with no `communicator_id` (the trait's default) | never: every call runs the collective protocol |
///
/// A collective call succeeds on every rank of its communicator or on none, so the second rule
/// has the same answer on every rank: either all ranks skip the protocol or all take part. In
/// particular a rank that already resolved the artifact **without** a context (or on another
/// communicator, e.g. a node split) still takes part in the next collective call, so its peers
/// are not left waiting. Consequences:
///
/// - Repeated collective calls on the same communicator (a loop, several call sites, a run-time
///   name) cost one collective round the first time, then a memory lookup; after that first
///   round, ranks may even make different numbers of such calls.
/// - `MpiContext` has an id (`MPI_COMM_WORLD` the same for every wrapper, any other communicator
///   its own). A context of your own gets the fast path by implementing
///   [`Context::communicator_id`](crate::Context::communicator_id) as its docs say.
///
/// The expansion names only `$crate::__private`, `::core` and `::std`, so the macro works when
/// the runtime crate is renamed in `Cargo.toml` or re-exported by another crate.
#[macro_export]
macro_rules! clima_artifact {
    ($($args:tt)*) => {
        $crate::__private::clima_artifact_impl! { ($crate) $($args)* }
    };
}

/// Sets the [`Config`](crate::Config) that `clima_artifact!` and
/// [`inventory::prefetch_declared`](crate::inventory::prefetch_declared) use in this process,
/// instead of reading `CLIMA_ARTIFACTS_*` environment variables. Call it before the first
/// `clima_artifact!` call; it can be set once (a second call returns the rejected config).
pub fn set_macro_config(config: crate::Config) -> Result<(), Box<crate::Config>> {
    crate::resolve::set_config(config)
}
