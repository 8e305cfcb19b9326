//! Unit tests of `manifest.rs`: parsing, validation and selection of `Artifacts.toml`.

use super::*;

const H1: &str = "b373f1887cff55850cbf76ec005f7d93726ae42e";
const H2: &str = "0000b8078527ddfae5a25d99c3e163cbd9b1e574";
const S1: &str = "750ead63910729c349beaed2a5db79903cbf3a982d0e0578e02994b1e7191c48";

fn parse(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::parse(text, Path::new("dir/Artifacts.toml"))
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn splits_names_and_subpaths() {
    assert_eq!(split_name_and_subpath("era5"), Ok(("era5", None)));
    assert_eq!(split_name_and_subpath("era5/"), Ok(("era5", None)));
    assert_eq!(
        split_name_and_subpath("era5/2008/u.nc"),
        Ok(("era5", Some("2008/u.nc")))
    );
    assert_eq!(
        split_name_and_subpath("era5/2008/"),
        Ok(("era5", Some("2008")))
    );
    assert_eq!(
        split_name_and_subpath("clm_data_0.9x1.25/a..b"),
        Ok(("clm_data_0.9x1.25", Some("a..b")))
    );
    assert_eq!(
        split_name_and_subpath(""),
        Err(SubPathError::EmptyName(String::new()))
    );
    assert_eq!(
        split_name_and_subpath("/etc/passwd"),
        Err(SubPathError::EmptyName("/etc/passwd".into()))
    );
    assert_eq!(
        split_name_and_subpath("era5/../x"),
        Err(SubPathError::ParentDir("../x".into()))
    );
    assert_eq!(
        split_name_and_subpath("era5/a/.."),
        Err(SubPathError::ParentDir("a/..".into()))
    );
    assert_eq!(
        split_name_and_subpath("era5/a\\..\\b"),
        Err(SubPathError::ParentDir("a\\..\\b".into()))
    );
    for bad in [
        "era5//etc",
        "era5/a//b",
        "era5/./a",
        "era5/a\0b",
        "era5/C:/x",
        "era5/\\\\srv",
    ] {
        assert!(
            matches!(
                split_name_and_subpath(bad),
                Err(SubPathError::NotRelative(_))
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        split_name_and_subpath("er\0a5"),
        Err(SubPathError::NotRelative(_))
    ));
    assert!(
        SubPathError::ParentDir("../x".into())
            .to_string()
            .contains("`../x`")
    );
}

#[test]
fn parses_table_entries() {
    let text = format!(
        r#"# header comment
[era5]
git-tree-sha1 = "{H1}"
lazy = true
license = "CC-BY-4.0"
size_hint = 12
tags = ["a", 1]

    [[era5.download]]
    url = "https://example.org/era5.tar.gz"
    sha256 = "{S1}"
    size = 1234

    [[era5.download]]
    sha256 = "{S1}"
    url = "mirror/era5.tar.gz"
    comment = "ignored"

["clm_data_0.9x1.25"]
git-tree-sha1 = "{H2}"
inline = {{ a = 1, b = "x" }}
"#
    );
    let m = parse(&text).unwrap();
    assert_eq!(m.names().collect::<Vec<_>>(), ["era5", "clm_data_0.9x1.25"]);
    assert_eq!(m.dir(), Path::new("dir"));
    let ArtifactEntry::Single(v) = m.get("era5").unwrap() else {
        panic!("not single")
    };
    assert_eq!(v.git_tree_sha1.to_hex(), H1);
    assert!(v.lazy);
    assert_eq!(v.line, 2);
    assert_eq!(v.platform, None);
    assert_eq!(v.downloads.len(), 2);
    assert_eq!(v.downloads[0].url, "https://example.org/era5.tar.gz");
    assert_eq!(v.downloads[0].size, Some(1234));
    assert_eq!(v.downloads[1].url, "mirror/era5.tar.gz");
    assert_eq!(v.downloads[1].size, None);
    assert_eq!(v.downloads[1].sha256.to_hex(), S1);
    assert_eq!(v.metadata["license"], "CC-BY-4.0");
    assert_eq!(v.metadata["size_hint"], "12");
    assert_eq!(v.metadata["tags"], "[\"a\", 1]");
    assert_eq!(v.metadata.len(), 3);
    let ArtifactEntry::Single(c) = m.get("clm_data_0.9x1.25").unwrap() else {
        panic!("not single")
    };
    assert!(!c.lazy);
    assert!(c.downloads.is_empty());
    assert_eq!(c.line, 19);
    assert_eq!(c.metadata["inline"], "{ a = 1, b = \"x\" }");
    assert!(m.get("nope").is_none());
}

#[test]
fn parses_inline_and_platform_entries() {
    let text = format!(
        r#"
inline_one = {{ git-tree-sha1 = "{H1}", download = [{{ url = "u", sha256 = "{S1}" }}] }}

[[lib]]
arch = "x86_64"
os = "linux"
libc = "glibc"
libgfortran_version = "5.0.0"
license = "MIT"
lazy = true
git-tree-sha1 = "{H1}"
    [[lib.download]]
    url = "https://a/x86_64.tar.gz"
    sha256 = "{S1}"

[[lib]]
arch = "aarch64"
os = "macos"
git-tree-sha1 = "{H2}"
"#
    );
    let m = parse(&text).unwrap();
    assert_eq!(m.names().collect::<Vec<_>>(), ["inline_one", "lib"]);
    let ArtifactEntry::Single(i) = &m.artifacts()[0].1 else {
        panic!()
    };
    assert_eq!(i.downloads[0].url, "u");
    assert_eq!(i.line, 2);
    let ArtifactEntry::PlatformSpecific(vs) = m.get("lib").unwrap() else {
        panic!("not platform specific")
    };
    assert_eq!(vs.len(), 2);
    let p = vs[0].platform.as_ref().unwrap();
    assert_eq!(
        p.to_string(),
        "arch=x86_64,libc=glibc,libgfortran_version=5.0.0,os=linux"
    );
    assert_eq!(vs[0].metadata["license"], "MIT");
    assert!(vs[0].lazy);
    assert_eq!(vs[0].line, 4);
    assert_eq!(vs[1].line, 16);
    assert!(!vs[1].lazy);
    assert_eq!(vs[1].platform.as_ref().unwrap().get("os"), Some("macos"));
}

#[test]
fn ties_go_to_the_greatest_triplet_whatever_the_order_in_the_file() {
    // Julia's select_platform: equal loss, then reverse-sorted triplets, so libgfortran5
    // wins over 4 and 3 for a host that does not say which it has.
    for order in [[3, 5, 4], [5, 4, 3], [4, 3, 5]] {
        let text: String = order
                .iter()
                .map(|v| {
                    format!(
                        "[[lib]]\nos = \"linux\"\narch = \"x86_64\"\nlibgfortran_version = \"{v}.0.0\"\ngit-tree-sha1 = \"{H1}\"\ndescription = \"gf{v}\"\n"
                    )
                })
                .collect();
        let m = parse(&text).unwrap();
        let host = Platform::from_tags([("os", "linux"), ("arch", "x86_64")]);
        let picked = m.select("lib", &host).unwrap();
        assert_eq!(picked.metadata["description"], "gf5", "order {order:?}");
    }
}

#[test]
fn finds_the_manifest_upwards_and_stops_at_the_project_root() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("model");
    let deep = project.join("src/sub");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(project.join("Project.toml"), "name = \"Model\"\n").unwrap();
    std::fs::write(project.join("Artifacts.toml"), "").unwrap();
    assert_eq!(
        Manifest::find_upwards(&deep).unwrap(),
        project.join("Artifacts.toml")
    );
    // JuliaArtifacts.toml is preferred, as in Julia.
    std::fs::write(project.join("JuliaArtifacts.toml"), "").unwrap();
    assert_eq!(
        Manifest::find_upwards(&deep).unwrap(),
        project.join("JuliaArtifacts.toml")
    );
    // A project root without a manifest ends the search: a manifest above it is not used.
    std::fs::write(dir.path().join("Artifacts.toml"), "").unwrap();
    let other = dir.path().join("other/src");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(dir.path().join("other/Cargo.toml"), "").unwrap();
    let e = Manifest::find_upwards(&other).unwrap_err().to_string();
    assert!(e.contains("other/Artifacts.toml"), "{e}");
    // Without any project root, the walk reaches the manifest above.
    let loose = dir.path().join("loose/a/b");
    std::fs::create_dir_all(&loose).unwrap();
    assert_eq!(
        Manifest::find_upwards(&loose).unwrap(),
        dir.path().join("Artifacts.toml")
    );
}

#[test]
fn selects_variants() {
    let text = format!(
        r#"
[[lib]]
os = "linux"
arch = "x86_64"
libc = "musl"
git-tree-sha1 = "{H1}"
[[lib]]
os = "linux"
arch = "x86_64"
git-tree-sha1 = "{H2}"
[[lib]]
os = "linux"
arch = "x86_64"
libc = "glibc"
libgfortran_version = "4.0.0"
git-tree-sha1 = "{H1}"
[[lib]]
os = "linux"
arch = "x86_64"
libc = "glibc"
libgfortran_version = "5.0.0"
git-tree-sha1 = "{H2}"
[[lib]]
os = "macos"
arch = "aarch64"
git-tree-sha1 = "{H1}"
[single]
git-tree-sha1 = "{H1}"
"#
    );
    let m = parse(&text).unwrap();
    let glibc = Platform::from_tags([("os", "linux"), ("arch", "x86_64"), ("libc", "glibc")]);
    // The variant without libc is glibc (Julia's default) and has exactly the host's tag
    // names (loss 0): it beats the libgfortran ones (loss 1).
    assert_eq!(m.select("lib", &glibc).unwrap().line, 7);
    let mut gf5 = glibc.clone();
    gf5.apply_tags("libgfortran_version=5").unwrap();
    assert_eq!(m.select("lib", &gf5).unwrap().line, 17);
    let mut gf4 = glibc.clone();
    gf4.apply_tags("libgfortran_version=4.0.0").unwrap();
    assert_eq!(m.select("lib", &gf4).unwrap().line, 11);
    let musl = Platform::from_tags([("os", "linux"), ("arch", "x86_64"), ("libc", "musl")]);
    assert_eq!(m.select("lib", &musl).unwrap().line, 2);
    // Case of values does not matter.
    let mac = Platform::from_tags([("os", "MacOS"), ("arch", "aarch64")]);
    assert_eq!(m.select("lib", &mac).unwrap().line, 23);
    let win = Platform::from_tags([("os", "windows"), ("arch", "x86_64")]);
    let e = m.select("lib", &win).unwrap_err();
    assert_eq!(
        e.to_string(),
        "artifact `lib` has no variant for this platform (arch=x86_64,os=windows); offered: \
             arch=x86_64,libc=musl,os=linux; arch=x86_64,libc=glibc,os=linux; \
             arch=x86_64,libc=glibc,libgfortran_version=4.0.0,os=linux; \
             arch=x86_64,libc=glibc,libgfortran_version=5.0.0,os=linux; arch=aarch64,os=macos"
    );
    assert_eq!(m.select("single", &win).unwrap().line, 27);
    let e = m.select("nope", &win).unwrap_err();
    assert_eq!(
        e.to_string(),
        "artifact `nope` is not defined in `dir/Artifacts.toml`; defined: lib, single"
    );
    // A likely typo gets a suggestion (the run-time names of `clima_artifact!` and the
    // `Artifacts` API report this error).
    let e = m.select("singel", &win).unwrap_err();
    assert_eq!(
        e.to_string(),
        "artifact `singel` is not defined in `dir/Artifacts.toml`; did you mean `single`? \
             defined: lib, single"
    );
}

#[test]
fn reads_git_tree_sha256_beside_git_tree_sha1() {
    let h256 = "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321";
    let m = parse(&format!(
        "[a]\ngit-tree-sha1 = \"{H1}\"\ngit-tree-sha256 = \"{}\"\n[b]\ngit-tree-sha1 = \"{H2}\"\n",
        h256.to_uppercase()
    ))
    .unwrap();
    let Some(ArtifactEntry::Single(a)) = m.get("a") else {
        panic!("a is a table")
    };
    assert_eq!(a.git_tree_sha256.unwrap().to_hex(), h256);
    assert!(!a.metadata.contains_key("git-tree-sha256"), "not metadata");
    let Some(ArtifactEntry::Single(b)) = m.get("b") else {
        panic!("b is a table")
    };
    assert_eq!(b.git_tree_sha256, None);
}

#[test]
fn reports_bad_git_tree_sha256_with_position() {
    assert_eq!(
        err(&format!(
            "[era5]\ngit-tree-sha1 = \"{H1}\"\ngit-tree-sha256 = \"{H1}\"\n"
        )),
        "`dir/Artifacts.toml`:3:19: artifact `era5`: `git-tree-sha256` is not a valid hash \
             (expected 64 hex digits, found 40 characters); it must be the 64 hex digits of the git \
             SHA-256 tree hash of the artifact's content (`clima-artifacts hash --sha256 DIR` \
             prints it), or be left out"
    );
    assert_eq!(
        err(&format!(
            "[[lib]]\nos = \"linux\"\narch = \"x86_64\"\ngit-tree-sha1 = \"{H1}\"\ngit-tree-sha256 = 5\n"
        )),
        "`dir/Artifacts.toml`:5:19: artifact `lib`: platform variant 1 (`[[lib]]` on line 1): \
             `git-tree-sha256` must be a string of 64 hex digits, found an integer"
    );
    assert_eq!(
        err(&format!(
            "[era5]\ngit-tree-sha256 = \"{}\"\n",
            "a".repeat(64)
        )),
        "`dir/Artifacts.toml`:1:1: artifact `era5`: missing `git-tree-sha1`; add \
             `git-tree-sha1 = \"<40 hex digits>\"`, the git tree hash of the artifact's content \
             (a `git-tree-sha256` is checked in addition to it, never instead: the SHA-1 names the \
             artifact's folder in a depot, as in Julia)"
    );
}

#[test]
fn reports_toml_errors_with_position() {
    assert_eq!(
        err("[era5]\ngit-tree-sha1 = \"abc\n"),
        "`dir/Artifacts.toml`:2:21: artifact `era5`: invalid TOML: invalid basic string, expected `\"`; fix the TOML syntax at this position"
    );
    let e = parse("[a]\nx = 1\n[a]\ny = 2\n").unwrap_err();
    assert_eq!((e.line, e.column), (Some(3), Some(2)));
    assert_eq!(e.artifact, None, "errors on header lines name no artifact");
    assert!(e.to_string().contains("duplicate key"), "{e}");
    // A broken header is not blamed on the artifact above it.
    let e = parse(&format!("[a]\ngit-tree-sha1 = \"{H1}\"\n[b\n")).unwrap_err();
    assert_eq!((e.line, e.artifact), (Some(3), None));
    // A later line of an array entry names its artifact.
    let e = parse("[[lib]]\nos = \"linux\"\n[[lib]]\nos = \"mac\nos\"\n").unwrap_err();
    assert_eq!((e.line, e.artifact.as_deref()), (Some(5), Some("lib")));
}

#[test]
fn reports_structural_errors() {
    assert_eq!(
        err("era5 = \"x\"\n"),
        "`dir/Artifacts.toml`:1:1: artifact `era5`: is a string, not an artifact; an artifact is \
             a table `[era5]` (or an array of tables `[[era5]]`, one per platform) with a `git-tree-sha1`"
    );
    assert_eq!(
        err("[era5]\nlazy = true\n"),
        "`dir/Artifacts.toml`:1:1: artifact `era5`: missing `git-tree-sha1`; add \
             `git-tree-sha1 = \"<40 hex digits>\"`, the git tree hash of the artifact's content"
    );
    assert_eq!(
        err("[era5]\ngit-tree-sha1 = \"abc\"\n"),
        "`dir/Artifacts.toml`:2:17: artifact `era5`: `git-tree-sha1` is not a valid hash \
             (expected 40 hex digits, found 3 characters); it must be the 40 hex digits of the git \
             tree hash of the artifact's content"
    );
    assert!(err("[era5]\ngit-tree-sha1 = 5\n").contains(":2:17: artifact `era5`: `git-tree-sha1` must be a string of 40 hex digits, found an integer"));
    assert!(
        err(&format!(
            "[era5]\ngit-tree-sha1 = \"{H1}\"\nlazy = \"yes\"\n"
        ))
        .contains(":3:8: artifact `era5`: `lazy` must be `true` or `false`, found a string")
    );
    assert!(err(&format!("[era5]\ngit-tree-sha1 = \"{H1}\"\n[era5.download]\nurl = \"u\"\n")).contains(":3:1: artifact `era5`: `download` is a table; it must be an array of tables: write `[[era5.download]]`"));
    assert!(
        err(&format!(
            "[era5]\ngit-tree-sha1 = \"{H1}\"\ndownload = [\"u\"]\n"
        ))
        .contains(":3:13: artifact `era5`: download 1 is a string;")
    );
    assert!(err("x = []\n").contains("the array lists no platform variants"));
    assert!(err("x = [1]\n").contains(":1:6: artifact `x`: element 1 of the array is an integer"));
}

#[test]
fn reports_download_errors() {
    let base = format!("[\"a.b\"]\ngit-tree-sha1 = \"{H1}\"\n[[\"a.b\".download]]\n");
    assert_eq!(
        err(&format!("{base}url = \"https://x\"\n")),
        "`dir/Artifacts.toml`:3:1: artifact `a.b`: download 1 (`[[\"a.b\".download]]`) has no \
             `sha256`; add `sha256 = \"<64 hex digits>\"`, the SHA-256 of the tarball (`sha256sum <file>`)"
    );
    assert_eq!(
        err(&format!("{base}sha256 = \"{S1}\"\n")),
        "`dir/Artifacts.toml`:3:1: artifact `a.b`: download 1 (`[[\"a.b\".download]]`) has no \
             `url`; add `url = \"https://...\"` or remove the section"
    );
    assert!(err(&format!("{base}url = \"u\"\nsha256 = \"{}\"\n", &S1[1..])).contains(":5:10: artifact `a.b`: download 1: `sha256` is not a valid digest (expected 64 hex digits, found 63 characters)"));
    assert!(
        err(&format!("{base}url = \"u\"\nsha256 = \"{}z\"\n", &S1[1..]))
            .contains("`z` is not a hex digit")
    );
    assert!(
        err(&format!("{base}url = 1\nsha256 = \"{S1}\"\n"))
            .contains(":4:7: artifact `a.b`: download 1: `url` must be a string, found an integer")
    );
    assert!(err(&format!("{base}url = \" \"\nsha256 = \"{S1}\"\n")).contains("empty `url`"));
    assert!(err(&format!("{base}url = \"u\"\nsha256 = \"{S1}\"\nsize = -1\n")).contains(":6:8: artifact `a.b`: download 1: `size` must be a non-negative number of bytes, found `-1`"));
    assert!(
        err(&format!(
            "{base}url = \"u\"\nsha256 = \"{S1}\"\nsize = 1.5\n"
        ))
        .contains("`size` must be an integer number of bytes, found a float")
    );
    assert!(
        err(&format!("{base}url = \"u\"\nsha256 = 3\n"))
            .contains("`sha256` must be a string of 64 hex digits, found an integer")
    );
}

#[test]
fn reports_platform_errors_and_collects_all() {
    let text = format!(
        "[[lib]]\nos = \"linux\"\ngit-tree-sha1 = \"{H1}\"\n[[lib]]\nos = 1\narch = \"x86_64\"\ngit-tree-sha1 = \"{H1}\"\n[bad]\n"
    );
    let errors = Manifest::parse_all(&text, Path::new("A.toml")).unwrap_err();
    let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "`A.toml`:1:1: artifact `lib`: platform variant 1 (`[[lib]]` on line 1): missing \
                 platform tag `arch`; every `[[lib]]` entry needs `os` and `arch` (e.g. `os = \
                 \"linux\"`, `arch = \"x86_64\"`), or use a single `[lib]` table if the artifact is \
                 the same on every platform",
            "`A.toml`:5:6: artifact `lib`: platform variant 2 (`[[lib]]` on line 4): platform \
                 tag `os` must be a string, found an integer",
            "`A.toml`:8:1: artifact `bad`: missing `git-tree-sha1`; add `git-tree-sha1 = \
                 \"<40 hex digits>\"`, the git tree hash of the artifact's content",
        ]
    );
    // `parse` returns the first of them.
    assert_eq!(
        Manifest::parse(&text, Path::new("A.toml"))
            .unwrap_err()
            .to_string(),
        shown[0]
    );
}

#[test]
fn lookups_by_name_find_every_entry_and_broken_one() {
    let mut text = String::new();
    for i in 0..500 {
        text += &format!("[a{i}]\ngit-tree-sha1 = \"{H1}\"\n");
    }
    text += "[broken]\nlazy = true\n";
    let m = Manifest::parse_lenient(&text, Path::new("A.toml")).unwrap();
    assert_eq!(m.artifacts().len(), 500);
    for i in [0, 1, 250, 499] {
        let name = format!("a{i}");
        assert!(m.get(&name).is_some(), "{name}");
        assert!(m.broken_entry(&name).is_none());
        m.select(&name, &Platform::host()).unwrap();
    }
    assert!(m.get("a500").is_none() && m.get("broken").is_none());
    assert_eq!(m.broken().len(), 1);
    let errors = m.broken_entry("broken").unwrap();
    assert!(errors[0].to_string().contains("missing `git-tree-sha1`"));
    assert!(matches!(
        m.select("broken", &Platform::host()),
        Err(SelectError::Broken { .. })
    ));
    // A hand-made manifest that repeats a name: the first entry wins, as a scan would.
    let first = m.artifacts()[0].1.clone();
    let mut other = first.clone();
    if let ArtifactEntry::Single(v) = &mut other {
        v.lazy = !v.lazy;
    }
    assert_ne!(first, other);
    let made = Manifest::new(
        PathBuf::from("B.toml"),
        vec![("x".into(), first.clone()), ("x".into(), other)],
        Vec::new(),
    );
    assert_eq!(made.get("x"), Some(&first));
    assert_eq!(made.names().collect::<Vec<_>>(), ["x", "x"]);
}

#[test]
fn parses_empty_and_comment_only_files() {
    assert!(parse("").unwrap().artifacts().is_empty());
    assert!(parse("# nothing here\n\n").unwrap().artifacts().is_empty());
}

#[test]
fn loads_and_finds_files() {
    let dir = tempfile::tempdir().unwrap();
    let e = Manifest::find_in_dir(dir.path()).unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.contains("no JuliaArtifacts.toml or Artifacts.toml found"),
        "{shown}"
    );
    assert!(shown.contains(&dir.path().join("JuliaArtifacts.toml").display().to_string()));
    assert!(shown.contains(&dir.path().join("Artifacts.toml").display().to_string()));

    let plain = dir.path().join("Artifacts.toml");
    std::fs::write(&plain, format!("[a]\ngit-tree-sha1 = \"{H1}\"\n")).unwrap();
    assert_eq!(Manifest::find_in_dir(dir.path()).unwrap(), plain);
    let julia = dir.path().join("JuliaArtifacts.toml");
    std::fs::write(&julia, format!("[b]\ngit-tree-sha1 = \"{H2}\"\n")).unwrap();
    assert_eq!(Manifest::find_in_dir(dir.path()).unwrap(), julia);
    let m = Manifest::load(&julia).unwrap();
    assert_eq!(m.path, julia);
    assert_eq!(m.names().collect::<Vec<_>>(), ["b"]);

    let missing = dir.path().join("nope.toml");
    let e = Manifest::load(&missing).unwrap_err();
    assert!(matches!(e.kind, ManifestErrorKind::Io(_)));
    assert!(
        e.to_string()
            .starts_with(&format!("`{}`: cannot read file:", missing.display()))
    );

    let binary = dir.path().join("bin.toml");
    std::fs::write(&binary, b"[a]\n\xff\n").unwrap();
    assert!(
        Manifest::load(&binary)
            .unwrap_err()
            .to_string()
            .contains("not UTF-8 (invalid byte at offset 4)")
    );
}

#[test]
fn single_entry_fits_any_platform() {
    let m = parse(&format!("[a]\ngit-tree-sha1 = \"{H1}\"\n")).unwrap();
    let v = m.select("a", &Platform::default()).unwrap();
    assert_eq!(v.git_tree_sha1.to_hex(), H1);
}
