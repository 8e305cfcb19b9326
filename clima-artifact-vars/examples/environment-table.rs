//! Prints the Markdown table of every environment variable (`clima_artifact_vars::markdown_table`),
//! or, given a page, rewrites that page's table in place (the lines from `| variable |` to the
//! last row):
//!
//! ```text
//! cargo run -q -p clima-artifact-vars --example environment-table -- docs/environment.md
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    let table = clima_artifact_vars::markdown_table();
    let Some(path) = std::env::args_os().nth(1) else {
        print!("{table}");
        return ExitCode::SUCCESS;
    };
    let shown = std::path::Path::new(&path).display().to_string();
    let page = match std::fs::read_to_string(&path) {
        Ok(page) => page,
        Err(e) => {
            eprintln!("environment-table: cannot read `{shown}`: {e}");
            return ExitCode::FAILURE;
        }
    };
    let lines: Vec<&str> = page.lines().collect();
    let Some(first) = lines.iter().position(|l| l.starts_with("| variable |")) else {
        eprintln!("environment-table: `{shown}` has no line starting with `| variable |`");
        return ExitCode::FAILURE;
    };
    let rows = lines[first..]
        .iter()
        .take_while(|l| l.starts_with('|'))
        .count();
    let mut out: String = lines[..first].iter().map(|l| format!("{l}\n")).collect();
    out.push_str(&table);
    for line in &lines[first + rows..] {
        out.push_str(line);
        out.push('\n');
    }
    if let Err(e) = std::fs::write(&path, out) {
        eprintln!("environment-table: cannot write `{shown}`: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
