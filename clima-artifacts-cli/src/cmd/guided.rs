//! `create --guided`: asks for each setting on stdout and reads one answer per line from stdin,
//! so it works at a terminal and with answers piped in by a script. An empty answer takes the
//! default shown in brackets; end of input takes the defaults of every remaining question (and
//! fails on a question that has none). Invalid answers are explained and asked again.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use crate::args::CreateArgs;
use crate::cmd::invalid_name;
use crate::cmd::plan::{MetadataArgs, Plan};
use crate::error::{CliError, CliResult};

struct Prompter<'a> {
    input: &'a mut dyn BufRead,
    output: &'a mut dyn Write,
    eof: bool,
}

impl Prompter<'_> {
    fn say(&mut self, text: &str) -> CliResult {
        writeln!(self.output, "{text}")
            .and_then(|()| self.output.flush())
            .map_err(|e| CliError::failure(format!("cannot write to stdout: {e}")))
    }

    /// Asks once; `None` at end of input.
    fn line(&mut self, question: &str, default: Option<&str>) -> CliResult<Option<String>> {
        let shown = match default {
            Some(d) if !d.is_empty() => format!("{question} [{d}]: "),
            _ => format!("{question}: "),
        };
        write!(self.output, "{shown}")
            .and_then(|()| self.output.flush())
            .map_err(|e| CliError::failure(format!("cannot write to stdout: {e}")))?;
        if self.eof {
            writeln!(self.output).ok();
            return Ok(None);
        }
        let mut answer = String::new();
        let n = self
            .input
            .read_line(&mut answer)
            .map_err(|e| CliError::failure(format!("cannot read the answer from stdin: {e}")))?;
        if n == 0 {
            self.eof = true;
            writeln!(self.output).ok();
            return Ok(None);
        }
        Ok(Some(answer.trim().to_string()))
    }

    /// Asks until `check` accepts; empty answer or end of input -> default.
    fn ask(
        &mut self,
        question: &str,
        default: Option<String>,
        check: &dyn Fn(&str) -> Result<(), String>,
    ) -> CliResult<String> {
        loop {
            let answer = self.line(question, default.as_deref())?;
            let value = match (answer, &default) {
                (Some(a), _) if !a.is_empty() => a,
                (_, Some(d)) => d.clone(),
                (None, None) => {
                    return Err(CliError::usage(format!(
                        "stdin ended before `{question}` was answered (it has no default)"
                    )));
                }
                (Some(_), None) => {
                    self.say("  an answer is required")?;
                    continue;
                }
            };
            match check(&value) {
                Ok(()) => return Ok(value),
                Err(why) if self.eof => {
                    return Err(CliError::usage(format!("`{question}`: {why}")));
                }
                Err(why) => self.say(&format!("  {why}; try again"))?,
            }
        }
    }

    /// Optional free text: empty means none.
    fn optional(&mut self, question: &str, default: Option<String>) -> CliResult<Option<String>> {
        let answer = self.line(question, default.as_deref())?;
        Ok(match answer {
            Some(a) if !a.is_empty() => Some(a),
            _ => default.filter(|d| !d.is_empty()),
        })
    }

    fn yes_no(&mut self, question: &str, default: bool) -> CliResult<bool> {
        loop {
            let shown = if default { "Y/n" } else { "y/N" };
            let answer = self.line(&format!("{question} ({shown})"), None)?;
            match answer.as_deref().map(str::to_ascii_lowercase).as_deref() {
                None | Some("") => return Ok(default),
                Some("y" | "yes") => return Ok(true),
                Some("n" | "no") => return Ok(false),
                Some(_) => self.say("  please answer y or n")?,
            }
        }
    }
}

fn check_dir(s: &str) -> Result<(), String> {
    match std::fs::metadata(s) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!("`{s}` is not a folder")),
        Err(e) => Err(format!("`{s}` cannot be used: {e}")),
    }
}

fn check_name(s: &str) -> Result<(), String> {
    invalid_name(s).map_or(Ok(()), |why| Err(why.to_string()))
}

fn check_url(s: &str) -> Result<(), String> {
    if s.contains(char::is_whitespace) {
        Err("a URL has no spaces".to_string())
    } else {
        Ok(())
    }
}

/// Walks through the settings of `create`, starting from whatever flags were given.
/// With `from_recipe` (`create --guided --recipe`), the content is the recipe's output: the
/// content folder and "external" are not asked for (`args.dir` is the recipe folder).
pub fn ask(
    args: CreateArgs,
    from_recipe: bool,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> CliResult<Plan> {
    let mut p = Prompter {
        input,
        output,
        eof: false,
    };
    p.say("Creating an artifact. Press Enter to accept the value in [brackets].")?;
    let given = MetadataArgs::from_args(&args);
    let dir = match (&args.dir, from_recipe) {
        (Some(d), true) => d.display().to_string(),
        _ => p.ask(
            "Folder with the artifact's content",
            args.dir.as_ref().map(|d| d.display().to_string()),
            &check_dir,
        )?,
    };
    let suggested_name = args.name.clone().or_else(|| {
        std::fs::canonicalize(&dir).ok().and_then(|d| {
            d.file_name()
                .map(|n| n.to_string_lossy().replace(char::is_whitespace, "_"))
                .filter(|n| invalid_name(n).is_none())
        })
    });
    let name = p.ask("Artifact name", suggested_name, &check_name)?;
    let manifest = p.ask(
        "Manifest to add it to",
        Some(
            args.manifest
                .map(|m| m.display().to_string())
                .unwrap_or_else(|| "Artifacts.toml".to_string()),
        ),
        &|_| Ok(()),
    )?;
    let external = !from_recipe
        && p.yes_no(
            "Too large to distribute (external: no tarball, admins add an override)?",
            args.external,
        )?;
    let lazy = p.yes_no("Install only when first used (lazy)?", args.lazy)?;
    let metadata = p.ask_metadata(given)?;

    let mut url = None;
    let mut tarball_out = None;
    if !external {
        let out = p.ask(
            "Where to write the tarball",
            Some(
                args.tarball_out
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|| format!("{name}.tar.gz")),
            ),
            &|_| Ok(()),
        )?;
        let file_name = PathBuf::from(&out)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| format!("{name}.tar.gz"));
        let answer = p.optional(
            "URL the tarball will be downloadable from (ending in / adds the file name; empty: decide later)",
            args.url,
        )?;
        if let Some(u) = answer {
            if let Err(why) = check_url(&u) {
                return Err(CliError::usage(format!("invalid URL `{u}`: {why}")));
            }
            url = Some(if u.ends_with('/') {
                format!("{u}{file_name}")
            } else {
                u
            });
        }
        tarball_out = Some(PathBuf::from(out));
    }

    let plan = Plan {
        dir: PathBuf::from(dir),
        name,
        manifest: PathBuf::from(manifest),
        url,
        tarball_out,
        classic: args.classic,
        lazy,
        external,
        metadata: metadata.entries(),
        json: args.json,
        recipe: None,
    };
    p.show_plan(&plan, from_recipe)?;
    if !p.yes_no("Proceed?", true)? {
        return Err(CliError::failure("cancelled; nothing was written"));
    }
    Ok(plan)
}

impl Prompter<'_> {
    /// The provenance questions of [`ask`], in the order they are asked (`given`: the flags'
    /// values, offered as defaults).
    fn ask_metadata(&mut self, given: MetadataArgs) -> CliResult<MetadataArgs> {
        let description = self.optional("One-line description (empty: none)", given.description)?;
        let license = self.optional(
            "License, as an SPDX expression like CC-BY-4.0 (empty: none)",
            given.license,
        )?;
        let citation = self.optional("Citation (empty: none)", given.citation)?;
        let doi = self.optional(
            "DOI, like 10.5194/essd-13-4349-2021 (empty: none)",
            given.doi,
        )?;
        if doi.as_deref().is_some_and(|d| !d.starts_with("10.")) {
            self.say("  note: DOIs start with `10.`; keeping the answer as written")?;
        }
        let version = self.optional(
            "The dataset's own version or release, like v2.1 (empty: none)",
            given.version,
        )?;
        let acknowledgement = self.optional(
            "Acknowledgement text for papers that use it (empty: none)",
            given.acknowledgement,
        )?;
        let source = self.optional("URL of the original data (empty: none)", given.source)?;
        let maintainer = self.optional(
            "Maintainer: who to contact about it (empty: none)",
            given.maintainer,
        )?;
        Ok(MetadataArgs {
            description,
            version,
            license,
            acknowledgement,
            citation,
            doi,
            source,
            maintainer,
        })
    }

    /// The summary of `plan` shown before "Proceed?" (`from_recipe`: its folder is the recipe's).
    fn show_plan(&mut self, plan: &Plan, from_recipe: bool) -> CliResult<()> {
        self.say("")?;
        if from_recipe {
            self.say(&format!("  recipe    {}", plan.dir.display()))?;
        } else {
            self.say(&format!("  folder    {}", plan.dir.display()))?;
        }
        self.say(&format!("  name      {}", plan.name))?;
        self.say(&format!("  manifest  {}", plan.manifest.display()))?;
        if let Some(t) = &plan.tarball_out {
            self.say(&format!("  tarball   {}", t.display()))?;
        }
        if let Some(u) = &plan.url {
            self.say(&format!("  url       {u}"))?;
        }
        for (k, v) in &plan.metadata {
            self.say(&format!("  {k:<9} {}", clima_artifact_fs::printable(v)))?;
        }
        Ok(())
    }
}
