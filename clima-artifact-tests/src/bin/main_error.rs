//! A model's `main` as a newcomer writes it: `fn main() -> Result<(), Box<dyn Error>>` and `?`.
//! When the artifact cannot be had, Rust prints the error's `Debug` form after `Error: `; the
//! test `install_api::main_returning_an_error_prints_a_readable_message` checks that it reads
//! as a message, not a struct dump.
//!
//! ```text
//! main_error <Artifacts.toml> <name[/sub/path]>
//! ```

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(manifest), Some(spec)) = (args.next(), args.next()) else {
        return Err("usage: main_error <Artifacts.toml> <name[/sub/path]>".into());
    };
    let artifacts = clima_artifact_runtime::Artifacts::load(manifest)?;
    let path = artifacts.ensure_installed(&spec)?;
    println!("{}", path.display());
    Ok(())
}
