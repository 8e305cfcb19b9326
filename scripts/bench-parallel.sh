#!/usr/bin/env bash
# Large downloads over a link whose streams are capped: ours (8 connections and 1) against
# `aria2c -x8 -s8` (download alone, and followed by `tar xzf`) and `curl | tar xzf -`, in one
# rotation, each the median of --runs runs; then the peak RSS of ours, and the bytes the server
# sent for a `kill -9` of ours at 50 % followed by a rerun.
#
#   scripts/bench-parallel.sh                      # 192 MiB in ~2000 files, 10 MB/s, 3 runs
#   scripts/bench-parallel.sh --rate 0 --runs 5    # uncapped loopback
#
# Options (defaults in brackets):
#   --size S      unpacked size of the dataset (scripts/bench/gen_dataset.py) [192M]
#   --files N     files in it [2000]
#   --seed N      generator seed [26]
#   --rate B      bytes per second per connection of the loopback server; 0 = no cap [10000000]
#   --runs N      runs per contender [3]
#   --work DIR    scratch space (data cached between invocations)
#                 [${TMPDIR:-/tmp}/clima-artifacts-bench]
#   --no-build    use the release binaries already in $CARGO_TARGET_DIR/release
#
# The server is `capped_server` (clima-artifact-tests/src/bin): ranges under If-Range, a strong
# ETag, every connection paced at --rate; it counts the body bytes it sent. Results: a Markdown
# table on stdout.
set -euo pipefail
if [ -n "${LC_ALL:-}" ]; then export LANG="$LC_ALL"; unset LC_ALL; fi
export LC_NUMERIC=C
cd "$(dirname "$0")/.."
repo="$PWD"

size=192M; files=2000; seed=26; rate=10000000; runs=3; build=1
work="${TMPDIR:-/tmp}/clima-artifacts-bench"
while [ $# -gt 0 ]; do
    case "$1" in
        --size) size="$2"; shift 2 ;;
        --files) files="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --rate) rate="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-parallel.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done
for tool in python3 curl git tar gzip sha256sum aria2c /usr/bin/time; do
    command -v "$tool" >/dev/null || {
        echo "bench-parallel.sh: \`$tool\` is required (aria2c: Debian package \`aria2\`)" >&2
        exit 1
    }
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
if [ "$build" = 1 ]; then
    cargo build --release -p clima-artifacts-cli -p clima-artifact-tests \
        --bin clima-artifacts --bin capped_server >&2
fi
cli="$CARGO_TARGET_DIR/release/clima-artifacts"
server_bin="$CARGO_TARGET_DIR/release/capped_server"

note() { printf '[bench-parallel %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }
fmt() { awk "BEGIN { printf \"%.2f\", $1 }"; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

mkdir -p "$work"
work="$(cd "$work" && pwd)"
scratch="$work/parallel-$$"
samples="$scratch/samples.tsv"
rm -rf "$scratch"; mkdir -p "$scratch"
record() { printf '%s\t%s\n' "$1" "$2" >> "$samples"; }
med() { awk -F'\t' -v k="$1" '$1==k {print $2}' "$samples" | median; }

# The dataset and its tarball, cached by (size, files, seed).
data="$work/pdata-$size-$files-$seed"
tarball="$data.tar.gz"
source scripts/bench/dataset.sh
[ -f "$data.done" ] || note "generating the dataset ($size in ~$files files, seed $seed)"
make_dataset "$data" "$tarball" "$size" "$files" "$seed"
tree="$(cat "$data/tree")"; sha="$(cat "$data/sha256")"
tar_bytes="$(stat -c %s "$tarball")"
unpacked="$(du -sb "$data/content" | cut -f1)"
nfiles="$(find "$data/content" -type f | wc -l)"

serve_capped "$server_bin" "$tarball" "$rate" "$scratch"
sent() { curl -s "$base/__sent/$file" | cut -d' ' -f1; }
most() { curl -s "$base/__sent/$file" | cut -d' ' -f2; }
note "tarball $tar_bytes bytes ($nfiles files, $unpacked bytes unpacked), $url, cap $rate B/s per connection"

bench_manifest "$scratch/Artifacts.toml" bench "$tree" "$sha" "$url"

export CLIMA_ARTIFACTS_PROGRESS=0 GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
fetch() { # fetch CONNECTIONS
    CLIMA_ARTIFACTS_CONNECTIONS="$1" CLIMA_ARTIFACTS_DEPOT_PATH="$scratch/depot" \
        "$cli" fetch --manifest "$scratch/Artifacts.toml" bench > /dev/null
}
run_ours8() { fetch 8; }
run_ours1() { fetch 1; }
run_aria2() {
    aria2c -q -x8 -s8 --allow-overwrite=true --auto-file-renaming=false \
        -d "$scratch/dl" -o "$file" "$url"
}
run_aria2_tar() { run_aria2; mkdir -p "$scratch/out"; tar -xzf "$scratch/dl/$file" -C "$scratch/out"; }
run_curl_tar() { mkdir -p "$scratch/out"; curl -s "$url" | tar -xzf - -C "$scratch/out"; }
clean() { rm -rf "$scratch/depot" "$scratch/out" "$scratch/dl"; sync; }

fetch 8
[ "$("$cli" hash "$scratch/depot/artifacts/$tree")" = "$tree" ] || { echo "wrong install" >&2; exit 1; }
clean
contenders=(ours8 ours1 aria2 aria2_tar curl_tar)
for r in $(seq "$runs"); do
    note "round $r of $runs"
    for i in "${!contenders[@]}"; do
        c="${contenders[$(((i + r) % ${#contenders[@]}))]}"
        s="$EPOCHREALTIME"; "run_$c"; e="$EPOCHREALTIME"
        record "$c" "$(calc "$e - $s")"
        clean
    done
done
note "most connections at once (all runs): $(most)"

# Peak RSS of ours, 8 connections and 1.
for n in 8 1; do
    /usr/bin/time -v -o "$scratch/time.txt" env CLIMA_ARTIFACTS_CONNECTIONS="$n" \
        CLIMA_ARTIFACTS_DEPOT_PATH="$scratch/depot" \
        "$cli" fetch --manifest "$scratch/Artifacts.toml" bench > /dev/null
    record "rss$n" "$(awk -F': ' '/Maximum resident/ {print $2}' "$scratch/time.txt")"
    clean
done

# kill -9 at 50 % of the tarball sent, then a rerun: bytes sent in all.
for r in $(seq "$runs"); do
    s0="$(sent)"
    CLIMA_ARTIFACTS_CONNECTIONS=8 CLIMA_ARTIFACTS_DEPOT_PATH="$scratch/depot" \
        "$cli" fetch --manifest "$scratch/Artifacts.toml" bench > /dev/null 2>&1 &
    pid=$!
    while [ "$(( $(sent) - s0 ))" -lt "$((tar_bytes / 2))" ]; do sleep 0.02; done
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    s1="$(sent)"
    fetch 8
    [ -d "$scratch/depot/artifacts/$tree" ] || { echo "rerun did not install" >&2; exit 1; }
    s2="$(sent)"
    record killed "$(calc "($s1 - $s0) / $tar_bytes")"
    record rerun "$(calc "($s2 - $s1) / $tar_bytes")"
    record total "$(calc "($s2 - $s0) / $tar_bytes")"
    clean
done

a="$(med aria2)"
echo
echo "Tarball $(calc "$tar_bytes / 1e6") MB ($nfiles files, $(calc "$unpacked / 1048576") MiB unpacked); per-connection cap $(calc "$rate / 1e6") MB/s (0 = none); $(nproc) cores; medians of $runs."
echo
echo "| contender | time | vs aria2c -x8 download |"
echo "|---|---:|---:|"
for c in ours8 ours1 aria2 aria2_tar curl_tar; do
    label=$(case "$c" in
        ours8) echo '`clima-artifacts fetch`, 8 connections (verified, installed)' ;;
        ours1) echo '`clima-artifacts fetch`, `CLIMA_ARTIFACTS_CONNECTIONS=1`' ;;
        aria2) echo '`aria2c -x8 -s8` (download only)' ;;
        aria2_tar) echo '`aria2c -x8 -s8` then `tar xzf`' ;;
        curl_tar) echo '`curl | tar xzf -`' ;;
    esac)
    echo "| $label | $(fmt "$(med "$c")") s | $(fmt "$(med "$c") / $a") |"
done
echo
echo "ours / curl|tar: $(fmt "$(med ours8) / $(med curl_tar)"); ours / (aria2c + tar): $(fmt "$(med ours8) / $(med aria2_tar)")"
echo "peak RSS: $(calc "$(med rss8) / 1024") MiB with 8 connections, $(calc "$(med rss1) / 1024") MiB with 1"
echo "kill -9 at 50 % then a rerun: $(fmt "$(med killed)") + $(fmt "$(med rerun)") = $(fmt "$(med total)") x the tarball sent"
