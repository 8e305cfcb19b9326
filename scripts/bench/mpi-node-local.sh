#!/usr/bin/env bash
# Benchmark (issue 27): node-local mode, one download per job. 4 ranks grouped into 2 and 4
# "nodes" by CLIMA_ARTIFACTS_NODE_ID, each node with its own node depot, against shared-depot
# mode (one download, one depot) and against what node-local mode did before (every node
# downloading on its own: one `install_one` per node, started at once). Reports the wall time
# to the last rank's path (mpirun's wall time, MPI start-up included and also given alone),
# the GETs the server counted and the tarball bytes it sent. Not a test: prints numbers.
#
#   scripts/bench-mpi.sh node-local [size=256M] [rate_mb_per_connection=10] [runs=3]
#
# The server is `capped_server` (every connection capped, as an archive caps its streams);
# the dataset is shared with scripts/bench-parallel.sh (scripts/bench/dataset.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
size="${1:-256M}"; rate_mb="${2:-10}"; runs="${3:-3}"
rate=$((rate_mb * 1000 * 1000))
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release -p clima-artifact-tests --features mpi \
    --bin mpi_fetch --bin install_one --bin capped_server >&2
bin="$CARGO_TARGET_DIR/release"
source scripts/bench/dataset.sh
mpirun_setup

note() { printf '[bench-mpi node-local %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

work="${BENCH_WORK:-target/bench-work}"
mkdir -p "$work"; work="$(cd "$work" && pwd)"
scratch="$work/node-local-$$"
rm -rf "$scratch"; mkdir -p "$scratch"
data="$work/pdata-$size-200-7"
tarball="$data.tar.gz"
[ -f "$data.done" ] || note "generating the dataset ($size in ~200 files)"
make_dataset "$data" "$tarball" "$size" 200 7
tree="$(cat "$data/tree")"; sha="$(cat "$data/sha256")"
tar_bytes="$(stat -c %s "$tarball")"

serve_capped "$bin/capped_server" "$tarball" "$rate" "$scratch"
gets() { curl -s "$base/__count/$file"; }
sent() { curl -s "$base/__sent/$file" | cut -d' ' -f1; }
bench_manifest "$scratch/Artifacts.toml" bench "$tree" "$sha" "$url"
note "tarball $tar_bytes bytes, cap $rate B/s per connection, $runs runs per mode"
export CLIMA_ARTIFACTS_PROGRESS=0

# mpirun groups of 4 ranks as N nodes, node k's depot under $1.
groups() {
    local depots="$1" nodes="$2" k args=()
    for k in $(seq 0 $((nodes - 1))); do
        [ "$k" -gt 0 ] && args+=(":")
        args+=(-n $((4 / nodes)) env "CLIMA_ARTIFACTS_NODE_ID=node$k"
            "CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT=$depots/node$k"
            "$bin/mpi_fetch" "$scratch/Artifacts.toml" bench)
    done
    printf '%s\n' "${args[@]}"
}

# one MODE: prints "seconds gets bytes" of one run with fresh depots.
one() {
    local mode="$1" run_dir="$scratch/run-$RANDOM$RANDOM" g0 s0 start end
    mkdir -p "$run_dir"
    g0="$(gets)"; s0="$(sent)"
    start="$(date +%s.%N)"
    case "$mode" in
        shared)
            CLIMA_ARTIFACTS_DEPOT_PATH="$run_dir/shared" mpirun "${mpirun_flags[@]}" -n 4 \
                "$bin/mpi_fetch" "$scratch/Artifacts.toml" bench > /dev/null ;;
        node-local-2|node-local-4)
            mapfile -t args < <(groups "$run_dir" "${mode#node-local-}")
            CLIMA_ARTIFACTS_DEPOT_PATH="$run_dir/shared" mpirun "${mpirun_flags[@]}" "${args[@]}" > /dev/null ;;
        per-node-2|per-node-4)
            local pids=() k
            for k in $(seq 0 $((${mode#per-node-} - 1))); do
                CLIMA_ARTIFACTS_DEPOT_PATH="$run_dir/node$k" "$bin/install_one" manifest \
                    "$scratch/Artifacts.toml" bench > /dev/null & pids+=($!)
            done
            wait "${pids[@]}" ;;
    esac
    end="$(date +%s.%N)"
    echo "$(calc "$end - $start") $(( $(gets) - g0 )) $(( $(sent) - s0 ))"
    rm -rf "$run_dir"
}

# MPI start-up alone: 4 ranks, artifact already installed in a shared depot.
warm="$scratch/warm"
CLIMA_ARTIFACTS_DEPOT_PATH="$warm" "$bin/install_one" manifest "$scratch/Artifacts.toml" bench > /dev/null
startup=()
for _ in $(seq "$runs"); do
    s="$(date +%s.%N)"
    CLIMA_ARTIFACTS_DEPOT_PATH="$warm" mpirun "${mpirun_flags[@]}" -n 4 "$bin/mpi_fetch" \
        "$scratch/Artifacts.toml" bench > /dev/null
    startup+=("$(calc "$(date +%s.%N) - $s")")
done
printf 'tarball: %s bytes (%s), every connection capped at %s MB/s, medians of %s runs\n' \
    "$tar_bytes" "$size" "$rate_mb" "$runs"
printf '%-34s %10s %6s %14s\n' mode seconds GETs "bytes sent"
printf '%-34s %10.2f %6s %14s\n' "mpirun -n 4 no-op (MPI start-up)" \
    "$(printf '%s\n' "${startup[@]}" | median)" 0 0
for mode in shared node-local-2 node-local-4 per-node-2 per-node-4; do
    : > "$scratch/samples"
    for _ in $(seq "$runs"); do one "$mode" >> "$scratch/samples"; done
    t="$(cut -d' ' -f1 "$scratch/samples" | median)"
    g="$(cut -d' ' -f2 "$scratch/samples" | median)"
    b="$(cut -d' ' -f3 "$scratch/samples" | median)"
    case "$mode" in
        shared) label="shared depot, 4 ranks" ;;
        node-local-*) label="node-local, 4 ranks as ${mode#node-local-} nodes" ;;
        per-node-*) label="before: ${mode#per-node-} nodes download each" ;;
    esac
    printf '%-34s %10.2f %6s %14s\n' "$label" "$t" "$g" "$b"
done
