//! Tests of the build-script core: directives are captured from a `Vec<u8>`.

use super::*;

const H1: &str = "b373f1887cff55850cbf76ec005f7d93726ae42e";
const S1: &str = "750ead63910729c349beaed2a5db79903cbf3a982d0e0578e02994b1e7191c48";

fn env(vars: &[(&str, String)]) -> impl Fn(&str) -> Option<String> + use<> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

fn run(builder: &Builder, vars: &[(&str, String)]) -> (Result<Validated, BuildError>, Vec<String>) {
    let mut out = Vec::new();
    let result = builder.run_with(&env(vars), &mut out);
    let lines = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    (result, lines)
}

fn good_manifest() -> String {
    format!(
        "[era5]\ngit-tree-sha1 = \"{H1}\"\nlicense = \"CC-BY-4.0\"\ncitation = \"Hersbach 2020\"\n\
         source = \"https://cds.climate.copernicus.eu\"\n\
         [[era5.download]]\nurl = \"https://x/era5.tar.gz\"\nsha256 = \"{S1}\"\n"
    )
}

fn dir_var(dir: &Path) -> (&'static str, String) {
    ("CARGO_MANIFEST_DIR", dir.display().to_string())
}

#[test]
fn clean_manifest_prints_rerun_directives_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Artifacts.toml"), good_manifest()).unwrap();
    let (result, lines) = run(&Builder::new().watch_absent(true), &[dir_var(dir.path())]);
    let v = result.unwrap();
    assert!(v.warnings.is_empty());
    assert_eq!(v.manifest.names().collect::<Vec<_>>(), ["era5"]);
    let d = dir.path().display();
    assert_eq!(
        lines,
        [
            format!("cargo:rerun-if-changed={d}/JuliaArtifacts.toml"),
            format!("cargo:rerun-if-changed={d}/Artifacts.toml"),
            "cargo:rerun-if-env-changed=CLIMA_ARTIFACTS_DEPOT_PATH".to_owned(),
            "cargo:rerun-if-env-changed=CLIMA_ARTIFACTS_PLATFORM_TAGS".to_owned(),
            "cargo:rerun-if-env-changed=XDG_CACHE_HOME".to_owned(),
            "cargo:rerun-if-env-changed=CLIMA_ARTIFACTS_BUILD_DENY_WARNINGS".to_owned(),
        ]
    );
}

#[test]
fn by_default_only_existing_candidates_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let builder = Builder::new();
    // Neither exists: both are listed, so creating either reruns the (failing) script.
    let (_, lines) = run(&builder, &[dir_var(dir.path())]);
    let reruns = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.starts_with("cargo:rerun-if-changed="))
            .count()
    };
    assert_eq!(reruns(&lines), 2);
    std::fs::write(dir.path().join("Artifacts.toml"), good_manifest()).unwrap();
    let (result, lines) = run(&builder, &[dir_var(dir.path())]);
    result.unwrap();
    assert_eq!(reruns(&lines), 1);
    assert_eq!(
        lines[0],
        format!(
            "cargo:rerun-if-changed={}",
            dir.path().join("Artifacts.toml").display()
        )
    );
}

#[test]
fn warnings_become_cargo_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("JuliaArtifacts.toml");
    std::fs::write(
        &path,
        format!(
            "[needs_override]\ngit-tree-sha1 = \"{H1}\"\nlicense = \"MIT\"\ncitation = \"c\"\n"
        ),
    )
    .unwrap();
    // The Julia name wins over Artifacts.toml.
    std::fs::write(dir.path().join("Artifacts.toml"), good_manifest()).unwrap();
    let (result, lines) = run(
        &Builder::new(),
        &[
            dir_var(dir.path()),
            ("CLIMA_ARTIFACTS_DEPOT_PATH", "/shared/depot:/other".into()),
        ],
    );
    let v = result.unwrap();
    assert_eq!(v.warnings.len(), 1);
    let warnings: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("cargo:warning="))
        .collect();
    assert_eq!(
        warnings,
        [&format!(
            "cargo:warning={}:1: artifact `needs_override`: has no download section, so it must \
             come from an override: add the line `{H1} = \"/absolute/path/to/needs_override\"` to \
             `/shared/depot/artifacts/Overrides.toml` (or add a `[[needs_override.download]]` \
             section with `url` and `sha256`)",
            path.display()
        )]
    );

    // Denied, by option or by environment variable.
    let (result, _) = run(&Builder::new().deny_warnings(true), &[dir_var(dir.path())]);
    let e = result.unwrap_err();
    assert!(
        matches!(e, BuildError::DeniedWarnings { count: 1, .. }),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("has 1 warning(s) and warnings are denied")
    );
    let (result, _) = run(
        &Builder::new(),
        &[dir_var(dir.path()), (DENY_WARNINGS_ENV, "1".into())],
    );
    assert!(matches!(result, Err(BuildError::DeniedWarnings { .. })));
    let (result, _) = run(
        &Builder::new(),
        &[dir_var(dir.path()), (DENY_WARNINGS_ENV, "0".into())],
    );
    assert!(result.is_ok());
}

#[test]
fn errors_are_all_reported_with_positions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("Artifacts.toml");
    std::fs::write(
        &path,
        format!("[a]\nlazy = true\n[b]\ngit-tree-sha1 = \"{}\"\n", &H1[..39]),
    )
    .unwrap();
    let (result, lines) = run(&Builder::new(), &[dir_var(dir.path())]);
    let e = result.unwrap_err();
    let BuildError::Manifest(errors) = &e else {
        panic!("{e}")
    };
    assert_eq!(errors.len(), 2);
    let p = path.display();
    let warnings: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("cargo:warning="))
        .collect();
    assert_eq!(warnings.len(), 2);
    assert!(
        warnings[0].starts_with(&format!(
            "cargo:warning=error: `{p}`:1:1: artifact `a`: missing `git-tree-sha1`"
        )),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].starts_with(&format!(
            "cargo:warning=error: `{p}`:4:17: artifact `b`: `git-tree-sha1` is not a valid hash"
        )),
        "{}",
        warnings[1]
    );
    let shown = e.to_string();
    assert!(
        shown.starts_with("2 error(s) in the artifacts manifest:\n  `"),
        "{shown}"
    );
    // The rerun directives come first, so fixing the file reruns the script.
    assert!(lines[0].starts_with("cargo:rerun-if-changed="));
}

#[test]
fn missing_manifest_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let (result, lines) = run(&Builder::new(), &[dir_var(dir.path())]);
    let e = result.unwrap_err().to_string();
    assert!(
        e.contains("no JuliaArtifacts.toml or Artifacts.toml found"),
        "{e}"
    );
    assert!(e.contains(&dir.path().join("Artifacts.toml").display().to_string()));
    assert!(lines.iter().any(|l| l.starts_with("cargo:warning=error: ")));
    // Still asks to be rerun when either file appears.
    assert!(lines.contains(&format!(
        "cargo:rerun-if-changed={}",
        dir.path().join("Artifacts.toml").display()
    )));

    let (result, lines) = run(&Builder::new(), &[]);
    assert!(matches!(result, Err(BuildError::NoManifestDir)));
    assert!(lines.is_empty());
}

#[test]
fn explicit_path_and_dir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/Custom.toml"), good_manifest()).unwrap();
    let (result, lines) = run(
        &Builder::new()
            .manifest_dir(dir.path())
            .manifest_path("data/Custom.toml"),
        &[],
    );
    assert_eq!(
        result.unwrap().manifest.path,
        dir.path().join("data/Custom.toml")
    );
    assert!(lines.contains(&format!(
        "cargo:rerun-if-changed={}",
        dir.path().join("data/Custom.toml").display()
    )));
}

#[test]
fn writes_constants_into_out_dir() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}\n[\"clm_data_0.9x1.25\"]\ngit-tree-sha1 = \"{H1}\"\nlazy = true\n\
         [[type]]\nos = \"linux\"\narch = \"x86_64\"\ngit-tree-sha1 = \"{H1}\"\n\
         [\"9lives\"]\ngit-tree-sha1 = \"{H1}\"\n",
        good_manifest()
    );
    std::fs::write(dir.path().join("Artifacts.toml"), text).unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let (result, _) = run(
        &Builder::new().constants("artifacts.rs"),
        &[
            dir_var(dir.path()),
            ("OUT_DIR", out_dir.path().display().to_string()),
        ],
    );
    let target = result.unwrap().constants.unwrap();
    let code = std::fs::read_to_string(&target).unwrap();
    assert!(
        code.contains(
            "pub const ALL: &[&str] = &[\"era5\", \"clm_data_0.9x1.25\", \"type\", \"9lives\"];"
        ),
        "{code}"
    );
    assert!(code.contains("pub mod clm_data_0_9x1_25 {"));
    assert!(code.contains("pub const NAME: &str = \"clm_data_0.9x1.25\";"));
    assert!(code.contains("pub const LAZY: bool = true;"));
    assert!(code.contains(&format!("pub const GIT_TREE_SHA1: &str = \"{H1}\";")));
    assert!(code.contains("pub mod type_ {"));
    assert!(code.contains("pub const PLATFORM_VARIANTS: usize = 1;"));
    assert!(code.contains("pub mod _9lives {"));

    // Without OUT_DIR it is an error, not a panic.
    let (result, _) = run(
        &Builder::new().constants("artifacts.rs"),
        &[dir_var(dir.path())],
    );
    assert!(
        result
            .unwrap_err()
            .to_string()
            .contains("OUT_DIR is not set")
    );
}

#[test]
fn recipes_are_listed_and_downloads_without_recipe_or_source_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let entry = |name: &str, extra: &str| {
        format!(
            "[{name}]\ngit-tree-sha1 = \"{H1}\"\nlicense = \"CC0-1.0\"\ncitation = \"x\"\n{extra}\
             [[{name}.download]]\nurl = \"https://x/{name}.tar.gz\"\nsha256 = \"{S1}\"\n"
        )
    };
    let text = [
        entry("made", "recipe = \"artifacts/made\"\n"),
        entry("broken-recipe", "recipe = \"artifacts/gone\"\n"),
        entry("sourced", "source = \"https://origin\"\n"),
        entry("unexplained", ""),
    ]
    .concat();
    std::fs::write(dir.path().join("Artifacts.toml"), text).unwrap();
    let made = dir.path().join("artifacts/made");
    std::fs::create_dir_all(&made).unwrap();
    std::fs::write(made.join("recipe"), "#!/bin/sh\n").unwrap();
    std::fs::write(made.join("README.md"), "# made\n").unwrap();
    let (result, lines) = run(&Builder::new(), &[dir_var(dir.path())]);
    let v = result.unwrap();
    let names: Vec<&str> = v.recipes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["made", "broken-recipe"]);
    assert_eq!(v.recipes[0].1, made);
    let about = |name: &str| {
        v.warnings
            .iter()
            .filter(|w| w.artifact.as_deref() == Some(name))
            .map(|w| w.message.clone())
            .collect::<Vec<_>>()
    };
    assert!(about("made").is_empty(), "{:?}", about("made"));
    assert!(about("sourced").is_empty(), "{:?}", about("sourced"));
    let broken = about("broken-recipe");
    assert!(
        broken.len() == 1 && broken[0].contains("which has no `recipe` or `README.md`"),
        "{broken:?}"
    );
    let unexplained = about("unexplained");
    assert!(
        unexplained.len() == 1
            && unexplained[0].contains("neither a `recipe` nor a `source` key")
            && unexplained[0].contains("clima-artifacts new unexplained"),
        "{unexplained:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("cargo:warning=") && l.contains("artifact `unexplained`")),
        "{lines:?}"
    );

    let out_dir = tempfile::tempdir().unwrap();
    let (result, _) = run(
        &Builder::new().constants("artifacts.rs"),
        &[
            dir_var(dir.path()),
            ("OUT_DIR", out_dir.path().display().to_string()),
        ],
    );
    let code = std::fs::read_to_string(result.unwrap().constants.unwrap()).unwrap();
    assert!(
        code.contains("pub const RECIPE: Option<&str> = Some(\"artifacts/made\");"),
        "{code}"
    );
    assert!(
        code.contains("pub const RECIPE: Option<&str> = None;"),
        "{code}"
    );
}

#[test]
fn identifiers() {
    assert_eq!(rust_ident("era5"), "era5");
    assert_eq!(rust_ident("DYAMOND_SUMMER"), "dyamond_summer");
    assert_eq!(rust_ident("a-b.c"), "a_b_c");
    assert_eq!(rust_ident("1x"), "_1x");
    assert_eq!(rust_ident("self"), "self_");
    assert_eq!(rust_ident(""), "__");
}

/// A model crate in `dir` with `profile` appended to its `Cargo.toml`, and a good manifest.
fn model_crate(dir: &Path, profile: &str) {
    std::fs::write(
        dir.join("Cargo.toml"),
        format!("[package]\nname = \"model\"\nversion = \"0.1.0\"\n\n{profile}"),
    )
    .unwrap();
    std::fs::write(dir.join("Artifacts.toml"), good_manifest()).unwrap();
}

fn slow_debug_warnings(lines: &[String]) -> Vec<&String> {
    lines
        .iter()
        .filter(|l| l.starts_with("cargo:warning=clima-artifacts: this debug build"))
        .collect()
}

#[test]
fn a_debug_build_without_the_profile_block_is_told_what_to_add_once() {
    let tmp = tempfile::tempdir().unwrap();
    model_crate(tmp.path(), "");
    let vars = [dir_var(tmp.path()), ("OPT_LEVEL", "0".to_owned())];
    let (result, lines) = run(&Builder::new().deny_warnings(true), &vars);
    // Not a finding about the manifest: deny_warnings does not fail the build for it.
    assert!(result.is_ok(), "{lines:#?}");
    let found = slow_debug_warnings(&lines);
    assert_eq!(found.len(), 1, "{lines:#?}");
    let root = tmp.path().join("Cargo.toml");
    for needle in [
        "`libbz2-rs-sys`, `lzma-rust2`, `sha1`, `sha2`, `ureq-proto`, `zlib-rs`, `zstd-sys` unoptimised",
        &format!("add these lines to `{}`", root.display()),
    ] {
        assert!(found[0].contains(needle), "{needle}: {}", found[0]);
    }
    // The block follows, one directive per line, exactly as in dev-profile.toml.
    let block: Vec<String> = dev_profile::BLOCK
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| format!("cargo:warning=    {l}"))
        .collect();
    assert!(block.len() >= 7, "{block:?}");
    let at = lines.iter().position(|l| l == found[0]).unwrap();
    assert_eq!(lines[at + 1..at + 1 + block.len()], block[..]);
    // Adding the block to the root manifest reruns the script.
    assert!(lines.contains(&format!("cargo:rerun-if-changed={}", root.display())));

    // With the block pasted in, nothing is said.
    model_crate(tmp.path(), dev_profile::BLOCK);
    let (result, lines) = run(&Builder::new(), &vars);
    assert!(result.is_ok());
    assert!(slow_debug_warnings(&lines).is_empty(), "{lines:#?}");
}

#[test]
fn the_dev_profile_is_read_where_cargo_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    let member = ws.join("model");
    std::fs::create_dir(&member).unwrap();
    let vars = [dir_var(&member), ("OPT_LEVEL", "0".to_owned())];
    let warned = |lines: &[String]| slow_debug_warnings(lines).first().map(|l| l.to_string());

    // A member's own profile sections do not count: cargo reads the workspace root's.
    model_crate(&member, dev_profile::BLOCK);
    std::fs::write(
        ws.join("Cargo.toml"),
        "[workspace]\nmembers = [\"model\"]\n",
    )
    .unwrap();
    let (_, lines) = run(&Builder::new(), &vars);
    let w = warned(&lines).expect("warned");
    assert!(
        w.contains(&format!("`{}`", ws.join("Cargo.toml").display())),
        "{w}"
    );

    // `"*"` covers every dependency; a crate named with its version counts; `0` does not.
    std::fs::write(
        ws.join("Cargo.toml"),
        "[workspace]\nmembers = [\"model\"]\n[profile.dev.package.\"*\"]\nopt-level = 2\n\
         [profile.dev.package.\"sha1@0.10.7\"]\nopt-level = 0\n",
    )
    .unwrap();
    let (_, lines) = run(&Builder::new(), &vars);
    let w = warned(&lines).expect("sha1 at 0");
    assert!(w.contains("compiles `sha1` unoptimised"), "{w}");

    // A cargo config file in an ancestor also sets profiles, and takes precedence.
    std::fs::create_dir(ws.join(".cargo")).unwrap();
    std::fs::write(
        ws.join(".cargo/config.toml"),
        "[profile.dev.package.sha1]\nopt-level = 3\n",
    )
    .unwrap();
    let (_, lines) = run(&Builder::new(), &vars);
    assert_eq!(warned(&lines), None, "{lines:#?}");

    // A release build, or any optimised one, is never warned.
    std::fs::write(
        ws.join("Cargo.toml"),
        "[workspace]\nmembers = [\"model\"]\n",
    )
    .unwrap();
    let (_, lines) = run(
        &Builder::new(),
        &[dir_var(&member), ("OPT_LEVEL", "3".to_owned())],
    );
    assert_eq!(warned(&lines), None);
    assert!(
        !lines
            .iter()
            .any(|l| l.ends_with("/Cargo.toml") && l.starts_with("cargo:rerun"))
    );

    // An invalid root manifest is read as setting nothing: a warning, not a failure.
    model_crate(&member, "");
    std::fs::write(ws.join("Cargo.toml"), "[workspace\n").unwrap();
    let (result, lines) = run(&Builder::new(), &vars);
    assert!(result.is_ok());
    assert!(warned(&lines).is_some());
}

#[test]
fn this_workspace_optimises_what_the_block_names() {
    // The workspace's own Cargo.toml holds the block the README and the warning give, so
    // tests and examples here run the hot path optimised too.
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = dev_profile::root_manifest(here);
    assert_eq!(root, here.parent().unwrap().join("Cargo.toml"));
    let vars = env(&[("OPT_LEVEL", "0".to_owned())]);
    assert_eq!(dev_profile::check(&vars, here), None);
    let text = std::fs::read_to_string(&root).unwrap();
    let block: String = dev_profile::BLOCK
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(text.contains(&block), "the root Cargo.toml lacks:\n{block}");
}
