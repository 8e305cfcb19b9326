#!/usr/bin/env bash
# Benchmark: `clima-artifacts list`, `fetch --all` and `verify --all` on a manifest with many
# artifacts, against loading the same manifest alone (issue 25, item 15: these commands were
# quadratic in the number of entries). Not a test: prints a Markdown table of medians.
#
#   scripts/bench-list.sh                          # 100,000 artifacts, 5 runs each
#   scripts/bench-list.sh --artifacts 20000 --runs 3
#   scripts/bench-list.sh --no-build --also-cli before=/path/to/old/clima-artifacts
#
# Options (defaults in brackets):
#   --artifacts N   entries in the generated Artifacts.toml [100000]
#   --runs N        runs per command and binary, median reported [5]
#   --no-build      use the release binary already in $CARGO_TARGET_DIR/release
#   --also-cli NAME=PATH
#                   also time this `clima-artifacts` binary (e.g. a build of an earlier commit)
#                   in the same rotation, reported as NAME; repeatable
#
# The manifest (generated once per run, deterministic): `[name]` entries with a git-tree-sha1
# and no download section, every 5th one lazy, every 10th a `[[name]]` array of two platform
# variants (x86_64 and aarch64 Linux), so `select` runs both of its paths. Nothing is
# installed and there is no network: `list` prints every row ("missing"), `fetch --all` reports
# every non-lazy entry as needing an override, `verify --all` finds none installed. So the
# time is the per-entry bookkeeping of the commands, which is what item 15 is about.
#
# Commands timed (stdout to /dev/null, in an empty depot, offline):
#   load         `clima-artifacts verify dataset_000001 --manifest M`: reads and parses the
#                manifest, the configuration and the overrides, then looks one name up and
#                finds it not installed: the baseline, all a command costs but the per-entry work
#   list         `clima-artifacts list --manifest M`
#   list --json  `clima-artifacts list --json --manifest M`
#   fetch --all  `clima-artifacts fetch --all --manifest M` (exits 1: entries lack downloads)
#   verify --all `clima-artifacts verify --all --manifest M`
set -euo pipefail
if [ -n "${LC_ALL:-}" ]; then export LANG="$LC_ALL"; unset LC_ALL; fi
export LC_NUMERIC=C
invoked_from="$PWD"
cd "$(dirname "$0")/.."
repo="$PWD"

artifacts=100000; runs=5; build=1; names=(); paths=()
while [ $# -gt 0 ]; do
    case "$1" in
        --artifacts) artifacts="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        --also-cli)
            [[ "$2" == ?*=?* ]] || { echo "bench-list.sh: --also-cli takes NAME=PATH" >&2; exit 2; }
            alt="${2#*=}"; [[ "$alt" == /* ]] || alt="$invoked_from/$alt"
            names+=("${2%%=*}"); paths+=("$alt"); shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-list.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done
command -v python3 >/dev/null || { echo "bench-list.sh: \`python3\` is required" >&2; exit 1; }

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
if [ "$build" = 1 ]; then
    cargo build --release -p clima-artifacts-cli --bin clima-artifacts >&2
fi
names=(ours "${names[@]}"); paths=("$CARGO_TARGET_DIR/release/clima-artifacts" "${paths[@]}")
for p in "${paths[@]}"; do
    [ -x "$p" ] || { echo "bench-list.sh: no executable at \`$p\`" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
manifest="$work/Artifacts.toml"
python3 - "$artifacts" "$manifest" <<'EOF'
import hashlib, sys
n, out = int(sys.argv[1]), sys.argv[2]
with open(out, "w") as f:
    for i in range(n):
        name = f"dataset_{i:06d}"
        tree = hashlib.sha1(str(i).encode()).hexdigest()
        lazy = "lazy = true\n" if i % 5 == 0 else ""
        if i % 10 == 9:
            for arch in ("x86_64", "aarch64"):
                h = hashlib.sha1(f"{i}-{arch}".encode()).hexdigest()
                f.write(f'[[{name}]]\ngit-tree-sha1 = "{h}"\nos = "linux"\narch = "{arch}"\n{lazy}\n')
        else:
            f.write(f'[{name}]\ngit-tree-sha1 = "{tree}"\n{lazy}\n')
EOF
echo "bench-list.sh: $artifacts artifacts, $(du -h "$manifest" | cut -f1) of TOML" >&2

export CLIMA_ARTIFACTS_DEPOT_PATH="$work/depot" CLIMA_ARTIFACTS_PROGRESS=0 CLIMA_ARTIFACTS_OFFLINE=1
unset CLIMA_ARTIFACTS_JULIA_INTEROP JULIA_DEPOT_PATH
mkdir -p "$work/depot"
commands=("load" "list" "list --json" "fetch --all" "verify --all")
args_of() {
    case "$1" in
        load) echo "verify dataset_000001" ;;
        *) echo "$1" ;;
    esac
}

# One sample: wall seconds of one command of one binary.
sample() {
    local bin="$1" cmd="$2" start end
    start=$EPOCHREALTIME
    # shellcheck disable=SC2046 # the arguments are words on purpose
    "$bin" $(args_of "$cmd") --manifest "$manifest" >/dev/null 2>"$work/stderr" || true
    end=$EPOCHREALTIME
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }'
}

declare -A samples
for ((r = 0; r < runs; r++)); do
    for ((b = 0; b < ${#paths[@]}; b++)); do
        # Rotate the binaries so none always runs first.
        i=$(((b + r) % ${#paths[@]}))
        for cmd in "${commands[@]}"; do
            t=$(sample "${paths[$i]}" "$cmd")
            samples["$i|$cmd"]+="$t "
            echo "bench-list.sh: run $((r + 1))/$runs ${names[$i]} $cmd: $t s" >&2
        done
    done
done

median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo
echo "$artifacts artifacts, median of $runs runs (s):"
echo
header="| command |"; rule="|---|"
for n in "${names[@]}"; do header+=" $n |"; rule+="---:|"; done
echo "$header"; echo "$rule"
for cmd in "${commands[@]}"; do
    row="| \`$cmd\` |"
    for ((i = 0; i < ${#paths[@]}; i++)); do
        row+=" $(echo "${samples["$i|$cmd"]}" | median) |"
    done
    echo "$row"
done
