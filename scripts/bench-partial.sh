#!/usr/bin/env bash
# Only the files a run reads (issue 49, item 3; BENCHMARKS.md (b)): the bytes a server sends
# for one file of a seekable artifact of many files, against that file's size and the
# tarball's. `create` makes a seekable `.tar.gz` of a generated dataset (1,000 files, 1 GiB by
# default), `capped_server` (no cap) serves it over loopback, and
# `clima-artifacts fetch data --only PATH` fetches one file into an empty depot; the server's
# own count of body bytes sent (`/__sent/`) is the figure. Each file picked is checked
# afterwards: its bytes are the dataset's, and `artifacts/<hash>` does not exist.
#
#   scripts/bench-partial.sh                   # 1 GiB in 1,000 files; a small, a medium, the largest file
#   nice scripts/bench-partial.sh --size 256M --files 1000 --no-build
#
# Options (defaults in brackets):
#   --size S     unpacked size of the dataset (scripts/bench/gen_dataset.py, mixed kind) [1G]
#   --files N    files in it [1000]
#   --seed N     generator seed [49]
#   --work DIR   scratch space (data cached between invocations)
#                [${TMPDIR:-/tmp}/clima-artifacts-bench]
#   --no-build   use the release binaries already in $CARGO_TARGET_DIR/release
#
# Results: a Markdown table on stdout (file, its size, bytes sent, sent / (file + index)),
# the index's stored size and the tarball's size in a line above it.
set -euo pipefail
if [ -n "${LC_ALL:-}" ]; then export LANG="$LC_ALL"; unset LC_ALL; fi
export LC_NUMERIC=C
cd "$(dirname "$0")/.."
repo="$PWD"

size=1G; files=1000; seed=49; build=1
work="${TMPDIR:-/tmp}/clima-artifacts-bench"
while [ $# -gt 0 ]; do
    case "$1" in
        --size) size="$2"; shift 2 ;;
        --files) files="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-partial.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done
for tool in python3 curl cmp; do
    command -v "$tool" >/dev/null || { echo "bench-partial.sh: \`$tool\` is required" >&2; exit 1; }
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
if [ "$build" = 1 ]; then
    cargo build --release -p clima-artifacts-cli -p clima-artifact-tests \
        --bin clima-artifacts --bin capped_server >&2
fi
cli="$CARGO_TARGET_DIR/release/clima-artifacts"
server_bin="$CARGO_TARGET_DIR/release/capped_server"
note() { printf '[bench-partial %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

data="$work/partial-$size-$files-$seed"
if [ ! -f "$data.done" ]; then
    note "generating $size in $files files"
    rm -rf "$data"
    python3 scripts/bench/gen_dataset.py tree "$data/content" --size "$size" --files "$files" \
        --seed "$seed"
    note "create (seekable)"
    (cd "$data" && "$cli" create content --name data --manifest "$data/Artifacts.toml" \
        --url "http://placeholder/data.tar.gz" --tarball-out "$data/data.tar.gz" >&2)
    touch "$data.done"
fi
tarball="$data/data.tar.gz"
tarball_bytes=$(stat -c %s "$tarball")
# The index's stored length: locator bytes 24..32, the locator being the footer's bytes 16..56.
index_bytes=$(python3 - "$tarball" <<'PY'
import struct, sys
with open(sys.argv[1], "rb") as f:
    f.seek(-66, 2)
    footer = f.read()
print(struct.unpack("<Q", footer[16 + 24:16 + 32])[0])
PY
)

# A small, a medium and the largest regular file of the dataset.
mapfile -t picks < <(cd "$data/content" && find . -type f -printf '%s %P\n' | sort -n | awk '
    { size[NR] = $1; $1 = ""; path[NR] = substr($0, 2) }
    END { print path[int(NR / 10) + 1]; print path[int(NR / 2)]; print path[NR] }')

coproc SERVER { exec "$server_bin" "$tarball" 0; }
read -r url <&"${SERVER[0]}"
base="${url%/data.tar.gz}"
trap 'exec {SERVER[1]}>&-; wait "$SERVER_PID" 2>/dev/null || true' EXIT
sed -i "s|^\( *url = \).*|\1\"$url\"|" "$data/Artifacts.toml"
sent() { curl -s "$base/__sent/data.tar.gz" | cut -d' ' -f1; }
tree=$(sed -n 's/^git-tree-sha1 = "\(.*\)"/\1/p' "$data/Artifacts.toml")

echo "tarball $(numfmt --to=iec-i --suffix=B "$tarball_bytes") ($tarball_bytes bytes), index stored in $index_bytes bytes, $files files"
echo
echo "| file | its size | bytes sent | sent / (file + index) |"
echo "|---|---:|---:|---:|"
for path in "${picks[@]}"; do
    depot="$work/partial-depot"
    rm -rf "$depot"
    before=$(sent)
    CLIMA_ARTIFACTS_DEPOT_PATH="$depot" "$cli" fetch data --manifest "$data/Artifacts.toml" \
        --only "$path" --json > "$work/partial-fetch.json"
    after=$(sent)
    got="$depot/clima_partial/$tree/$path"
    cmp -s "$got" "$data/content/$path" || { note "FAILED: $path differs"; exit 1; }
    [ ! -e "$depot/artifacts/$tree" ] || { note "FAILED: the whole artifact was installed"; exit 1; }
    file_bytes=$(stat -c %s "$data/content/$path")
    bytes=$((after - before))
    ratio=$(awk "BEGIN { printf \"%.3f\", $bytes / ($file_bytes + $index_bytes) }")
    echo "| \`$path\` | $file_bytes | $bytes | $ratio |"
done
