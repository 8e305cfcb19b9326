#!/usr/bin/env bash
# Benchmark: `clima-artifacts census` of a few hundred real manifests, against reading and
# parsing the same files alone (issue 39: the census of a few hundred manifests in under a
# second). Not a test: prints a Markdown table of medians.
#
#   scripts/bench-census.sh                 # 6 copies of the corpus (324 manifests), 5 runs
#   scripts/bench-census.sh --copies 10 --runs 3 --no-build
#
# Options (defaults in brackets):
#   --copies N    copies of the corpus laid out as `<repo>/<path>` (SOURCES.tsv) [6]
#   --runs N      runs per command, median reported [5]
#   --corpus DIR  the manifest corpus [$CLIMA_ARTIFACTS_CORPUS_DIR, else shared/corpus/julia-artifacts
#                 in the nearest ancestor folder]
#   --no-build    use the release binaries already in $CARGO_TARGET_DIR/release
#
# Commands timed (stdout to /dev/null):
#   parse         the `parse_manifests` example of clima-artifact-manifest: reads and parses
#                 every manifest the census finds, named on its command line (the baseline)
#   census        `clima-artifacts census TREE` (Markdown)
#   census --json `clima-artifacts census --json TREE`
set -euo pipefail
if [ -n "${LC_ALL:-}" ]; then export LANG="$LC_ALL"; unset LC_ALL; fi
export LC_NUMERIC=C
cd "$(dirname "$0")/.."
repo="$PWD"

copies=6; runs=5; build=1; corpus="${CLIMA_ARTIFACTS_CORPUS_DIR:-}"
if [ -z "$corpus" ]; then
    # The nearest ancestor holding shared/corpus/julia-artifacts (as the tests look for it).
    d="$repo"
    while [ "$d" != / ] && [ ! -d "$d/shared/corpus/julia-artifacts" ]; do d="$(dirname "$d")"; done
    corpus="$d/shared/corpus/julia-artifacts"
fi
while [ $# -gt 0 ]; do
    case "$1" in
        --copies) copies="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --corpus) corpus="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-census.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done
[ -f "$corpus/SOURCES.tsv" ] || { echo "bench-census.sh: no corpus at \`$corpus\` (--corpus DIR)" >&2; exit 1; }

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
if [ "$build" = 1 ]; then
    cargo build --release -p clima-artifacts-cli --bin clima-artifacts >&2
    cargo build --release -p clima-artifact-manifest --example parse_manifests >&2
fi
cli="$CARGO_TARGET_DIR/release/clima-artifacts"
parse="$CARGO_TARGET_DIR/release/examples/parse_manifests"
for p in "$cli" "$parse"; do
    [ -x "$p" ] || { echo "bench-census.sh: no executable at \`$p\`" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tree="$work/tree"
for ((c = 0; c < copies; c++)); do
    tail -n +2 "$corpus/SOURCES.tsv" | while IFS=$'\t' read -r file repo_name path _; do
        to="$tree/copy$c/$repo_name/$path"
        mkdir -p "$(dirname "$to")"
        cp "$corpus/$file" "$to"
    done
done
mapfile -t files < <(find "$tree" -name '*Artifacts.toml' -type f | sort)
echo "bench-census.sh: ${#files[@]} manifests, $(du -sh "$tree" | cut -f1)" >&2

sample() {
    local start end
    start=$EPOCHREALTIME
    "$@" >/dev/null
    end=$EPOCHREALTIME
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }'
}
declare -A samples
commands=("parse" "census" "census --json")
for ((r = 0; r < runs; r++)); do
    for cmd in "${commands[@]}"; do
        case "$cmd" in
            parse) t=$(sample "$parse" "${files[@]}") ;;
            census) t=$(sample "$cli" census "$tree") ;;
            "census --json") t=$(sample "$cli" census --json "$tree") ;;
        esac
        samples["$cmd"]+="$t "
        echo "bench-census.sh: run $((r + 1))/$runs $cmd: $t s" >&2
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo
echo "${#files[@]} manifests, median of $runs runs (s):"
echo
echo "| command | seconds |"
echo "|---|---:|"
for cmd in "${commands[@]}"; do
    echo "| \`$cmd\` | $(echo "${samples["$cmd"]}" | median) |"
done
