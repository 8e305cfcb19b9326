#!/usr/bin/env bash
# Upload of a ~1 GiB artifact tarball to the loopback InvenioRDM archive: `clima-artifacts
# publish --archive` against `curl -T` of the same file to the same server, in one run, each
# the median of --runs runs, with the peak RSS of each (/usr/bin/time -v).
#
#   scripts/bench-archive-upload.sh                 # 1 GiB, 3 runs
#   scripts/bench-archive-upload.sh --size 256M     # a smaller file
#
# Options (defaults in brackets):
#   --size S      size of the incompressible file inside the artifact (head -c) [1G]
#   --runs N      runs per contender [3]
#   --work DIR    scratch space [${TMPDIR:-/tmp}/clima-artifacts-bench-archive]
#   --no-build    use the release binaries already in $CARGO_TARGET_DIR/release
#
# The server is `invenio_server` (clima-artifact-tests/src/bin): the test crate's loopback
# archive, hashing every upload with MD5 as InvenioRDM does and keeping no bytes. Both
# contenders upload into a fresh draft each run; `publish` also makes the draft, sets the
# metadata, commits the file and compares the checksums (a few requests). Its first run also
# checks the tarball's tree hash (unpacking it once into a temp folder, remembered in the
# state file); that run is reported on its own line, the median is of the later ones.
set -euo pipefail
if [ -n "${LC_ALL:-}" ]; then export LANG="$LC_ALL"; unset LC_ALL; fi
export LC_NUMERIC=C
cd "$(dirname "$0")/.."
repo="$PWD"

size=1G; runs=3; build=1
work="${TMPDIR:-/tmp}/clima-artifacts-bench-archive"
while [ $# -gt 0 ]; do
    case "$1" in
        --size) size="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-archive-upload.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done
for tool in python3 curl /usr/bin/time; do
    command -v "$tool" >/dev/null || {
        echo "bench-archive-upload.sh: \`$tool\` is required" >&2
        exit 1
    }
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
if [ "$build" = 1 ]; then
    cargo build --release -p clima-artifacts-cli -p clima-artifact-tests \
        --bin clima-artifacts --bin invenio_server >&2
fi
cli="$CARGO_TARGET_DIR/release/clima-artifacts"
server_bin="$CARGO_TARGET_DIR/release/invenio_server"

note() { printf '[bench-archive %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

mkdir -p "$work"
proj="$work/project"
token="bench-token-$$"
if [ ! -f "$work/made-$size" ]; then
    note "making a $size artifact (not timed)"
    rm -rf "$proj" "$work"/made-*
    mkdir -p "$proj/data"
    head -c "$size" /dev/urandom > "$proj/data/big.bin"
    (cd "$proj" && "$cli" create data --name big --license CC-BY-4.0 \
        --maintainer "Bench, Mark" -m Artifacts.toml --tarball-out big.tar.gz >&2)
    rm -rf "$proj/data"
    touch "$work/made-$size"
fi
tarball="$proj/big.tar.gz"
bytes=$(stat -c %s "$tarball")
note "tarball: $bytes bytes"

# The server, until this script stops it.
rm -f "$work/server-url"
"$server_bin" --token "$token" --discard > "$work/server-url" &
server_pid=$!
cleanup() { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do [ -s "$work/server-url" ] && break; sleep 0.05; done
base=$(head -1 "$work/server-url")
note "archive at $base"

# Runs `/usr/bin/time -v CMD...`; prints "<wall seconds> <max RSS KiB>".
timed() {
    /usr/bin/time -v "$@" > /dev/null 2> "$work/time.txt" || { cat "$work/time.txt" >&2; exit 1; }
    python3 - "$work/time.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", t)
h, m, s = wall.groups()
secs = (int(h) if h else 0) * 3600 + int(m) * 60 + float(s)
rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)
print(f"{secs:.3f} {rss}")
PY
}

forget_drafts() {
    # Keep the verified hashes, forget the archive's drafts and records: the next publish
    # makes a fresh record and uploads the whole file again.
    python3 - "$proj/.big.publish-state.json" <<'PY'
import json, sys
p = sys.argv[1]
s = json.load(open(p))
s["archives"] = {}
json.dump(s, open(p, "w"))
PY
}

publish() {
    (cd "$proj" && CLIMA_ARTIFACTS_ARCHIVE_TOKEN="$token" CLIMA_ARTIFACTS_PROGRESS=0 \
        timed "$cli" publish big --archive "$base" --draft -m Artifacts.toml)
}

curl_upload() {
    local id
    id=$(curl -sf -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        -d '{"metadata": {}}' "$base/api/records" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    curl -sf -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        -d '[{"key": "big.tar.gz"}]' "$base/api/records/$id/draft/files" > /dev/null
    timed curl -sf -T "$tarball" -H "Authorization: Bearer $token" \
        -H 'Content-Type: application/octet-stream' \
        "$base/api/records/$id/draft/files/big.tar.gz/content"
}

rm -f "$proj/.big.publish-state.json"
note "publish, first run (tree hash check + upload)"
first=$(publish)
ours=(); theirs=()
for i in $(seq "$runs"); do
    forget_drafts
    note "publish run $i"; ours+=("$(publish)")
    note "curl -T run $i"; theirs+=("$(curl_upload)")
done

median() { printf '%s\n' "$@" | sort -n -k1,1 | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}'; }
read -r ow orss <<< "$(median "${ours[@]}")"
read -r cw crss <<< "$(median "${theirs[@]}")"
read -r fw frss <<< "$first"
mib=$(awk "BEGIN { printf \"%.0f\", $bytes / 1048576 }")
rate() { awk "BEGIN { printf \"%.0f\", $bytes / 1048576 / $1 }"; }
echo "| upload of $mib MiB to the loopback archive | wall (median of $runs) | MiB/s | peak RSS |"
echo "|---|---|---|---|"
echo "| \`curl -T\` (PUT of the file alone) | ${cw} s | $(rate "$cw") | $((crss / 1024)) MiB |"
echo "| \`publish --archive\` (draft, metadata, PUT, commit, checksum) | ${ow} s | $(rate "$ow") | $((orss / 1024)) MiB |"
echo "| \`publish --archive\`, first run (+ tree hash check of the tarball) | ${fw} s | $(rate "$fw") | $((frss / 1024)) MiB |"
echo
echo "ratio publish / curl: $(awk "BEGIN { printf \"%.2f\", $ow / $cw }")"
