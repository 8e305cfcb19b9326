//! `hash`: the git tree hash of a folder.

use crate::args::HashArgs;
use crate::cmd;
use crate::error::CliResult;

/// Entry point of `hash`.
pub fn run(args: HashArgs) -> CliResult {
    let dir = cmd::existing_dir(&args.dir, "folder")?;
    let hash = cmd::hash_dir(&dir)?;
    if args.json {
        return cmd::print_json(&serde_json::json!({
            "path": dir,
            "git_tree_sha1": hash.to_hex(),
        }));
    }
    println!("{hash}");
    Ok(())
}
