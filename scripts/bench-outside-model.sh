#!/usr/bin/env bash
# A model crate outside this workspace, as a new user makes one from the README: how fast its
# debug build installs a large artifact, against its release build, with and without the dev
# profile block that README "Using it in a model" gives.
#
#   scripts/bench-outside-model.sh [SIZE] [FILES] [RUNS]     (defaults: 200M 2000 3)
#   BEFORE_BLOCK=old-dev-profile.toml PLAIN=0 scripts/bench-outside-model.sh 128M 2000 7
#
# Builds three copies of one small model (in ${TMPDIR:-/tmp}/clima-outside-model, each with its
# own target directory; the first time takes a few minutes): `debug-plain` (a Cargo.toml with no
# profile section), `debug-readme` (the README's block pasted in), and `release`. Each run
# installs the artifact into a fresh depot from `python3 -m http.server` on 127.0.0.1 and is
# timed end to end (process start to exit). Prints the median of RUNS per build.
#
# BEFORE_BLOCK=FILE adds a fourth build, `debug-before`, with FILE pasted in instead of the
# README's block (an earlier version of it: `git show REV:clima-artifact-build/dev-profile.toml`),
# measured in the same rotation; PLAIN=0 leaves out `debug-plain` (and its checks).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
size="${1:-200M}" files="${2:-2000}" runs="${3:-3}"
source "$repo/scripts/bench/dataset.sh"

work="${TMPDIR:-/tmp}/clima-outside-model"
mkdir -p "$work"
data="$work/data-$size-$files"
tarball="$work/serve/data-$size-$files.tar.gz"
mkdir -p "$work/serve"
make_dataset "$data" "$tarball" "$size" "$files" 42
tree="$(cat "$data/tree")" sha="$(cat "$data/sha256")"

# The profile block README "Using it in a model" shows (a test holds the README to this file),
# so that the benchmark measures what a user copies.
block="$(cat "$repo/clima-artifact-build/dev-profile.toml")"


port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/serve" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT

make_model() { # DIR PROFILE_BLOCK
    local dir="$1"
    mkdir -p "$dir/src"
    cat > "$dir/Cargo.toml" <<TOML
[package]
name = "outside-model"
version = "0.1.0"
edition = "2024"

[dependencies]
clima-artifact-runtime = { path = "$repo/clima-artifact-runtime" }
[build-dependencies]
clima-artifact-build = { path = "$repo/clima-artifact-build" }

$2
TOML
    printf 'fn main() {\n    clima_artifact_build::validate();\n}\n' > "$dir/build.rs"
    cat > "$dir/src/main.rs" <<'RS'
use clima_artifact_runtime::{Singleton, clima_artifact};
fn main() {
    match clima_artifact!("data", &Singleton) {
        Ok(path) => println!("{}", path.display()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
RS
    bench_manifest "$dir/Artifacts.toml" data "$tree" "$sha" "http://127.0.0.1:$port/$(basename "$tarball")"
    cp "$repo/Cargo.lock" "$dir/Cargo.lock"
}

plain="${PLAIN:-1}"
make_model "$work/plain" ""
make_model "$work/readme" "$block"
builds=(debug-readme:readme/target/debug release:plain/target/release)
[ "$plain" = 0 ] || builds=(debug-plain:plain/target/debug "${builds[@]}")
if [ -n "${BEFORE_BLOCK:-}" ]; then
    make_model "$work/before" "$(cat "$BEFORE_BLOCK")"
    builds=(debug-before:before/target/debug "${builds[@]}")
fi
echo "== building (${builds[*]%%:*}), each from nothing but the registry cache"
build() { # NAME DIR ARGS... : times the build, keeps its output in $work/NAME.build
    local name="$1" dir="$2" t0 t1
    shift 2
    t0="$(date +%s.%N)"
    (cd "$dir" && cargo build "$@" > "$work/$name.build" 2>&1) || { cat "$work/$name.build"; exit 1; }
    t1="$(date +%s.%N)"
    printf '%-13s built in %5.0f s\n' "$name" "$(python3 -c "print($t1 - $t0)")"
}
[ -z "${BEFORE_BLOCK:-}" ] || build debug-before "$work/before"
[ "$plain" = 0 ] || build debug-plain "$work/plain"
build debug-readme "$work/readme"
build release "$work/plain" --release
# The build script's warning (clima_artifact_build::validate) for the plain debug build only.
slow_build="clima-artifacts: this debug build compiles"
! grep -q "$slow_build" "$work/debug-readme.build" || { echo "error: debug-readme warned" >&2; exit 1; }
if [ "$plain" != 0 ]; then
    grep -q "$slow_build" "$work/debug-plain.build" || { echo "error: debug-plain: no build warning" >&2; exit 1; }
    grep -m1 "$slow_build" "$work/debug-plain.build" | cut -c1-160
fi

run_one() { # BINARY -> seconds
    local depot="$work/depot"
    rm -rf "$depot"
    sync
    local t0 t1
    t0="$(date +%s.%N)"
    CLIMA_ARTIFACTS_DEPOT_PATH="$depot" CLIMA_ARTIFACTS_PROGRESS=0 "$1" > /dev/null 2> "$2"
    t1="$(date +%s.%N)"
    python3 -c "print(f'{$t1 - $t0:.2f}')"
}
declare -A times
for _ in $(seq "$runs"); do
    for v in "${builds[@]}"; do
        name="${v%%:*}" bin="$work/${v#*:}/outside-model"
        times[$name]+="$(run_one "$bin" "$work/$name.run") "
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
rel="$(median <<<"${times[release]}")"
echo "== $size / $files files, .tar.gz $(du -h "$tarball" | cut -f1), medians of $runs (s)"
for v in "${builds[@]}"; do
    name="${v%%:*}"
    m="$(median <<<"${times[$name]}")"
    printf '%-13s %6s s  (%sx release)   runs: %s\n' "$name" "$m" "$(python3 -c "print(f'{$m/$rel:.2f}')")" "${times[$name]}"
done
# The run's own notice (once, after a large install) for the plain debug build only.
slow_run="this debug build hashes at"
for name in debug-readme release; do
    ! grep -q "$slow_run" "$work/$name.run" || { echo "error: $name: slow notice" >&2; exit 1; }
done
[ "$plain" = 0 ] && exit 0
grep -q "$slow_run" "$work/debug-plain.run" || { echo "error: debug-plain: no notice in its log" >&2; exit 1; }
grep -m1 "$slow_run" "$work/debug-plain.run" | cut -c1-160
