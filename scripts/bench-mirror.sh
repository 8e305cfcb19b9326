#!/usr/bin/env bash
# Benchmark: `clima-artifacts mirror` of 20 small artifacts from a loopback server that adds
# 50 ms to every request, against installing them one after the other, in the same run
# (issue 39: the mirror takes at most 1/4 of the sequential time). Not a test: prints a
# Markdown table of medians.
#
#   scripts/bench-mirror.sh                   # 20 artifacts, 50 ms, 5 runs
#   scripts/bench-mirror.sh --count 40 --latency 100 --runs 3 --no-build
#
# Options (defaults in brackets):
#   --count N      artifacts served [20]
#   --latency MS   added to every request by the server [50]
#   --runs N       runs per command, median reported [5]
#   --no-build     use the release binaries already in $CARGO_TARGET_DIR/release
#
# Commands timed, each into a fresh depot (stdout to /dev/null):
#   mirror --jobs 8   the default: 8 installs at once, as Julia's Pkg
#   mirror --jobs 1   the same, one after the other (the baseline)
#   N x fetch         `clima-artifacts fetch NAME` once per artifact, one after the other
set -euo pipefail
if [ -n "${LC_ALL:-}" ]; then export LANG="$LC_ALL"; unset LC_ALL; fi
export LC_NUMERIC=C
cd "$(dirname "$0")/.."
repo="$PWD"

count=20; latency=50; runs=5; build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --count) count="$2"; shift 2 ;;
        --latency) latency="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-mirror.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
if [ "$build" = 1 ]; then
    cargo build --release -p clima-artifacts-cli --bin clima-artifacts >&2
    cargo build --release -p clima-artifact-tests --bin mirror_server >&2
fi
cli="$CARGO_TARGET_DIR/release/clima-artifacts"
server="$CARGO_TARGET_DIR/release/mirror_server"
for p in "$cli" "$server"; do
    [ -x "$p" ] || { echo "bench-mirror.sh: no executable at \`$p\`" >&2; exit 1; }
done

work="$(mktemp -d)"
mkfifo "$work/stdin"
"$server" "$work/collection" "$count" "$latency" <"$work/stdin" >"$work/manifest" &
server_pid=$!
exec 3>"$work/stdin"   # the server serves until this closes
trap 'exec 3>&-; wait "$server_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/manifest" ] && break; sleep 0.1; done
manifest="$(head -n 1 "$work/manifest")"
[ -f "$manifest" ] || { echo "bench-mirror.sh: the server wrote no manifest" >&2; exit 1; }
mapfile -t names < <(grep -o '^\[a[0-9]*\]' "$manifest" | tr -d '[]')
echo "bench-mirror.sh: ${#names[@]} artifacts, ${latency} ms per request" >&2

export CLIMA_ARTIFACTS_PROGRESS=0
unset CLIMA_ARTIFACTS_JULIA_INTEROP CLIMA_ARTIFACTS_OFFLINE
sample() {
    local start end
    start=$EPOCHREALTIME
    "$@" >/dev/null
    end=$EPOCHREALTIME
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }'
}
fetch_each() {
    local depot="$1" n
    for n in "${names[@]}"; do
        CLIMA_ARTIFACTS_DEPOT_PATH="$depot" "$cli" fetch "$n" --manifest "$manifest"
    done
}
declare -A samples
commands=("mirror --jobs 8" "mirror --jobs 1" "${#names[@]} x fetch")
for ((r = 0; r < runs; r++)); do
    for cmd in "${commands[@]}"; do
        depot="$work/depot-$r-${cmd// /_}"
        mkdir -p "$depot"
        case "$cmd" in
            "mirror --jobs 8") t=$(sample "$cli" mirror "$manifest" --depot "$depot" --jobs 8) ;;
            "mirror --jobs 1") t=$(sample "$cli" mirror "$manifest" --depot "$depot" --jobs 1) ;;
            *) t=$(sample fetch_each "$depot") ;;
        esac
        installed=$(find "$depot/artifacts" -mindepth 1 -maxdepth 1 -regextype egrep -regex '.*/[0-9a-f]{40}' | wc -l)
        [ "$installed" = "${#names[@]}" ] || { echo "bench-mirror.sh: $cmd installed $installed" >&2; exit 1; }
        samples["$cmd"]+="$t "
        echo "bench-mirror.sh: run $((r + 1))/$runs $cmd: $t s" >&2
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
base=$(echo "${samples["mirror --jobs 1"]}" | median)
echo
echo "${#names[@]} artifacts, ${latency} ms per request, median of $runs runs:"
echo
echo "| command | seconds | against \`mirror --jobs 1\` |"
echo "|---|---:|---:|"
for cmd in "${commands[@]}"; do
    m=$(echo "${samples["$cmd"]}" | median)
    echo "| \`$cmd\` | $m | $(awk -v a="$m" -v b="$base" 'BEGIN { printf "%.2f", a / b }') |"
done
