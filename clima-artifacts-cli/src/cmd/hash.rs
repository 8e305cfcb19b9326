//! `hash`: the git tree hash of a folder (and, with `--sha256`, its git tree SHA-256).

use clima_artifact_runtime::tree_hash::Formats;

use crate::args::HashArgs;
use crate::cmd;
use crate::error::CliResult;

/// Entry point of `hash`.
///
/// Prints the git tree SHA-1 alone, or with `--sha256` both hashes as the two lines of a
/// manifest entry (`git-tree-sha1 = "..."`, `git-tree-sha256 = "..."`), from one read of
/// every file. `--json` gives `git_tree_sha1` and, with `--sha256`, `git_tree_sha256`.
pub fn run(args: HashArgs) -> CliResult {
    let dir = cmd::existing_dir(&args.dir, "folder")?;
    let hashes = cmd::hash_dir_in(&dir, Formats::with_sha256(args.sha256))?;
    let sha1 = hashes.sha1.to_hex();
    let sha256 = hashes.sha256.map(|h| h.to_hex());
    if args.json {
        let mut out = serde_json::json!({
            "path": dir,
            "git_tree_sha1": sha1,
        });
        if let Some(sha256) = &sha256 {
            out["git_tree_sha256"] = sha256.as_str().into();
        }
        return cmd::print_json(&out);
    }
    match sha256 {
        Some(sha256) => {
            println!("git-tree-sha1 = \"{sha1}\"");
            println!("git-tree-sha256 = \"{sha256}\"");
        }
        None => println!("{sha1}"),
    }
    Ok(())
}
