#!/usr/bin/env bash
# Bytes and memory of seekable installs (issue 49's benchmarks b, c and d), measured with the
# release binaries against `capped_server` (clima-artifact-tests; loopback, no rate cap), which
# counts the body bytes it sent (`GET /__sent/<file>`):
#
#   (b) `fetch --only FILE` of one file of a 1,000-file 1 GiB seekable artifact, empty depot:
#       bytes sent, against that file's members + the index (goal: within 1 %);
#   (c) `fetch` of version 2 (one of the 1,000 files changed, same size) with version 1
#       installed: bytes sent, against the changed file's members + the index (goal: within
#       1 %). The members' and index's bytes are read from the tarball by
#       scripts/bench/seekable_entry.py (the layout of docs/seekable.md, by hand);
#   (d) peak memory (max RSS, `/usr/bin/time -v`) of `fetch` of the whole artifact into an
#       empty depot (goal: 64 MiB or less); and of (b) and (c).
#
# These are byte and memory figures, not timings: a busy machine does not change them.
#
#   nice scripts/bench-changed.sh --work /dev/shm/clima-partial
#
# Options (defaults in brackets):
#   --size S     unpacked size (scripts/bench/gen_dataset.py, mixed kind) [1G]
#   --files N    files [1000]
#   --seed N     generator seed [26]
#   --work DIR   scratch space (data cached between invocations)
#                [${TMPDIR:-/tmp}/clima-artifacts-bench]
#   --no-build   use the release binaries already in $CARGO_TARGET_DIR/release
#
# Every install is checked: its folder hashes (by `clima-artifacts hash`) to the manifest's
# tree; the file fetched alone has the dataset's bytes. A failed check stops the script.
set -euo pipefail
if [ -n "${LC_ALL:-}" ]; then export LANG="$LC_ALL"; unset LC_ALL; fi
export LC_NUMERIC=C
cd "$(dirname "$0")/.."
repo="$PWD"

size=1G; files=1000; seed=26; build=1
work="${TMPDIR:-/tmp}/clima-artifacts-bench"
while [ $# -gt 0 ]; do
    case "$1" in
        --size) size="$2"; shift 2 ;;
        --files) files="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-changed.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done
for tool in python3 cmp; do
    command -v "$tool" >/dev/null || { echo "bench-changed.sh: \`$tool\` is required" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "bench-changed.sh: /usr/bin/time (GNU time) is required" >&2; exit 1; }

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
if [ "$build" = 1 ]; then
    cargo build --release -p clima-artifacts-cli -p clima-artifact-tests \
        --bin clima-artifacts --bin capped_server >&2
fi
cli="$CARGO_TARGET_DIR/release/clima-artifacts"
server_bin="$CARGO_TARGET_DIR/release/capped_server"

note() { printf '[bench-changed %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }
pct() { awk "BEGIN { printf \"%.2f\", 100 * ($1) }"; }
mib() { awk "BEGIN { printf \"%.1f\", ($1) / 1048576 }"; }

mkdir -p "$work"
work="$(cd "$work" && pwd)"
scratch="$work/changed-$$"
rm -rf "$scratch"; mkdir -p "$scratch"
servers=()
stop_servers() { for fd in "${servers[@]}"; do eval "exec $fd>&-"; done; servers=(); }
trap 'stop_servers; rm -rf "$scratch"' EXIT

# Version 1 (gen_dataset.py), and version 2: the same with one file's bytes changed (same size).
data="$work/changed-data-$size-$files-$seed"
if [ ! -f "$data.done" ]; then
    note "generating the dataset ($size in ~$files files, seed $seed)"
    rm -rf "$data"
    python3 scripts/bench/gen_dataset.py tree "$data/v1/content" \
        --size "$size" --files "$files" --seed "$seed"
    cp -a "$data/v1/content" "$data/v2-content"
    mkdir -p "$data/v2"; mv "$data/v2-content" "$data/v2/content"
    touch "$data.done"
fi
# The file looked at: the first, in path order, of 1 to 16 MiB (a medium file of the dataset).
target="$(cd "$data/v1/content" && find . -type f -size +1024k -size -16384k -printf '%P\n' | LC_ALL=C sort | head -1)"
[ -n "$target" ] || { echo "bench-changed.sh: no file of 1 to 16 MiB in the dataset" >&2; exit 1; }
target_size="$(stat -c %s "$data/v1/content/$target")"
if cmp -s "$data/v1/content/$target" "$data/v2/content/$target"; then
    # Version 2's change: every byte of the file inverted (same size, other content).
    chmod u+w "$data/v2/content/$target"
    python3 -c 'import sys; p=sys.argv[1]; b=open(p,"rb").read(); open(p,"wb").write(bytes(x ^ 0xff for x in b))' \
        "$data/v2/content/$target"
fi

# made V: `create` of DATA/V/content into DATA/V/data.tar.gz (seekable) and DATA/V/made.toml.
made() {
    local d="$data/$1"
    [ -f "$d/made.done" ] && return 0
    note "create $1"
    rm -rf "$d/work"; mkdir -p "$d/work"
    (cd "$d/work" && "$cli" create "$d/content" --name bench \
        --tarball-out "$d/data.tar.gz" --url "http://placeholder/data.tar.gz" > /dev/null)
    mv "$d/work/Artifacts.toml" "$d/made.toml"
    rm -rf "$d/work"
    touch "$d/made.done"
}
made v1; made v2
tree_of() { awk -F'"' '/git-tree-sha1/ {print $2; exit}' "$1"; }
grep -q index-sha256 "$data/v1/made.toml" || { echo "no index-sha256 in the manifest" >&2; exit 1; }

# entry V: `<index bytes> <members' bytes of the file looked at>` of DATA/V/data.tar.gz.
entry() { python3 scripts/bench/seekable_entry.py "$data/$1/data.tar.gz" "$target"; }

# serve V: starts capped_server on DATA/V/data.tar.gz (its stdin is a pipe this shell holds;
# closing it stops the server), writes DATA/V's manifest with its URL to SCRATCH/V.toml and the
# URL to SCRATCH/V.url. (Not in a `$(...)`: the pipe would close with the subshell.)
serve() {
    local v="$1" fifo="$scratch/$1.stdin" out="$scratch/$1.url" fd
    mkfifo "$fifo"
    # A cap of 10 GB/s, which loopback does not reach: the paced path counts each 16 KiB as it
    # is written, also on a connection the client closes early (the uncapped one counts a
    # response's bytes when its write ends, so a connection closed mid-body goes uncounted).
    "$server_bin" "$data/$v/data.tar.gz" 10000000000 < "$fifo" > "$out" &
    exec {fd}> "$fifo"
    servers+=("$fd")
    for _ in $(seq 1 600); do [ -s "$out" ] && break; sleep 0.1; done
    local url; url="$(head -1 "$out")"
    [ -n "$url" ] || { echo "bench-changed.sh: capped_server did not start" >&2; exit 1; }
    sed "s#http://placeholder/data.tar.gz#$url#" "$data/$v/made.toml" > "$scratch/$v.toml"
}
# sent URL: body bytes the server sent so far.
sent() { python3 -c 'import sys,urllib.request; u=sys.argv[1]; b,_,n=u.rpartition("/"); print(urllib.request.urlopen(b+"/__sent/"+n).read().split()[0].decode())' "$1"; }
# timed FILE CMD...: runs CMD under /usr/bin/time -v, the max RSS (KiB) into FILE.
timed() {
    local f="$1"; shift
    /usr/bin/time -v "$@" > "$f.out" 2> "$f.err" || { cat "$f.err" >&2; exit 1; }
    awk -F': ' '/Maximum resident set size/ {print $2}' "$f.err" > "$f"
}
check_tree() {
    local dir="$1" tree="$2"
    [ "$("$cli" hash "$dir")" = "$tree" ] || { echo "bench-changed.sh: wrong tree at $dir" >&2; exit 1; }
}

export CLIMA_ARTIFACTS_PROGRESS=0
serve v1; serve v2
url1="$(head -1 "$scratch/v1.url")"; url2="$(head -1 "$scratch/v2.url")"
tree1="$(tree_of "$scratch/v1.toml")"; tree2="$(tree_of "$scratch/v2.toml")"
len1="$(stat -c %s "$data/v1/data.tar.gz")"; len2="$(stat -c %s "$data/v2/data.tar.gz")"
read -r ix1 m1 <<< "$(entry v1)"; read -r ix2 m2 <<< "$(entry v2)"
content_bytes="$(find "$data/v1/content" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}')"
nfiles="$(find "$data/v1/content" -type f | wc -l)"
note "dataset: $nfiles files, $content_bytes bytes; tarballs $len1 / $len2 bytes, indexes $ix1 / $ix2 bytes; file \`$target\` of $target_size bytes, members $m1 / $m2 bytes"

# (d) the whole artifact (version 1) into an empty depot, from the server.
note "(d) fetch of the whole artifact"
s0="$(sent "$url1")"
CLIMA_ARTIFACTS_DEPOT_PATH="$scratch/d-depot" timed "$scratch/rss-whole" \
    "$cli" fetch --manifest "$scratch/v1.toml" bench
whole_sent=$(( $(sent "$url1") - s0 ))
check_tree "$scratch/d-depot/artifacts/$tree1" "$tree1"

# (b) one file of version 1, empty depot.
note "(b) fetch --only $target"
s0="$(sent "$url1")"
CLIMA_ARTIFACTS_DEPOT_PATH="$scratch/b-depot" timed "$scratch/rss-one" \
    "$cli" fetch --manifest "$scratch/v1.toml" bench --only "$target"
one_sent=$(( $(sent "$url1") - s0 ))
cmp "$scratch/b-depot/clima_partial/$tree1/$target" "$data/v1/content/$target" ||
    { echo "bench-changed.sh: the file fetched alone differs" >&2; exit 1; }
[ ! -e "$scratch/b-depot/artifacts/$tree1" ] || { echo "bench-changed.sh: (b) installed whole" >&2; exit 1; }

# (c) version 2 with version 1 installed (the depot of (d)).
note "(c) fetch of version 2 with version 1 installed"
s0="$(sent "$url2")"
CLIMA_ARTIFACTS_DEPOT_PATH="$scratch/d-depot" timed "$scratch/rss-v2" \
    "$cli" fetch --manifest "$scratch/v2.toml" bench
v2_sent=$(( $(sent "$url2") - s0 ))
check_tree "$scratch/d-depot/artifacts/$tree2" "$tree2"
stop_servers

goal_b=$(( m1 + ix1 )); goal_c=$(( m2 + ix2 ))
rss() { awk '{printf "%.1f", $1 / 1024}' "$1"; }
cat <<EOF

1,000-file seekable artifact: $nfiles files, $content_bytes bytes ($(mib "$content_bytes") MiB); seekable .tar.gz $len1 bytes; index $ix1 bytes (stored); the file: \`$target\`, $target_size bytes, members $m1 bytes (version 2: $m2)

| what | bytes the server sent | against | ratio (goal <= 1.01) | peak RSS |
|---|---:|---|---:|---:|
| (b) one file (\`fetch --only\`), empty depot | $one_sent | file's members + index = $goal_b | $(calc "$one_sent / $goal_b") | $(rss "$scratch/rss-one") MiB |
| (c) version 2, 1 file changed, version 1 installed | $v2_sent | changed file's members + index = $goal_c | $(calc "$v2_sent / $goal_c") | $(rss "$scratch/rss-v2") MiB |
| (d) the whole artifact, empty depot | $whole_sent | tarball = $len1 | $(calc "$whole_sent / $len1") | **$(rss "$scratch/rss-whole") MiB** (goal <= 64) |

(b) and (c) sent $(pct "$one_sent / $len1") % and $(pct "$v2_sent / $len2") % of the tarball.
What \`fetch\` said: (b) $(tail -1 "$scratch/rss-one.out"); (c) $(tail -1 "$scratch/rss-v2.out"); (d) $(tail -1 "$scratch/rss-whole.out")
EOF
