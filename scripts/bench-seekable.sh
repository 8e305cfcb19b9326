#!/usr/bin/env bash
# Seekable tarballs on every core (issue 49, item 2): `clima-artifacts fetch` of a seekable
# `.tar.gz` (made by `create`) on 2 cores and on 1 (`taskset -c 0`), of the single-stream one
# of the same data (`create --classic`), `tar xzf` of each (and `rapidgzip -P 2 | tar x`, the peer
# for parallel gzip, when `rapidgzip` from PyPI is installed), and the bound of a perfect pipeline
# on this machine, `max(slowest stage, sum of the stages / cores)`, with each stage measured
# alone by `bench_floor` (decompress, SHA-1 of the content, SHA-256 of the tarball, writes),
# and that bound with the fifth stage a seekable install also runs: the SHA-256 of each block of
# the files cut into blocks, checked against the index.
# Then the same data as one file (its blob SHA-1 is serial): seekable on 2 cores and on 1.
#
#   scripts/bench-seekable.sh                   # 256 MiB in ~2000 files, 3 rounds
#   nice scripts/bench-seekable.sh --runs 5 --no-build
#
# Options (defaults in brackets):
#   --size S     unpacked size of the dataset (scripts/bench/gen_dataset.py, mixed kind) [256M]
#   --files N    files in it [2000]
#   --seed N     generator seed [26]
#   --runs N     rounds; each contender runs once per round, in rotation [3]
#   --work DIR   scratch space (data cached between invocations)
#                [${TMPDIR:-/tmp}/clima-artifacts-bench]
#   --no-build   use the release binaries already in $CARGO_TARGET_DIR/release
#
# Every timed install starts from an empty depot (removed, then `sync`), reads its tarball
# from a `file://` URL (no server shares the cores), and is checked afterwards: the installed
# folder must exist, hash (by `clima-artifacts hash`) to the manifest's tree and hold the
# dataset's byte count; `tar xzf` is checked for the byte count. A run that fails a check
# stops the script. Results: a Markdown table on stdout, raw samples in the scratch folder.
set -euo pipefail
if [ -n "${LC_ALL:-}" ]; then export LANG="$LC_ALL"; unset LC_ALL; fi
export LC_NUMERIC=C
cd "$(dirname "$0")/.."
repo="$PWD"

size=256M; files=2000; seed=26; runs=3; build=1
work="${TMPDIR:-/tmp}/clima-artifacts-bench"
while [ $# -gt 0 ]; do
    case "$1" in
        --size) size="$2"; shift 2 ;;
        --files) files="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-seekable.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done
for tool in python3 git tar gzip taskset; do
    command -v "$tool" >/dev/null || { echo "bench-seekable.sh: \`$tool\` is required" >&2; exit 1; }
done
[ -n "${EPOCHREALTIME:-}" ] || { echo "bench-seekable.sh: needs bash 5 (\$EPOCHREALTIME)" >&2; exit 1; }

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
if [ "$build" = 1 ]; then
    cargo build --release -p clima-artifacts-cli -p clima-artifact-tests \
        --bin clima-artifacts --bin bench_floor >&2
fi
cli="$CARGO_TARGET_DIR/release/clima-artifacts"
floor_bin="$CARGO_TARGET_DIR/release/bench_floor"

note() { printf '[bench-seekable %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }
fmt() { awk "BEGIN { printf \"%.2f\", $1 }"; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
load() { cut -d' ' -f1 /proc/loadavg; }

mkdir -p "$work"
work="$(cd "$work" && pwd)"
scratch="$work/seekable-$$"
samples="$scratch/samples.tsv"
rm -rf "$scratch"; mkdir -p "$scratch"
trap 'rm -rf "$scratch/depot" "$scratch/out" "$scratch/floor"' EXIT
record() { printf '%s\t%s\n' "$1" "$2" >> "$samples"; }
med() { awk -F'\t' -v k="$1" '$1==k {print $2}' "$samples" | median; }
# low KEY: the fastest sample (on a shared machine, the run that others disturbed least).
low() { awk -F'\t' -v k="$1" '$1==k {print $2}' "$samples" | sort -g | head -1; }

# The dataset (mixed: NetCDF-like fields, random and CSV text), cached by (size, files, seed).
data="$work/seekable-data-$size-$files-$seed"
if [ ! -f "$data.done" ]; then
    note "generating the dataset ($size in ~$files files, seed $seed)"
    rm -rf "$data"
    python3 scripts/bench/gen_dataset.py tree "$data/many/content" \
        --size "$size" --files "$files" --seed "$seed"
    # The same bytes as one file, for the serial blob SHA-1 of a file of many blocks.
    mkdir -p "$data/one/content"
    find "$data/many/content" -type f -print0 | sort -z | xargs -0 cat > "$data/one/content/all.bin"
    touch "$data.done"
fi

# made SET FLAVOUR: `create` of DATA/SET/content into DATA/SET/FLAVOUR.tar.gz (seekable, or
# `--classic`); writes DATA/SET/FLAVOUR.toml, a manifest with a file:// URL.
made() {
    local set="$1" flavour="$2" d="$data/$1"
    [ -f "$d/$flavour.done" ] && return 0
    local extra=(); [ "$flavour" = classic ] && extra=(--classic)
    rm -rf "$d/$flavour.work"; mkdir -p "$d/$flavour.work"
    (cd "$d/$flavour.work" && "$cli" create "$d/content" --name bench \
        --tarball-out "$d/$flavour.tar.gz" --url "file://$d/$flavour.tar.gz" \
        "${extra[@]}" > /dev/null)
    mv "$d/$flavour.work/Artifacts.toml" "$d/$flavour.toml"
    rm -rf "$d/$flavour.work"
    touch "$d/$flavour.done"
}
made many seekable; made many classic; made one seekable
tree_of() { awk -F'"' '/git-tree-sha1/ {print $2; exit}' "$1"; }
bytes_of() { find "$1" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}'; }
content_bytes="$(bytes_of "$data/many/content")"
nfiles="$(find "$data/many/content" -type f | wc -l)"
grep -q index-sha256 "$data/many/seekable.toml" || { echo "no index-sha256 in the seekable manifest" >&2; exit 1; }
if grep -q index-sha256 "$data/many/classic.toml"; then echo "index-sha256 in the classic manifest" >&2; exit 1; fi
note "dataset: $nfiles files, $content_bytes bytes; seekable $(stat -c %s "$data/many/seekable.tar.gz") bytes, single-stream $(stat -c %s "$data/many/classic.tar.gz") bytes"

export CLIMA_ARTIFACTS_PROGRESS=0
clean() { rm -rf "$scratch/depot" "$scratch/out" "$scratch/floor"; sync; }
# check SET FLAVOUR: the install of the last run is there, with the tree and the bytes.
check() {
    local tree dir
    tree="$(tree_of "$data/$1/$2.toml")"; dir="$scratch/depot/artifacts/$tree"
    [ -d "$dir" ] || { echo "bench-seekable.sh: $1/$2: nothing installed at $dir" >&2; exit 1; }
    [ "$("$cli" hash "$dir")" = "$tree" ] || { echo "bench-seekable.sh: $1/$2: wrong tree" >&2; exit 1; }
    [ "$(bytes_of "$dir")" = "$(bytes_of "$data/$1/content")" ] ||
        { echo "bench-seekable.sh: $1/$2: wrong byte count" >&2; exit 1; }
}
# run KEY SET FLAVOUR CORES: one timed fetch into an empty depot, checked.
run() {
    local key="$1" set="$2" flavour="$3" cores="$4" pin=()
    [ "$cores" = 1 ] && pin=(taskset -c 0)
    clean
    local s="$EPOCHREALTIME"
    CLIMA_ARTIFACTS_DEPOT_PATH="$scratch/depot" "${pin[@]}" "$cli" fetch \
        --manifest "$data/$set/$flavour.toml" bench > /dev/null
    local e="$EPOCHREALTIME"
    check "$set" "$flavour"
    record "$key" "$(calc "$e - $s")"
}
# untar KEY FLAVOUR: `tar xzf` of the tarball into an empty folder, checked.
untar() {
    clean; mkdir -p "$scratch/out"
    local s="$EPOCHREALTIME"
    tar -xzf "$data/many/$2.tar.gz" -C "$scratch/out"
    local e="$EPOCHREALTIME"
    [ "$(bytes_of "$scratch/out")" = "$content_bytes" ] ||
        { echo "bench-seekable.sh: tar xzf $2: wrong byte count" >&2; exit 1; }
    record "$1" "$(calc "$e - $s")"
}
# rapid KEY FLAVOUR: `rapidgzip -P 2` (PyPI: parallel gzip decoding with an index it builds as
# it goes) into `tar x`, checked: the peer for parallel gzip on the single-stream file.
rapid() {
    clean; mkdir -p "$scratch/out"
    local s="$EPOCHREALTIME"
    rapidgzip -d -c -P 2 "$data/many/$2.tar.gz" | tar -x -C "$scratch/out"
    local e="$EPOCHREALTIME"
    [ "$(bytes_of "$scratch/out")" = "$content_bytes" ] ||
        { echo "bench-seekable.sh: rapidgzip $2: wrong byte count" >&2; exit 1; }
    record "$1" "$(calc "$e - $s")"
}
# stages KEY SET FLAVOUR CORES: each stage alone (bench_floor), on CORES cores.
stages() {
    local pin=(); [ "$4" = 1 ] && pin=(taskset -c 0)
    clean; mkdir -p "$scratch/floor"
    local line kv
    line="$("${pin[@]}" "$floor_bin" "$data/$2/$3.tar.gz" "$scratch/floor")"
    for kv in $line; do record "$1_${kv%%=*}" "${kv#*=}"; done
}

contenders=(s2 s1 c2 c1 tar_s tar_c floor_s floor_c one_s2 one_s1 floor_one)
if command -v rapidgzip > /dev/null; then
    contenders+=(rg_c rg_s)
else
    note "rapidgzip not found (python3 -m pip install rapidgzip): its rows are left out"
fi
note "$runs rounds of ${contenders[*]} (load $(load))"
for r in $(seq "$runs"); do
    n="${#contenders[@]}"
    for i in $(seq 0 $((n - 1))); do
        c="${contenders[$(((i + r) % n))]}"
        case "$c" in
            s2) run seekable2 many seekable 2 ;;
            s1) run seekable1 many seekable 1 ;;
            c2) run classic2 many classic 2 ;;
            c1) run classic1 many classic 1 ;;
            tar_s) untar tar_seekable seekable ;;
            tar_c) untar tar_classic classic ;;
            floor_s) stages floor_seekable many seekable 2 ;;
            floor_c) stages floor_classic many classic 2 ;;
            one_s2) run one_seekable2 one seekable 2 ;;
            one_s1) run one_seekable1 one seekable 1 ;;
            floor_one) stages floor_one one seekable 2 ;;
            rg_c) rapid rapid_classic classic ;;
            rg_s) rapid rapid_seekable seekable ;;
        esac
    done
    note "round $r of $runs done (load $(load))"
done
clean

# The table.
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3"; }
mibs() { awk "BEGIN { printf \"%.0f MiB/s\", $content_bytes / 1048576 / $1 }"; }
bound() { # bound PREFIX CORES: max(slowest stage, sum / cores) of the medians
    local d s1 s2 w
    d="$(med "$1_decompress")"; s1="$(med "$1_sha1")"; s2="$(med "$1_sha256")"; w="$(med "$1_write")"
    awk -v d="$d" -v a="$s1" -v b="$s2" -v w="$w" -v c="$2" 'BEGIN {
        m = d; if (a > m) m = a; if (b > m) m = b; if (w > m) m = w
        s = (d + a + b + w) / c; printf "%.6g", (m > s) ? m : s }'
}
checked() { # checked PREFIX CORES: the bound with a fifth stage, the SHA-256 of each block
    # of the files a seekable tarball cuts into blocks, which its install checks too
    local d s1 s2 w k
    d="$(med "$1_decompress")"; s1="$(med "$1_sha1")"; s2="$(med "$1_sha256")"; w="$(med "$1_write")"
    k="$(med "$1_blocks")"
    awk -v d="$d" -v a="$s1" -v b="$s2" -v w="$w" -v k="$k" -v c="$2" 'BEGIN {
        m = d; if (a > m) m = a; if (b > m) m = b; if (w > m) m = w; if (k > m) m = k
        s = (d + a + b + w + k) / c; printf "%.6g", (m > s) ? m : s }'
}
stage_list() { printf 'decompress %s, SHA-1 %s, SHA-256 %s, write %s s (blocks %s s)' \
    "$(fmt "$(med "$1_decompress")")" "$(fmt "$(med "$1_sha1")")" \
    "$(fmt "$(med "$1_sha256")")" "$(fmt "$(med "$1_write")")" "$(fmt "$(med "$1_blocks")")"; }
s2="$(med seekable2)"; s1="$(med seekable1)"; c2="$(med classic2)"; c1="$(med classic1)"
ts="$(med tar_seekable)"; tc="$(med tar_classic)"
ds2="$(checked floor_seekable 2)"; bs2="$(bound floor_seekable 2)"; bs1="$(bound floor_seekable 1)"; bc2="$(bound floor_classic 2)"
o2="$(med one_seekable2)"; o1="$(med one_seekable1)"; bo2="$(bound floor_one 2)"
echo "256 MiB-class dataset: $nfiles files, $content_bytes bytes; medians of $runs rounds; load at the end $(load)"
echo
echo "| what | seconds | note |"
echo "|---|---|---|"
row "seekable, 2 cores" "$(fmt "$s2") ($(mibs "$s2"))" "bound $(fmt "$bs2") s: **$(fmt "$s2 / $bs2")x** the bound (goal <= 1.15); $(fmt "$s2 / $ds2")x the bound with the block digests it also checks ($(fmt "$ds2") s)"
row "seekable, 1 core (\`taskset -c 0\`)" "$(fmt "$s1")" "2 cores are **$(fmt "$s1 / $s2")x** faster (goal >= 1.7); 1-core bound (sum of stages) $(fmt "$bs1") s"
row "single-stream, 2 cores" "$(fmt "$c2") ($(mibs "$c2"))" "bound $(fmt "$bc2") s: $(fmt "$c2 / $bc2")x; seekable is $(fmt "$c2 / $s2")x faster"
row "single-stream, 1 core" "$(fmt "$c1")" "2 cores: $(fmt "$c1 / $c2")x"
row "\`tar xzf\` of the seekable file" "$(fmt "$ts")" "no hash; seekable install is $(fmt "$ts / $s2")x its speed"
row "\`tar xzf\` of the single-stream file" "$(fmt "$tc")" ""
if command -v rapidgzip > /dev/null; then
    rc="$(med rapid_classic)"
    row "\`rapidgzip -P 2 \\| tar x\` of the single-stream file" "$(fmt "$rc")" "no hash; the peer for parallel gzip; seekable install is $(fmt "$rc / $s2")x its speed, single-stream install $(fmt "$rc / $c2")x"
    row "\`rapidgzip -P 2 \\| tar x\` of the seekable file" "$(fmt "$(med rapid_seekable)")" ""
fi
row "stages alone, seekable file" "$(stage_list floor_seekable)" "sum $(fmt "$bs1") s, $(fmt "$(checked floor_seekable 1)") s with the blocks"
row "stages alone, single-stream file" "$(stage_list floor_classic)" ""
row "one file of the same bytes, seekable, 2 cores" "$(fmt "$o2")" "bound $(fmt "$bo2") s; the blob SHA-1 is serial ($(fmt "$(med floor_one_sha1)") s alone)"
row "one file, seekable, 1 core" "$(fmt "$o1")" "2 cores: $(fmt "$o1 / $o2")x"
echo
echo "The fastest of the $runs runs of each (stages too), for a machine that others share:"
echo
echo "| what | seconds | note |"
echo "|---|---|---|"
med() { low "$@"; } # the same table, of minimums
s2="$(med seekable2)"; s1="$(med seekable1)"; c2="$(med classic2)"; c1="$(med classic1)"
ds2="$(checked floor_seekable 2)"; bs2="$(bound floor_seekable 2)"; bs1="$(bound floor_seekable 1)"
bc2="$(bound floor_classic 2)"; o2="$(med one_seekable2)"; o1="$(med one_seekable1)"
bo2="$(bound floor_one 2)"
row "seekable, 2 cores" "$(fmt "$s2")" "bound $(fmt "$bs2") s: **$(fmt "$s2 / $bs2")x**; $(fmt "$s2 / $ds2")x the bound with the block digests ($(fmt "$ds2") s)"
row "seekable, 1 core" "$(fmt "$s1")" "2 cores: **$(fmt "$s1 / $s2")x**; 1-core bound $(fmt "$bs1") s"
row "single-stream, 2 cores" "$(fmt "$c2")" "bound $(fmt "$bc2") s: $(fmt "$c2 / $bc2")x"
row "single-stream, 1 core" "$(fmt "$c1")" "2 cores: $(fmt "$c1 / $c2")x"
row "\`tar xzf\`, seekable / single-stream" "$(fmt "$(med tar_seekable)") / $(fmt "$(med tar_classic)")" ""
if command -v rapidgzip > /dev/null; then
    row "\`rapidgzip -P 2 \\| tar x\`, single-stream / seekable" "$(fmt "$(med rapid_classic)") / $(fmt "$(med rapid_seekable)")" ""
fi
row "stages alone, seekable file" "$(stage_list floor_seekable)" ""
row "one file, seekable, 2 / 1 cores" "$(fmt "$o2") / $(fmt "$o1")" "bound $(fmt "$bo2") s; SHA-1 alone $(fmt "$(med floor_one_sha1)") s"
