#!/usr/bin/env bash
# Benchmark: wall time of a 16-rank MPI fetch of one artifact versus a
# single-process fetch of the same artifact (median of 5 runs each, fresh depot every run).
# Not a test: prints numbers and the ratio (target: 16-rank <= 1.2x single process).
#
#   scripts/bench-mpi.sh [size_mb=64] [ranks=16] [runs=5]
#   PROFILE=dev scripts/bench-mpi.sh      # skip the release build (numbers less meaningful)
#   scripts/bench-mpi.sh node-local [size=256M] [rate_mb_per_connection=10] [runs=3]
#       # node-local mode: one download per job, 4 ranks as 2 and 4 nodes, GETs counted
#       # (scripts/bench/mpi-node-local.sh)
#
# Serves a tarball of incompressible data from a loopback `python3 -m http.server`; the
# single-process fetch is `install_one` (no MPI), the MPI fetch is `mpirun -n <ranks> mpi_fetch`,
# which includes MPI start-up (also reported alone as `mpirun -n <ranks>` of a no-op fetch of an
# already installed artifact).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = node-local ]; then
    shift
    exec bash scripts/bench/mpi-node-local.sh "$@"
fi

size_mb="${1:-64}"; ranks="${2:-16}"; runs="${3:-5}"
profile="${PROFILE:-release}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --profile "$profile" -p clima-artifact-tests --features mpi \
    --bin mpi_fetch --bin install_one >&2
dir_name="$profile"; [ "$profile" = dev ] && dir_name=debug
bin="$CARGO_TARGET_DIR/$dir_name"

source scripts/bench/dataset.sh
mpirun_setup

work="$(mktemp -d)"
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# The artifact: incompressible files, tarred and gzipped; hashes from sha256sum and real git.
mkdir -p "$work/content/data" "$work/serve"
for i in 0 1 2 3; do
    head -c "$((size_mb * 1024 * 1024 / 4))" /dev/urandom > "$work/content/data/part$i.bin"
done
tar -C "$work/content" -czf "$work/serve/bench.tar.gz" data
sha="$(sha256sum "$work/serve/bench.tar.gz" | cut -d' ' -f1)"
tree="$(cd "$work/content" && git init -q && git add -A && git write-tree)"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/serve" >/dev/null 2>&1 &
server_pid=$!
for _ in $(seq 50); do curl -sfI -o /dev/null "http://127.0.0.1:$port/bench.tar.gz" && break; sleep 0.1; done

cat > "$work/Artifacts.toml" <<TOML
[bench]
git-tree-sha1 = "$tree"

    [[bench.download]]
    url = "http://127.0.0.1:$port/bench.tar.gz"
    sha256 = "$sha"
TOML

export CLIMA_ARTIFACTS_PROGRESS=0
# seconds of wall time of "$@", with a fresh depot in CLIMA_ARTIFACTS_DEPOT_PATH
timed() {
    local depot="$work/depot-$RANDOM$RANDOM"
    local start end
    start="$(date +%s.%N)"
    CLIMA_ARTIFACTS_DEPOT_PATH="$depot" "$@" >/dev/null
    end="$(date +%s.%N)"
    rm -rf "$depot"
    calc "$end - $start"
}
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

single=(); multi=()
for _ in $(seq "$runs"); do
    single+=("$(timed "$bin/install_one" manifest "$work/Artifacts.toml" bench)")
    multi+=("$(timed mpirun "${mpirun_flags[@]}" -n "$ranks" "$bin/mpi_fetch" "$work/Artifacts.toml" bench)")
done
# MPI start-up alone: the artifact is already installed, nothing is fetched.
warm="$work/depot-warm"
CLIMA_ARTIFACTS_DEPOT_PATH="$warm" "$bin/install_one" manifest "$work/Artifacts.toml" bench >/dev/null
startup=()
for _ in $(seq "$runs"); do
    s="$(date +%s.%N)"
    CLIMA_ARTIFACTS_DEPOT_PATH="$warm" mpirun "${mpirun_flags[@]}" -n "$ranks" "$bin/mpi_fetch" "$work/Artifacts.toml" bench >/dev/null
    e="$(date +%s.%N)"
    startup+=("$(calc "$e - $s")")
done

s_med="$(printf '%s\n' "${single[@]}" | median)"
m_med="$(printf '%s\n' "${multi[@]}" | median)"
u_med="$(printf '%s\n' "${startup[@]}" | median)"
printf 'artifact: %s MB incompressible, profile %s, %s runs each\n' "$size_mb" "$profile" "$runs"
printf 'single process fetch (install_one):     median %.3f s  [%s]\n' "$s_med" "${single[*]}"
printf '%2d-rank fetch (mpirun mpi_fetch):       median %.3f s  [%s]\n' "$ranks" "$m_med" "${multi[*]}"
printf '%2d-rank no-op (MPI start-up, installed): median %.3f s\n' "$ranks" "$u_med"
printf 'ratio %d-rank / single: %.2f (target <= 1.2); excluding start-up: %.2f\n' "$ranks" \
    "$(calc "$m_med / $s_med")" "$(calc "($m_med - $u_med) / $s_med")"
