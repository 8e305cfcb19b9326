//! Recipes end to end through the binary: `new`, `create --recipe`, `reproduce`, with real
//! recipe scripts run by `/bin/sh` in temp folders.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario; the 100-line rule (issue 36) is for non-test code"
)]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Sandbox, assert_ok, json};

/// A README with every required section.
const README: &str = "# era5\n\n## Contents\nu.csv\n\n## Sources\nhttps://example.invalid\n\n\
                      ## Creators and citation\nHersbach et al. (2020), doi:10.1002/qj.3803\n\n\
                      ## Preprocessing\nnone\n";

/// `artifacts/<name>/` under the sandbox's work folder.
fn recipe_dir(sb: &Sandbox, name: &str) -> PathBuf {
    sb.work.join("artifacts").join(name)
}

/// Writes the recipe folder of `name`: `script` as its executable `recipe`, and [`README`].
fn write_recipe(sb: &Sandbox, name: &str, script: &str) -> PathBuf {
    let dir = recipe_dir(sb, name);
    fs::create_dir_all(&dir).unwrap();
    let recipe = dir.join("recipe");
    fs::write(&recipe, format!("#!/bin/sh\nset -eu\n{script}")).unwrap();
    fs::set_permissions(&recipe, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(dir.join("README.md"), README).unwrap();
    dir
}

/// `create --recipe artifacts/<name>` with a download next to the manifest (a relative URL,
/// so `reproduce` can install the pinned content offline); returns the JSON output.
fn create(sb: &Sandbox, name: &str) -> serde_json::Value {
    sb.json_ok(&[
        "create",
        "--recipe",
        &format!("artifacts/{name}"),
        "--manifest",
        "Artifacts.toml",
        "--url",
        &format!("{name}.tar.gz"),
        "--json",
    ])
}

/// `create --recipe artifacts/<name> -m Artifacts.toml EXTRA...`, which must exit with `code`;
/// returns its stderr.
fn create_fails(sb: &Sandbox, name: &str, extra: &[&str], code: i32) -> String {
    let out = sb
        .cli()
        .args(["create", "--recipe", &format!("artifacts/{name}")])
        .args(["-m", "Artifacts.toml"])
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    stderr(&out)
}

/// Asserts that `text` contains every one of `needles`, showing `text` if not.
#[track_caller]
fn assert_has(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "no `{n}` in:\n{text}");
    }
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `reproduce ARGS` (exit status not checked).
fn reproduce(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    sb.cli().arg("reproduce").args(args).output().unwrap()
}

/// The `(path, change)` pairs of the first result of `reproduce --json`.
fn changes(result: &serde_json::Value) -> Vec<(String, String)> {
    result[0]["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap().to_owned(),
                d["change"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn new_then_edited_recipe_then_create_gives_an_entry_that_reproduce_matches() {
    let sb = Sandbox::new();
    let created = sb.json_ok(&["new", "era5", "--manifest", "Artifacts.toml", "--json"]);
    let dir = recipe_dir(&sb, "era5");
    assert_eq!(created["folder"].as_str(), Some(dir.to_str().unwrap()));
    let recipe = dir.join("recipe");
    assert_ne!(
        fs::metadata(&recipe).unwrap().permissions().mode() & 0o111,
        0,
        "the template is not executable"
    );

    // The README template is refused until its sections have text.
    let err = create_fails(&sb, "era5", &[], 2);
    assert_has(
        &err,
        &["`Contents`, `Sources`, `Creators and citation`, `Preprocessing`"],
    );
    // The recipe template fails, with its message streamed to stderr.
    fs::write(dir.join("README.md"), README).unwrap();
    let err = create_fails(&sb, "era5", &[], 1);
    assert_has(
        &err,
        &["is still the template", "failed: it exited with status 1"],
    );
    assert!(!sb.work.join("Artifacts.toml").exists());

    // The edited recipe: reads a file of its folder (its working directory), uses $OUT, $1
    // and ARTIFACT_NAME, writes nested, executable and symlinked files, and prints on stdout
    // (which must not end up in the JSON on our stdout).
    fs::write(dir.join("input.txt"), "1,2,3\n").unwrap();
    fs::write(
        &recipe,
        "#!/bin/sh\nset -eu\necho \"making $ARTIFACT_NAME\"\nmkdir -p \"$OUT/data\"\n\
         cp input.txt \"$1/data/u.csv\"\nprintf '%s\\n' \"$ARTIFACT_NAME\" > \"$OUT/name.txt\"\n\
         printf '#!/bin/sh\\n' > \"$OUT/run.sh\"\nchmod 755 \"$OUT/run.sh\"\n\
         ln -s data/u.csv \"$OUT/latest\"\n",
    )
    .unwrap();
    // An entry already there keeps its comments and other keys.
    let manifest = sb.work.join("Artifacts.toml");
    fs::write(
        &manifest,
        "# keep this comment\n[era5]\ngit-tree-sha1 = \"b373f1887cff55850cbf76ec005f7d93726ae42e\"\n\
         note = \"hand-written\"\n",
    )
    .unwrap();
    let made = create(&sb, "era5");
    let hash = made["git_tree_sha1"].as_str().unwrap().to_owned();
    assert_eq!(made["recipe"], "artifacts/era5");
    assert_eq!(made["manifest_change"]["action"], "updated");

    // The entry records the recipe; the manifest still loads (the key is metadata Julia
    // ignores in a [name] table).
    let text = fs::read_to_string(&manifest).unwrap();
    assert_has(
        &text,
        &[
            "# keep this comment\n",
            "note = \"hand-written\"",
            "recipe = \"artifacts/era5\"",
        ],
    );
    let parsed = clima_artifact_manifest::Manifest::load(&manifest).unwrap();
    let v = parsed
        .select("era5", &clima_artifact_manifest::Platform::host())
        .unwrap();
    assert_eq!(v.git_tree_sha1.to_hex(), hash);
    assert_eq!(v.metadata["recipe"], "artifacts/era5");
    assert_eq!(v.metadata["note"], "hand-written");
    assert_eq!(v.downloads.len(), 1);

    // The tarball holds the recipe's files and the README, byte for byte (a seekable tarball:
    // a gzip member per file, files and symlinks only).
    let tarball = fs::read(sb.work.join("era5.tar.gz")).unwrap();
    let mut archive = tar::Archive::new(flate2::read::MultiGzDecoder::new(&tarball[..]));
    let mut names = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().display().to_string();
        if name == "README.md" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            assert_eq!(text, README);
        }
        if name == "name.txt" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            assert_eq!(text, "era5\n");
        }
        names.push(name);
    }
    assert_eq!(
        names,
        ["README.md", "data/u.csv", "latest", "name.txt", "run.sh"]
    );

    // reproduce: the same tree hash, exit 0, in words and in JSON.
    let out = reproduce(&sb, &["era5"]);
    assert_ok(&out);
    assert!(stdout(&out).contains("reproduced"), "{}", stdout(&out));
    assert!(stdout(&out).contains(&hash), "{}", stdout(&out));
    assert!(stderr(&out).contains("making era5"), "{}", stderr(&out));
    let result = sb.json_ok(&["reproduce", "--all", "--json"]);
    assert_eq!(result[0]["status"], "reproduced");
    assert_eq!(result[0]["made"].as_str(), Some(hash.as_str()));

    // list shows the recipe.
    let listed = sb.json_ok(&["list", "--json"]);
    assert_eq!(listed[0]["recipe"], "artifacts/era5");
    let out = sb.cli().arg("list").output().unwrap();
    assert!(
        stdout(&out).contains("(recipe artifacts/era5)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_recipe_writing_a_timestamp_does_not_reproduce_and_the_file_is_named() {
    let sb = Sandbox::new();
    write_recipe(
        &sb,
        "stamped",
        "echo 1 > \"$OUT/data.csv\"\ndate +%s%N > \"$OUT/made-at.txt\"\n",
    );
    let pinned = create(&sb, "stamped");
    let out = reproduce(&sb, &["stamped"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("MISMATCH"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("made-at.txt"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("content differs"), "{line}");
    assert!(line.contains("bytes pinned"), "{line}");
    assert!(!text.contains("data.csv"), "{text}");
    assert!(
        stderr(&out).contains("content differs `made-at.txt`"),
        "{}",
        stderr(&out)
    );
    // The pinned content was installed into the depot as `fetch` installs it.
    let installed = sb
        .depot
        .join("artifacts")
        .join(pinned["git_tree_sha1"].as_str().unwrap());
    assert!(installed.join("made-at.txt").is_file());

    let out = reproduce(&sb, &["stamped", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let result = json(&out);
    assert_eq!(result[0]["status"], "mismatch");
    assert_eq!(
        result[0]["compared_with"].as_str(),
        Some(installed.to_str().unwrap())
    );
    assert_eq!(
        changes(&result),
        [("made-at.txt".to_owned(), "content_differs".to_owned())]
    );
}

#[test]
fn dropped_files_changed_modes_and_retargeted_links_are_reported() {
    let sb = Sandbox::new();
    // The recipe's output depends on `variant` in its folder, so it can change between runs.
    let dir = write_recipe(
        &sb,
        "drift",
        "echo a > \"$OUT/a.txt\"\necho run > \"$OUT/run.sh\"\n\
         if [ \"$(cat variant)\" = 1 ]; then\n\
           echo b > \"$OUT/b.txt\"; chmod 755 \"$OUT/run.sh\"; ln -s a.txt \"$OUT/link\"\n\
         else\n\
           chmod 644 \"$OUT/run.sh\"; ln -s run.sh \"$OUT/link\"; echo new > \"$OUT/new.txt\"\n\
         fi\n",
    );
    fs::write(dir.join("variant"), "1").unwrap();
    create(&sb, "drift");
    fs::write(dir.join("variant"), "2").unwrap();

    let out = reproduce(&sb, &["drift"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    for (change, path) in [
        ("missing", "b.txt"),
        ("mode differs", "run.sh"),
        ("link target differs", "link"),
        ("extra", "new.txt"),
    ] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(change) && l.contains(path)),
            "no `{change}` line for {path}:\n{text}"
        );
    }
    assert!(
        text.contains("-> `a.txt` pinned, -> `run.sh` made"),
        "{text}"
    );
    assert!(
        text.contains("executable pinned, not executable made"),
        "{text}"
    );

    let out = reproduce(&sb, &["drift", "--json"]);
    let result = json(&out);
    let expected = [
        ("b.txt", "missing"),
        ("link", "link_target_differs"),
        ("new.txt", "extra"),
        ("run.sh", "mode_differs"),
    ]
    .map(|(p, c)| (p.to_owned(), c.to_owned()));
    assert_eq!(changes(&result), expected);

    // Without a download the pinned content cannot be had: the new tree is listed instead.
    let manifest = sb.work.join("Artifacts.toml");
    let text = fs::read_to_string(&manifest).unwrap();
    let cut = text.find("\n    [[drift.download]]").unwrap();
    fs::write(&manifest, &text[..cut]).unwrap();
    fs::remove_dir_all(sb.depot.join("artifacts")).unwrap();
    let out = reproduce(&sb, &["drift", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let result = json(&out);
    assert_eq!(result[0]["status"], "mismatch");
    assert!(result[0]["compared_with"].is_null());
    assert!(
        result[0]["pinned_unavailable"]
            .as_str()
            .unwrap()
            .contains("drift"),
        "{result}"
    );
    let listed: Vec<&str> = result[0]["made_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["README.md", "a.txt", "link", "new.txt", "run.sh"]);
    let out = reproduce(&sb, &["drift"]);
    assert!(
        stdout(&out).contains("could not be had to compare with"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("symlink    link -> run.sh"),
        "{}",
        stdout(&out)
    );
}

/// Whether process `pid` still exists (and is not a zombie).
fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn failing_and_hanging_recipes_are_clear_errors() {
    let sb = Sandbox::new();
    write_recipe(&sb, "broken", "echo 'no data today' >&2\nexit 3\n");
    let err = create_fails(&sb, "broken", &[], 1);
    assert_has(
        &err,
        &[
            "no data today",
            "the recipe `",
            "of artifact `broken` failed: it exited with status 3",
        ],
    );
    assert!(!sb.work.join("Artifacts.toml").exists());
    assert!(!sb.work.join("broken.tar.gz").exists());

    // A recipe that hangs, with a child in the background: --timeout kills both.
    let dir = write_recipe(
        &sb,
        "hangs",
        "echo 1 > \"$OUT/x\"\nsleep 300 &\necho $! > child.pid\nsleep 300\n",
    );
    let start = Instant::now();
    let err = create_fails(&sb, "hangs", &["--timeout", "1s"], 1);
    assert!(start.elapsed() < Duration::from_secs(60));
    assert_has(
        &err,
        &[
            "of artifact `hangs` was still running after 1 s (--timeout)",
            "process group) were killed",
        ],
    );
    let child: u32 = fs::read_to_string(dir.join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(child) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(child),
        "the recipe's background child {child} survived"
    );

    // Ctrl-C (SIGINT to the CLI, whose group the recipe is not in) kills the recipe's group.
    fs::remove_file(dir.join("child.pid")).unwrap();
    let mut cli = std::process::Command::new(assert_cmd::cargo::cargo_bin("clima-artifacts"))
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &sb.depot)
        .env("CLIMA_ARTIFACTS_PROGRESS", "0")
        .current_dir(&sb.work)
        .args([
            "create",
            "--recipe",
            "artifacts/hangs",
            "-m",
            "Artifacts.toml",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.join("child.pid").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let child: u32 = fs::read_to_string(dir.join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) on the CLI process this test started.
    assert_eq!(unsafe { libc::kill(cli.id() as i32, libc::SIGINT) }, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while cli.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = cli.try_wait().unwrap().expect("the CLI ignored SIGINT");
    assert_eq!(status.code(), Some(1));
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(child) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(child), "the recipe's child {child} survived Ctrl-C");
    // Read once the recipe's processes are gone (they hold the pipe too).
    let mut err = String::new();
    std::io::Read::read_to_string(&mut cli.stderr.take().unwrap(), &mut err).unwrap();
    assert_has(
        &err,
        &["interrupted (signal 2)", "process group) were killed"],
    );

    // reproduce reports both, and goes on with the others.
    let manifest = sb.work.join("Artifacts.toml");
    fs::write(
        &manifest,
        "[broken]\ngit-tree-sha1 = \"b373f1887cff55850cbf76ec005f7d93726ae42e\"\nrecipe = \"artifacts/broken\"\n\
         [hangs]\ngit-tree-sha1 = \"b373f1887cff55850cbf76ec005f7d93726ae42e\"\nrecipe = \"artifacts/hangs\"\n\
         [plain]\ngit-tree-sha1 = \"b373f1887cff55850cbf76ec005f7d93726ae42e\"\n",
    )
    .unwrap();
    let out = reproduce(&sb, &["--all", "--timeout", "1s", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let result = json(&out);
    let statuses: Vec<&str> = result
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["failed", "failed", "no_recipe"]);
    assert!(result[1]["error"].as_str().unwrap().contains("--timeout"));
    assert!(
        stderr(&out).contains("2 of 2 recipe(s) did not reproduce"),
        "{}",
        stderr(&out)
    );
    // A named artifact without a recipe is bad usage.
    let out = reproduce(&sb, &["plain"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("artifact `plain`") && stderr(&out).contains("no `recipe` key"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn readme_sections_missing_is_an_error_naming_them() {
    let sb = Sandbox::new();
    let dir = write_recipe(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n");
    fs::write(
        dir.join("README.md"),
        "# era5\n\n## contents:\nu.csv\n\n## Sources\n<!-- fill in -->\n",
    )
    .unwrap();
    let err = create_fails(&sb, "era5", &[], 2);
    assert_has(
        &err,
        &[
            &format!("`{}`", dir.join("README.md").display()),
            "lacks the section(s) `Sources`, `Creators and citation`, `Preprocessing`",
        ],
    );
    // The recipe did not run.
    assert!(!err.contains("running recipe"), "{err}");
    assert!(!sb.work.join("Artifacts.toml").exists());

    fs::remove_file(dir.join("README.md")).unwrap();
    assert_has(
        &create_fails(&sb, "era5", &[], 2),
        &["README.md` is missing"],
    );

    // A recipe folder outside the manifest's folder is refused.
    let elsewhere = sb.root.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let out = sb
        .cli()
        .args(["create", "--recipe"])
        .arg(&elsewhere)
        .args(["-m", "Artifacts.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not inside the manifest's folder"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_symlink_planted_out_of_the_output_is_reported_and_nothing_is_packed() {
    let sb = Sandbox::new();
    let secret = sb.root.path().join("secret.txt");
    fs::write(&secret, "do not pack me").unwrap();
    write_recipe(
        &sb,
        "planted",
        &format!(
            "echo 1 > \"$OUT/u.csv\"\nln -s '{}' \"$OUT/secret\"\n",
            secret.display()
        ),
    );
    // Lexically inside (`sub/up/..` looks like `sub`), but `sub/up` is the output folder, so
    // `sub/sneaky` is its parent.
    write_recipe(
        &sb,
        "sneaky",
        "mkdir \"$OUT/sub\"\nln -s .. \"$OUT/sub/up\"\nln -s up/.. \"$OUT/sub/sneaky\"\n",
    );
    for (name, link) in [("planted", "secret"), ("sneaky", "sub/sneaky")] {
        let err = create_fails(&sb, name, &[], 1);
        assert_has(
            &err,
            &[&format!(
                "left a symlink `{link}` pointing outside its output folder"
            )],
        );
        assert!(!sb.work.join(format!("{name}.tar.gz")).exists());
    }
    assert!(!sb.work.join("Artifacts.toml").exists());
    assert_eq!(fs::read_to_string(&secret).unwrap(), "do not pack me");
}

#[test]
fn new_never_overwrites() {
    let sb = Sandbox::new();
    fs::write(sb.work.join("Artifacts.toml"), "").unwrap();
    let sub = sb.work.join("src");
    fs::create_dir_all(&sub).unwrap();
    // Found from a subfolder: the folder goes next to the manifest.
    let out = sb
        .cli()
        .current_dir(&sub)
        .args(["new", "era5"])
        .output()
        .unwrap();
    assert_ok(&out);
    let readme = recipe_dir(&sb, "era5").join("README.md");
    let template = fs::read_to_string(&readme).unwrap();
    for section in [
        "## Contents",
        "## Sources",
        "## Creators and citation",
        "## Preprocessing",
    ] {
        assert!(template.contains(section), "{template}");
    }
    fs::write(&readme, "mine").unwrap();
    let out = sb.cli().args(["new", "era5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("already exist"), "{}", stderr(&out));
    assert!(stderr(&out).contains("README.md"), "{}", stderr(&out));
    assert_eq!(fs::read_to_string(&readme).unwrap(), "mine");
    let out = sb.cli().args(["new", "../x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("invalid artifact name"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn reproduce_all_passes_on_the_quickstart_example() {
    let sb = Sandbox::new();
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/quickstart/Artifacts.toml");
    let out = sb
        .cli()
        .args(["reproduce", "--all", "--json", "--manifest"])
        .arg(&manifest)
        .output()
        .unwrap();
    assert_ok(&out);
    let result = json(&out);
    let reproduced: Vec<&str> = result
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "reproduced")
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(reproduced, ["surface-albedo"], "{result}");
    // Nothing needed installing for a match.
    assert!(!sb.depot.join("artifacts").exists());
}

#[test]
fn the_report_shows_the_recipe_and_the_readme_citation() {
    use clima_artifact_runtime::access_log::{self, AccessEvent};
    let sb = Sandbox::new();
    write_recipe(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n");
    // A recipe folder whose README is a symlink: not followed, so no citation.
    let linked = recipe_dir(&sb, "linked");
    fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(
        recipe_dir(&sb, "era5").join("README.md"),
        linked.join("README.md"),
    )
    .unwrap();
    let manifest = sb.work.join("Artifacts.toml");
    for (name, hash) in [
        ("era5", "b373f1887cff55850cbf76ec005f7d93726ae42e"),
        ("linked", "4b825dc642cb6eb9a060e54bf8d69288fbee4904"),
    ] {
        access_log::record(AccessEvent {
            name: name.into(),
            hash: hash.parse().unwrap(),
            path: sb.depot.join("artifacts").join(hash),
            origin: access_log::RecordedOrigin::Depot,
            call_site: None,
            manifest: manifest.clone(),
            metadata: [("recipe".to_owned(), format!("artifacts/{name}"))]
                .into_iter()
                .collect(),
            rank: 0,
        });
    }
    let report = clima_artifact_runtime::report::report();
    fs::write(sb.work.join("provenance.json"), report.to_json()).unwrap();
    let out = sb
        .cli()
        .args(["report", "provenance.json"])
        .output()
        .unwrap();
    assert_ok(&out);
    let md = stdout(&out);
    assert!(md.contains("## Recipes"), "{md}");
    assert!(
        md.contains(&format!(
            "- `era5`: `artifacts/era5` (manifest `{}`). Its README's \"Creators and citation\" \
             section: Hersbach et al. (2020), doi:10.1002/qj.3803.",
            manifest.display()
        )),
        "{md}"
    );
    let linked_line = md
        .lines()
        .find(|l| l.starts_with("- `linked`: `artifacts/linked`"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(!linked_line.contains("README"), "{linked_line}");
}

/// `create --guided --recipe`: the settings are asked for (no content folder: the recipe makes
/// it), then the recipe runs and its entry records `recipe`.
#[test]
fn guided_create_takes_a_recipe() {
    let sb = Sandbox::new();
    write_recipe(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n");
    // Answers: name (default era5), manifest (default), lazy? (no), description, license,
    // citation, doi, version, acknowledgement, source, maintainer, tarball (default), url,
    // proceed.
    let answers = "\n\n\nERA5 sample\nCC-BY-4.0\n\n\nv1\n\n\n\n\nera5.tar.gz\n\n";
    let out = sb
        .cli()
        .args(["create", "--guided", "--recipe", "artifacts/era5"])
        .write_stdin(answers)
        .output()
        .unwrap();
    assert_ok(&out);
    let text = stdout(&out);
    assert!(
        !text.contains("Folder with the artifact's content"),
        "{text}"
    );
    let metadata = common::entry_metadata(&sb.work.join("Artifacts.toml"), "era5");
    let get = |k: &str| metadata.get(k).map(String::as_str);
    assert_eq!(get("recipe"), Some("artifacts/era5"));
    assert_eq!(get("version"), Some("v1"));
    assert_eq!(get("license"), Some("CC-BY-4.0"));
    // And it reproduces.
    let out = reproduce(&sb, &["era5", "--json"]);
    assert_ok(&out);
    assert_eq!(json(&out)[0]["status"], "reproduced");
}

/// A recipe that exits 0 but writes nothing is refused: an artifact of only the README is
/// never what was meant.
#[test]
fn a_recipe_that_writes_nothing_is_refused() {
    let sb = Sandbox::new();
    write_recipe(&sb, "nothing", "mkdir \"$OUT/empty\"\necho working\n");
    let err = create_fails(&sb, "nothing", &[], 1);
    assert_has(&err, &["wrote nothing into its output folder", "$OUT"]);
    assert!(!sb.work.join("Artifacts.toml").exists());
    assert!(!sb.work.join("nothing.tar.gz").exists());
}

/// A recipe folder, or its `recipe` file, committed as a symlink out of the manifest's tree is
/// refused by `reproduce --all`, and the program it points to never runs.
#[test]
fn a_recipe_linked_out_of_the_manifests_tree_is_refused_and_never_runs() {
    let sb = Sandbox::new();
    let marker = sb.root.path().join("ran");
    let evil = sb.root.path().join("evil");
    fs::create_dir_all(&evil).unwrap();
    let script = format!(
        "#!/bin/sh\ntouch '{}'\necho 1 > \"$OUT/u.csv\"\n",
        marker.display()
    );
    fs::write(evil.join("recipe"), &script).unwrap();
    fs::set_permissions(evil.join("recipe"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(evil.join("README.md"), README).unwrap();

    write_recipe(&sb, "folder", "echo 1 > \"$OUT/u.csv\"\n");
    create(&sb, "folder");
    write_recipe(&sb, "file", "echo 2 > \"$OUT/u.csv\"\n");
    create(&sb, "file");
    // As a repository would hold them: the folder a link, and the file a link.
    let folder = recipe_dir(&sb, "folder");
    fs::remove_dir_all(&folder).unwrap();
    std::os::unix::fs::symlink(&evil, &folder).unwrap();
    let file = recipe_dir(&sb, "file").join("recipe");
    fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(evil.join("recipe"), &file).unwrap();

    let out = reproduce(&sb, &["--all", "--json"]);
    assert_ne!(out.status.code(), Some(0));
    let result = json(&out);
    for r in result.as_array().unwrap() {
        assert_eq!(r["status"], "failed", "{r}");
        let error = r["error"].as_str().unwrap();
        assert!(error.contains("outside the manifest's folder"), "{error}");
    }
    assert!(!marker.exists(), "the linked recipe ran");
}
