//! Compatibility corpus: every real `Artifacts.toml` in `shared/corpus/julia-artifacts/` loads,
//! validates without panicking, and a few known facts hold.
//!
//! The corpus is found at `<CARGO_MANIFEST_DIR>/../../shared/corpus/julia-artifacts` (the
//! workspace's sibling `shared/`), else in the nearest ancestor holding
//! `shared/corpus/julia-artifacts`, else at `$CLIMA_ARTIFACTS_CORPUS_DIR`. Absent: the test prints
//! a message and passes, except in CI (`CI=true`) where it fails.

use std::path::{Path, PathBuf};

use clima_artifact_manifest::{ArtifactEntry, Manifest, Platform, validate::validate_with};

fn corpus_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CLIMA_ARTIFACTS_CORPUS_DIR") {
        return Some(PathBuf::from(dir));
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let direct = here.join("../../shared/corpus/julia-artifacts");
    if direct.is_dir() {
        return Some(direct);
    }
    here.ancestors()
        .map(|a| a.join("shared/corpus/julia-artifacts"))
        .find(|p| p.is_dir())
}

fn corpus() -> Option<PathBuf> {
    match corpus_dir() {
        Some(dir) => Some(dir),
        None => {
            let msg = "manifest corpus not found (looked for ../../shared/corpus/julia-artifacts \
                       from the tests package, its ancestors, and $CLIMA_ARTIFACTS_CORPUS_DIR)";
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{msg}; CI must have it");
            }
            clima_artifact_tests::skip(msg);
            None
        }
    }
}

fn load(dir: &Path, file: &str) -> Manifest {
    Manifest::load(&dir.join(file)).unwrap_or_else(|e| panic!("{e}"))
}

fn variants<'m>(m: &'m Manifest, name: &str) -> &'m [clima_artifact_manifest::ArtifactVariant] {
    match m.get(name).unwrap_or_else(|| panic!("`{name}` missing")) {
        ArtifactEntry::Single(v) => std::slice::from_ref(v),
        ArtifactEntry::PlatformSpecific(vs) => vs,
    }
}

#[test]
fn every_corpus_file_loads_and_validates() {
    let Some(dir) = corpus() else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 50,
        "only {} files in {}",
        files.len(),
        dir.display()
    );
    let host = Platform::native();
    let mut artifacts = 0;
    for file in &files {
        let m = Manifest::load(file).unwrap_or_else(|e| panic!("{e}"));
        artifacts += m.artifacts().len();
        // Validation and selection must not panic on anything real.
        let _ = validate_with(&m, Path::new("/depot/artifacts/Overrides.toml"));
        for name in m.names() {
            let _ = m.select(name, &host);
        }
    }
    assert!(artifacts > 100, "{artifacts} artifacts in the corpus");
}

#[test]
fn platform_variants_and_host_selection() {
    let Some(dir) = corpus() else { return };
    let m = load(&dir, "JuliaBinaryWrappers__OpenBLAS_jll.jl.toml");
    let vs = variants(&m, "OpenBLAS");
    assert_eq!(vs.len(), 47);
    assert!(
        vs.iter()
            .all(|v| v.platform.is_some() && v.downloads.len() == 1)
    );
    let first = vs[0].platform.as_ref().unwrap();
    assert_eq!(first.get("os"), Some("macos"));
    assert_eq!(first.get("arch"), Some("aarch64"));
    assert_eq!(first.get("libgfortran_version"), Some("5.0.0"));

    let linux = Platform::from_tags([("os", "linux"), ("arch", "x86_64"), ("libc", "glibc")]);
    let chosen = m.select("OpenBLAS", &linux).unwrap();
    let tags = chosen.platform.as_ref().unwrap();
    assert_eq!(tags.get("os"), Some("linux"));
    assert_eq!(tags.get("arch"), Some("x86_64"));
    assert_eq!(tags.get("libc"), Some("glibc"));
    // Not the `sanitize = "memory"` build listed after it: sanitizer builds are opt-in.
    assert_eq!(tags.get("sanitize"), None);
    assert!(
        chosen.downloads[0]
            .url
            .ends_with("x86_64-linux-gnu-libgfortran5.tar.gz")
    );
    let mut sanitized = linux.clone();
    sanitized.apply_tags("sanitize=memory").unwrap();
    let chosen = m.select("OpenBLAS", &sanitized).unwrap();
    assert!(
        chosen.downloads[0]
            .url
            .ends_with("x86_64-linux-gnu-sanitize+memory.tar.gz")
    );
    let mut gf4 = linux.clone();
    gf4.apply_tags("libgfortran_version=4.0.0").unwrap();
    let chosen = m.select("OpenBLAS", &gf4).unwrap();
    assert_eq!(
        chosen.platform.as_ref().unwrap().get("libgfortran_version"),
        Some("4.0.0")
    );
    assert!(
        chosen.downloads[0]
            .url
            .contains("x86_64-linux-gnu-libgfortran4")
    );
    // A major version alone selects the matching `x.0.0` variant.
    let mut gf5 = linux.clone();
    gf5.apply_tags("libgfortran_version=5").unwrap();
    let chosen = m.select("OpenBLAS", &gf5).unwrap();
    assert!(
        chosen.downloads[0]
            .url
            .contains("x86_64-linux-gnu-libgfortran5")
    );

    let e = m
        .select(
            "OpenBLAS",
            &Platform::from_tags([("os", "plan9"), ("arch", "x86_64")]),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "artifact `OpenBLAS` has no variant for this platform (arch=x86_64,os=plan9); offered: "
        ),
        "{e}"
    );

    // Tectonic lists the Windows platform of `biber_bin` twice: the last one is chosen.
    let m = load(&dir, "0x0f0f0f__Tectonic.jl.toml");
    let win = Platform::from_tags([("os", "windows"), ("arch", "x86_64")]);
    let windows: Vec<u32> = variants(&m, "biber_bin")
        .iter()
        .filter(|v| v.platform.as_ref().unwrap().get("os") == Some("windows"))
        .map(|v| v.line)
        .collect();
    assert_eq!(windows[..2], [18, 26]);
    let chosen = m.select("biber_bin", &win).unwrap();
    assert_eq!(
        chosen.git_tree_sha1.to_hex(),
        "928b1a8f7edd1bce5f2ff237de16fd03bc43e6da"
    );
    assert_eq!(chosen.line, 76);
    assert_eq!(Some(&chosen.line), windows.last());
}

#[test]
fn lazy_flags_and_entries_without_downloads() {
    let Some(dir) = corpus() else { return };
    let m = load(&dir, "CliMA__ClimaAtmos.jl.toml");
    let aerosol = &variants(&m, "aerosol_concentrations")[0];
    assert!(!aerosol.lazy);
    assert!(aerosol.downloads.is_empty());
    assert_eq!(aerosol.line, 1);
    let forcing = &variants(&m, "cfsite_gcm_forcing")[0];
    assert!(forcing.lazy);
    assert_eq!(forcing.downloads.len(), 1);
    assert!(forcing.downloads[0].url.ends_with(".nc"));

    let m = load(&dir, "AtelierArith__RustToolChain.jl.toml");
    let vs = variants(&m, "RustToolChain");
    assert_eq!(vs.len(), 27);
    assert!(vs.iter().all(|v| v.lazy));
    // `libc = "gnu"`, which Julia rejects, loads here and is reported by validation.
    assert_eq!(vs[0].platform.as_ref().unwrap().get("libc"), Some("gnu"));
    let warnings = validate_with(&m, Path::new("/d/artifacts/Overrides.toml"));
    assert!(
        warnings.iter().any(|w| w.line == Some(1)
            && w.message
                .contains("`libc = \"gnu\"`, which Julia rejects: write `libc = \"glibc\"`")),
        "{warnings:?}"
    );
}

#[test]
fn names_hashes_and_odd_files() {
    let Some(dir) = corpus() else { return };
    let m = load(&dir, "CliMA__ClimaArtifacts__clm_data.toml");
    let names: Vec<&str> = m.names().collect();
    assert_eq!(names[..2], ["clm_data_0.9x1.25", "clm_data_0.125x0.125"]);
    let v = &variants(&m, "clm_data_0.9x1.25")[0];
    assert_eq!(
        v.git_tree_sha1.to_hex(),
        "283c62220fca8c4afe36a62348d3e9a159af2ee9"
    );
    assert_eq!(
        v.downloads[0].sha256.to_hex(),
        "88d5899a729de800017a74bd8a7278582c2c55c0d8730a529bae384425d70e4e"
    );

    // A comment-only file has no artifacts.
    let m = load(
        &dir,
        "JuliaLang__Pkg.jl__ArtifactTOMLSearch__julia_artifacts_test.toml",
    );
    assert!(m.artifacts().is_empty());

    // Pkg's fixture with an all-zero sha256 still parses (the download would fail).
    let m = load(&dir, "JuliaLang__Pkg.jl__bad__incorrect_sha256.toml");
    let v = &variants(&m, "broken_artifact")[0];
    assert_eq!(v.downloads[0].sha256.0, [0; 32]);

    // A name starting with a digit.
    let found = std::fs::read_dir(&dir).unwrap().any(|e| {
        let p = e.unwrap().path();
        p.extension().is_some_and(|x| x == "toml")
            && Manifest::load(&p)
                .unwrap()
                .names()
                .any(|n| n == "2020_leaf_invest_weather")
    });
    assert!(found, "no corpus file defines `2020_leaf_invest_weather`");
}

#[test]
fn truncated_corpus_files_error_cleanly() {
    // Every prefix of a few real files either parses or gives located errors; none panics.
    let Some(dir) = corpus() else { return };
    for file in [
        "CliMA__ClimaAtmos.jl.toml",
        "CliMA__ClimaArtifacts__clm_data.toml",
        "0x0f0f0f__Tectonic.jl.toml",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let text = &text[..text.len().min(4000)];
        for end in (0..=text.len()).filter(|i| text.is_char_boundary(*i)) {
            if let Err(errors) = Manifest::parse_all(&text[..end], Path::new(file)) {
                assert!(!errors.is_empty());
                for e in errors {
                    assert!(e.line.is_some(), "{file} cut at {end}: unlocated {e}");
                }
            }
        }
    }
}

#[test]
fn mutated_corpus_files_never_panic() {
    // A deterministic poor man's fuzzer (the cargo-fuzz targets go further): overwrite a few
    // bytes of real files with TOML punctuation and parse as a manifest and as overrides.
    let Some(dir) = corpus() else { return };
    const ALPHABET: &[u8] = b"[]{}\"'=.,#\n \\0123456789abcdef-+:ux";
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    for file in [
        "JuliaLang__Pkg.jl__ArtifactOverrideLoading.toml",
        "CliMA__ClimaArtifacts__clm_data.toml",
        "0x0f0f0f__Tectonic.jl.toml",
    ] {
        let original = std::fs::read(dir.join(file)).unwrap();
        let original = &original[..original.len().min(3000)];
        for _ in 0..1500 {
            let mut bytes = original.to_vec();
            for _ in 0..1 + next() % 4 {
                let at = next() % bytes.len();
                bytes[at] = ALPHABET[next() % ALPHABET.len()];
            }
            let Ok(text) = String::from_utf8(bytes) else {
                continue;
            };
            let path = Path::new(file);
            if let Err(errors) = Manifest::parse_all(&text, path) {
                assert!(!errors.is_empty());
            }
            let _ = clima_artifact_manifest::OverridesFile::parse_all(&text, path);
        }
    }
}
