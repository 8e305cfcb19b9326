#!/usr/bin/env bash
# Benchmarks, measured side by side with the standard tools on the same machine, in the
# same run, alternating the contenders; each number is the median of --runs runs.
#
#   scripts/bench.sh                       # 1 GiB / 5000 files, 4 GiB RSS artifact, 5 runs
#   scripts/bench.sh --size 64M --files 500 --big-size 256M --runs 3 --mpi-size-mb 32   # quick
#   scripts/bench.sh --only hash,install   # any of: hash install lookup rss mpi floor
#   scripts/bench.sh --only floor --size 256M --files 2000 --scratch /dev/shm --settle 0
#
# Options (defaults in brackets):
#   --size S          dataset size, e.g. 1G, 256M [1G]
#   --files N         number of files in the dataset [5000]
#   --seed N          generator seed [42]
#   --runs N          runs per contender, median reported [5]
#   --big-size S      size of the artifact whose install's peak RSS is measured [4G]
#   --mpi-size-mb N   artifact size for the MPI comparison (scripts/bench-mpi.sh) [256]
#   --mpi-ranks N     ranks of the MPI fetch [16]
#   --work DIR        scratch space; generated data is cached there between invocations
#                     [${TMPDIR:-/tmp}/clima-artifacts-bench]
#   --scratch DIR     where installs and git repositories are written, e.g. a tmpfs to take the
#                     file system out of the comparison [$work/scratch]
#   --settle S        seconds to wait after deleting a run's output before the next run (ext4
#                     slows down inode allocation right after mass deletion) [5]
#   --only LIST       comma-separated subset of: hash,install,lookup,rss,mpi,floor,parallel [all];
#                     `--only prepare` generates the data sets and exits
#   --no-build        use the release binaries already in $CARGO_TARGET_DIR/release
#   --also-cli NAME=PATH
#                     floor mode: also run this `clima-artifacts` binary (e.g. a build of an
#                     earlier commit) in the same rotation, reported as NAME; repeatable
#
# What runs (all release builds, page cache warm, loopback HTTP from `python3 -m http.server`):
#   hash     `clima-artifacts hash DIR` | `git add -A && git write-tree` (fresh GIT_DIR each run)
#            | `find DIR -type f | xargs cat | sha1sum`
#   install  `clima-artifacts fetch` into a fresh depot | `curl -s URL | tar xzf -`
#            | sequential: `curl -o f URL; sha256sum f; tar xzf f; git add -A && git write-tree`
#   lookup   `bench_lookup` (clima-artifact-tests/src/bin): first `clima_artifact!` call in a fresh process, and
#            the mean of 10^6 repeated calls; one process per run, offline
#   rss      `/usr/bin/time -v clima-artifacts fetch` of a --big-size artifact of mostly random
#            data (streamed by the generator, gzip -1), vs `curl | tar xzf -` of the same tarball
#   mpi      scripts/bench-mpi.sh (16-rank `mpirun mpi_fetch` vs one `install_one` process)
#   parallel scripts/bench-parallel.sh: a loopback server capping each connection at 10 MB/s;
#            ours (8 connections, and 1) vs `aria2c -x8 -s8` (alone and then `tar xzf`) vs
#            `curl | tar`, peak RSS, bytes sent for a kill -9 at 50 % and a rerun
#   floor    for two datasets (the mixed one above, mostly incompressible, and `--kind fields`,
#            compressible NetCDF-like fields) and two compressions (.tar.gz from `gzip -6`,
#            .tar.zst from `zstd -3`), in rotation: `bench_floor` (clima-artifact-tests/src/bin;
#            each stage of a verified install alone on one thread: decompress, SHA-1 of every
#            blob, SHA-256 of the tarball, write the files; the pipeline floor is
#            max(slowest stage, sum / cores)), `clima-artifacts fetch` over loopback HTTP,
#            `curl -s URL | tar -xf -` and Python's pooch (`pooch.retrieve` with the sha256 and
#            `pooch.Untar`, in a venv under --work; .tar.gz only: Python's tarfile cannot read
#            zstd before 3.14). Ours is reported as a ratio to the floor and to each contender,
#            with its CPU accounting: the CPU seconds of our process and of the HTTP server
#            (which share the cores) over the number of cores, a bound no scheduling of this
#            pipeline's threads can beat, and how much of the cores sat idle while ours ran.
#
# Results: a Markdown table on stdout, also written to $work/results-<time>.md; raw samples in
# $work/samples-<time>.tsv.
set -euo pipefail
# Decimal points whatever the user's locale (bash's `times` and $EPOCHREALTIME, awk, printf).
if [ -n "${LC_ALL:-}" ]; then export LANG="$LC_ALL"; unset LC_ALL; fi
export LC_NUMERIC=C
invoked_from="$PWD"
cd "$(dirname "$0")/.."
repo="$PWD"

size=1G; files=5000; seed=42; runs=5; big_size=4G; mpi_size_mb=256; mpi_ranks=16
work="${TMPDIR:-/tmp}/clima-artifacts-bench"; only="hash,install,lookup,rss,mpi,floor,parallel"; build=1
scratch=""; settle=5; alt_names=(); alt_paths=()
while [ $# -gt 0 ]; do
    case "$1" in
        --size) size="$2"; shift 2 ;;
        --files) files="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --big-size) big_size="$2"; shift 2 ;;
        --mpi-size-mb) mpi_size_mb="$2"; shift 2 ;;
        --mpi-ranks) mpi_ranks="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --scratch) scratch="$2"; shift 2 ;;
        --settle) settle="$2"; shift 2 ;;
        --only) only="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        --also-cli)
            [[ "$2" == ?*=?* ]] || { echo "bench.sh: --also-cli takes NAME=PATH" >&2; exit 2; }
            alt="${2#*=}"; [[ "$alt" == /* ]] || alt="$invoked_from/$alt"
            alt_names+=("${2%%=*}"); alt_paths+=("$alt"); shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done
wants() { [[ ",$only," == *",$1,"* ]]; }
for tool in python3 curl git tar gzip sha256sum sha1sum /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "bench.sh: \`$tool\` is required" >&2; exit 1; }
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
if [ "$build" = 1 ]; then
    cargo build --release -p clima-artifacts-cli -p clima-artifact-tests \
        --bin clima-artifacts --bin bench_lookup --bin install_one --bin bench_floor \
        --bin capped_server >&2
fi
cli="$CARGO_TARGET_DIR/release/clima-artifacts"
lookup_bin="$CARGO_TARGET_DIR/release/bench_lookup"
floor_bin="$CARGO_TARGET_DIR/release/bench_floor"
gen="$repo/scripts/bench/gen_dataset.py"

mkdir -p "$work"
work="$(cd "$work" && pwd)"
scratch="${scratch:-$work/scratch}/run-$$"
stamp="$(date +%Y%m%d-%H%M%S)"
samples="$work/samples-$stamp.tsv"
: > "$samples"
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
    rm -rf "$scratch"
}
trap cleanup EXIT
rm -rf "$scratch"; mkdir -p "$scratch"
scratch_fs="$(findmnt -no FSTYPE -T "$scratch" 2>/dev/null | head -n1 || true)"
[ -n "$scratch_fs" ] || scratch_fs="$(stat -f -c %T "$scratch")"

export CLIMA_ARTIFACTS_PROGRESS=0 GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
note() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# record KEY VALUE: one raw sample
record() { printf '%s\t%s\n' "$1" "$2" >> "$samples"; }
med() { awk -F'\t' -v k="$1" '$1==k {print $2}' "$samples" | median; }
# timed KEY CMD...: runs CMD, records its wall seconds under KEY (after `sync`, so writeback of
# the previous run does not land in this one)
timed() {
    local key="$1"; shift
    sync
    local s e
    s="$(now)"
    "$@"
    e="$(now)"
    record "$key" "$(calc "$e - $s")"
}
load() { cut -d' ' -f1 /proc/loadavg; }

# ---------------------------------------------------------------------------------------------
# Data: the mixed dataset and its tarball, cached by (size, files, seed).
data="$work/data-$size-$files-$seed"
tarball="$work/serve/bench-$size-$files-$seed.tar.gz"
mkdir -p "$work/serve"
source scripts/bench/dataset.sh
if [ ! -f "$data.done" ]; then
    note "generating the dataset ($size in ~$files files, seed $seed) in $data"
fi
make_dataset "$data" "$tarball" "$size" "$files" "$seed"
content="$data/content"
tree="$(cat "$data/tree")"; sha="$(cat "$data/sha256")"
nfiles="$(find "$content" -type f | wc -l)"
bytes="$(find "$content" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')"
tar_bytes="$(stat -c %s "$tarball")"
note "dataset: $nfiles files, $bytes bytes, tarball $tar_bytes bytes, tree $tree"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/serve" >/dev/null 2>&1 &
server_pid=$!
base="http://127.0.0.1:$port"
for _ in $(seq 100); do curl -sfI -o /dev/null "$base/" && break; sleep 0.1; done
url="$base/$(basename "$tarball")"

manifest() { bench_manifest "$@"; } # manifest FILE NAME TREE SHA URL
manifest "$scratch/Artifacts.toml" bench "$tree" "$sha" "$url"

expect() { # expect WHAT EXPECTED ACTUAL
    if [ "$2" != "$3" ]; then
        echo "bench.sh: $1 printed \`$3\`, expected \`$2\`" >&2
        exit 1
    fi
}

# ---------------------------------------------------------------------------------------------
# 1. Tree hash.
hash_ours() { expect "clima-artifacts hash" "$tree" "$("$cli" hash "$content")"; }
hash_git() {
    local g="$scratch/hash.git"
    rm -rf "$g"
    local out
    out="$(export GIT_DIR="$g" GIT_WORK_TREE="$content"; git init -q && git add -A && git write-tree)"
    expect "git write-tree" "$tree" "$out"
}
hash_sha1sum() { find "$content" -type f -print0 | xargs -0 cat | sha1sum >/dev/null; }

if wants hash; then
    note "tree hash: $runs rounds of ours / git / sha1sum (load $(load))"
    hash_ours; hash_git; hash_sha1sum # warm the page cache
    rm -rf "$scratch/hash.git"
    for r in $(seq "$runs"); do
        order=(ours git sha1sum)
        for i in 0 1 2; do
            c="${order[$(((i + r) % 3))]}"
            timed "hash_$c" "hash_$c"
            rm -rf "$scratch/hash.git"
        done
    done
fi

# ---------------------------------------------------------------------------------------------
# 2. Install.
install_ours() {
    local depot="$scratch/depot"
    CLIMA_ARTIFACTS_DEPOT_PATH="$depot" "$cli" fetch --manifest "$scratch/Artifacts.toml" bench \
        >/dev/null
}
install_curl_tar() { mkdir "$scratch/out" && curl -s "$url" | tar -xzf - -C "$scratch/out"; }
install_sequential() {
    curl -s -o "$scratch/dl.tar.gz" "$url"
    expect sha256sum "$sha" "$(sha256sum "$scratch/dl.tar.gz" | cut -d' ' -f1)"
    mkdir "$scratch/out"
    tar -xzf "$scratch/dl.tar.gz" -C "$scratch/out"
    local out
    out="$(cd "$scratch/out" && git init -q && git add -A && git write-tree)"
    expect "git write-tree" "$tree" "$out"
}
install_clean() { rm -rf "$scratch/depot" "$scratch/out" "$scratch/dl.tar.gz"; sync; sleep "$settle"; }

if wants install; then
    note "install: $runs rounds of ours / curl|tar / sequential (load $(load))"
    install_ours
    expect "installed tree" "$tree" "$("$cli" hash "$scratch/depot/artifacts/$tree")"
    install_clean
    for r in $(seq "$runs"); do
        order=(ours curl_tar sequential)
        for i in 0 1 2; do
            c="${order[$(((i + r) % 3))]}"
            timed "install_$c" "install_$c"
            install_clean
        done
    done
fi

# ---------------------------------------------------------------------------------------------
# 3. Lookup latency.
if wants lookup; then
    note "lookup: $((2 * runs + 1)) processes (load $(load))"
    ldepot="$scratch/lookup-depot"
    CLIMA_ARTIFACTS_DEPOT_PATH="$ldepot" "$lookup_bin" 1 >/dev/null # installs `profile`
    for _ in $(seq $((2 * runs + 1))); do
        line="$(CLIMA_ARTIFACTS_OFFLINE=1 CLIMA_ARTIFACTS_DEPOT_PATH="$ldepot" "$lookup_bin")"
        for kv in $line; do
            case "$kv" in
                path=*) ;;
                *) record "lookup_${kv%%=*}" "${kv#*=}" ;;
            esac
        done
    done
fi

# ---------------------------------------------------------------------------------------------
# 4. Peak RSS while installing a large artifact.
maxrss_kib() { awk -F': ' '/Maximum resident set size/ {print $2}' "$1"; }
big="$work/serve/big-$big_size-$seed.tar.gz"
if { wants rss || wants prepare; } && [ ! -f "$big.done" ]; then
    note "generating the $big_size artifact (streamed, gzip -1)"
    python3 "$gen" stream-tar --size "$big_size" --seed "$seed" --tree-hash-out "$big.tree" |
        gzip -1 -n | tee "$big" | sha256sum | cut -d' ' -f1 > "$big.sha256"
    touch "$big.done"
fi
if wants rss; then
    manifest "$scratch/Big.toml" big "$(cat "$big.tree")" "$(cat "$big.sha256")" \
        "$base/$(basename "$big")"
    note "rss: installing $big_size ($(stat -c %s "$big") bytes compressed) (load $(load))"
    sync
    s="$(now)"
    CLIMA_ARTIFACTS_DEPOT_PATH="$scratch/big-depot" /usr/bin/time -v -o "$scratch/rss-ours.txt" \
        "$cli" fetch --manifest "$scratch/Big.toml" big >/dev/null
    record rss_ours_s "$(calc "$(now) - $s")"
    record rss_ours_kib "$(maxrss_kib "$scratch/rss-ours.txt")"
    rm -rf "$scratch/big-depot"
    sync
    mkdir "$scratch/big-out"
    s="$(now)"
    /usr/bin/time -v -o "$scratch/rss-curl.txt" bash -c \
        "curl -s '$base/$(basename "$big")' | tar -xzf - -C '$scratch/big-out'"
    record rss_curl_tar_s "$(calc "$(now) - $s")"
    record rss_curl_tar_kib "$(maxrss_kib "$scratch/rss-curl.txt")"
    rm -rf "$scratch/big-out"
fi

# ---------------------------------------------------------------------------------------------
# 5. MPI: 16-rank fetch vs one process (scripts/bench-mpi.sh, release build).
if wants mpi; then
    note "mpi: scripts/bench-mpi.sh $mpi_size_mb $mpi_ranks $runs (load $(load))"
    "$repo/scripts/bench-mpi.sh" "$mpi_size_mb" "$mpi_ranks" "$runs" | tee "$scratch/mpi.txt" >&2
    grab() { grep "$1" "$scratch/mpi.txt" | sed -E 's/.*median ([0-9.]+) s.*/\1/'; }
    record mpi_single "$(grab 'single process fetch')"
    record mpi_multi "$(grab 'rank fetch (mpirun')"
    record mpi_startup "$(grab 'no-op')"
fi

# ---------------------------------------------------------------------------------------------
# 5b. Large downloads over capped streams (scripts/bench-parallel.sh, its own table).
if wants parallel; then
    note "parallel: scripts/bench-parallel.sh --runs $runs (load $(load))"
    "$repo/scripts/bench-parallel.sh" --runs "$runs" --work "$work" --no-build \
        > "$scratch/parallel.txt"
fi

# ---------------------------------------------------------------------------------------------
# 6. The floor: each stage of a verified install alone, and ours against it, for two datasets
#    and two compressions; curl|tar and pooch on the same tarballs in the same rotation.
floor_kinds=(mixed fields)
floor_comps=(gz zst)
pooch_py=""
if wants floor; then
    command -v zstd >/dev/null || { echo "bench.sh: \`zstd\` is required for --only floor" >&2; exit 1; }
    [ -n "${EPOCHREALTIME:-}" ] || { echo "bench.sh: --only floor needs bash 5 (\$EPOCHREALTIME)" >&2; exit 1; }
    if [ ! -x "$work/venv/bin/python" ] || ! "$work/venv/bin/python" -c 'import pooch' 2>/dev/null; then
        note "installing pooch into $work/venv"
        python3 -m venv "$work/venv" >&2 && "$work/venv/bin/pip" install -q pooch >&2 ||
            note "pooch could not be installed; it is left out"
    fi
    "$work/venv/bin/python" -c 'import pooch' 2>/dev/null && pooch_py="$work/venv/bin/python"
    pooch_version=""
    [ -z "$pooch_py" ] || pooch_version="$("$pooch_py" -c 'import pooch; print(pooch.__version__)')"
fi
# Readers of the snapshots below: CPU seconds (user + system) of this shell's children in the
# output of `times`; user + system ticks in /proc/PID/stat (fields 14 and 15, i.e. 12 and 13
# after "pid (comm) "); idle + iowait ticks of all cores in the "cpu" line of /proc/stat.
cpu_of_times() { awk 'NR == 2 { print m($1) + m($2) } function m(t) { split(t, a, /[ms]/); return a[1] * 60 + a[2] }' "$1"; }
pid_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' <<< "$1"; }
idle_ticks() { awk '{ print $5 + $6 }' <<< "$1"; }
# account PREFIX: records the CPU accounting of the last `c_ours` from its snapshots: the CPU
# our process and the HTTP server took, and the machine's idle time over that window. (The
# table combines the medians of each part; the server's CPU comes in ticks of 1/CLK_TCK s.)
account() {
    local hz; hz="$(getconf CLK_TCK)"
    record "$1_cpu_ours" "$(calc "$(cpu_of_times "$scratch/times1") - $(cpu_of_times "$scratch/times0")")"
    record "$1_cpu_server" "$(calc "($(pid_ticks "$server1") - $(pid_ticks "$server0")) / $hz")"
    record "$1_cpu_idle" "$(calc "($(idle_ticks "$stat1") - $(idle_ticks "$stat0")) / $hz")"
    record "$1_cpu_window" "$(calc "$t1 - $t0")"
    record "$1_cpu_online" "$(grep -c '^cpu[0-9]' /proc/stat)" # idle counts all of them
}
# floor_data KIND: the dataset and its two tarballs, cached by (kind, size, files, seed).
floor_data() {
    local kind="$1" d
    if [ "$kind" = mixed ]; then d="$data"; else d="$work/data-$kind-$size-$files-$seed"; fi
    if [ ! -f "$d.done" ]; then
        note "generating the $kind dataset ($size in ~$files files, seed $seed) in $d"
        rm -rf "$d"
        python3 "$gen" tree "$d/content" --size "$size" --files "$files" --seed "$seed" --kind "$kind"
        (export GIT_DIR="$d/check.git" GIT_WORK_TREE="$d/content"
            git init -q && git add -A && git write-tree) > "$d/tree"
        rm -rf "$d/check.git"
        touch "$d.done"
    fi
    local stem="$work/serve/floor-$kind-$size-$files-$seed"
    if [ ! -f "$stem.done" ]; then
        tar -C "$d/content" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
            -cf "$stem.tar" .
        gzip -6 -n -c "$stem.tar" > "$stem.tar.gz"
        zstd -q -3 -f "$stem.tar" -o "$stem.tar.zst"
        rm -f "$stem.tar"
        touch "$stem.done"
    fi
    echo "$d" "$stem"
}
pooch_fetch() { # pooch_fetch URL SHA256 OUT
    "$pooch_py" - "$@" <<'PY'
import sys
import pooch
url, sha, out = sys.argv[1:4]
pooch.retrieve(url, known_hash="sha256:" + sha, path=out, fname="data.tar.gz",
               processor=pooch.Untar(extract_dir="content"), progressbar=False)
PY
}
if wants prepare; then
    for kind in "${floor_kinds[@]}"; do floor_data "$kind" >/dev/null; done
fi
if wants floor; then
    for kind in "${floor_kinds[@]}"; do
        read -r fd stem < <(floor_data "$kind")
        ftree="$(cat "$fd/tree")"
        record "floor_${kind}_content_bytes" \
            "$(find "$fd/content" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')"
        for comp in "${floor_comps[@]}"; do
            ball="$stem.tar.$comp"; fsha="$(sha256sum "$ball" | cut -d' ' -f1)"
            furl="$base/$(basename "$ball")"; k="${kind}_$comp"
            record "floor_${k}_tar_bytes" "$(stat -c %s "$ball")"
            manifest "$scratch/Floor.toml" floor "$ftree" "$fsha" "$furl"
            untar=(-xzf -); [ "$comp" = zst ] && untar=(--zstd -xf -)
            c_floor() {
                local line
                line="$("$floor_bin" "$ball" "$scratch")"
                for kv in $line; do record "floor_${k}_${kv%%=*}" "${kv#*=}"; done
            }
            fetch_with() { # fetch_with CLI: install the floor artifact into a fresh depot
                CLIMA_ARTIFACTS_DEPOT_PATH="$scratch/depot" "$1" fetch \
                    --manifest "$scratch/Floor.toml" floor >/dev/null
            }
            c_ours() { # with snapshots for the CPU accounting, taken by builtins (no process)
                times > "$scratch/times0"; read -r stat0 < /proc/stat
                read -r server0 < "/proc/$server_pid/stat"; t0="$EPOCHREALTIME"
                fetch_with "$cli"
                t1="$EPOCHREALTIME"; read -r server1 < "/proc/$server_pid/stat"
                read -r stat1 < /proc/stat; times > "$scratch/times1"
            }
            c_curl_tar() { mkdir "$scratch/out" && curl -s "$furl" | tar "${untar[@]}" -C "$scratch/out"; }
            c_pooch() { # pooch logs each step on stderr: shown only if it fails
                pooch_fetch "$furl" "$fsha" "$scratch/pooch" >/dev/null 2>"$scratch/pooch.err" ||
                    { cat "$scratch/pooch.err" >&2; return 1; }
            }
            c_clean() { rm -rf "$scratch/depot" "$scratch/out" "$scratch/pooch"; sync; sleep "$settle"; }
            c_alt() { fetch_with "${alt_paths[$1]}"; } # c_alt INDEX: an --also-cli binary
            contenders=(floor ours curl_tar)
            [ -n "$pooch_py" ] && [ "$comp" = gz ] && contenders+=(pooch)
            for a in "${!alt_names[@]}"; do contenders+=("alt$a"); done
            note "floor: $kind .tar.$comp ($(stat -c %s "$ball") bytes), $runs rounds of ${contenders[*]} (load $(load))"
            c_ours
            expect "installed tree" "$ftree" "$("$cli" hash "$scratch/depot/artifacts/$ftree")"
            c_clean
            if [ -n "$pooch_py" ] && [ "$comp" = gz ]; then
                c_pooch
                expect "pooch's tree" "$ftree" "$("$cli" hash "$scratch/pooch/content")"
                c_clean
            fi
            n="${#contenders[@]}"
            for r in $(seq "$runs"); do
                for i in $(seq 0 $((n - 1))); do
                    c="${contenders[$(((i + r) % n))]}"
                    case "$c" in
                        floor) c_floor ;;
                        alt*) timed "floor_${k}_run_alt_${alt_names[${c#alt}]}" c_alt "${c#alt}" ;;
                        ours) timed "floor_${k}_run_ours" c_ours; account "floor_$k" ;;
                        *) timed "floor_${k}_run_$c" "c_$c" ;;
                    esac
                    c_clean
                done
            done
        done
    done
fi

# ---------------------------------------------------------------------------------------------
# The table.
have() { awk -F'\t' -v k="$1" '$1==k {f=1} END {exit !f}' "$samples"; }
fmt() { awk "BEGIN { printf \"%.3f\", $1 }"; }
# row LABEL OURS BASELINE RATIO TARGET MET
rows=()
row() { rows+=("| $1 | $2 | $3 | $4 | $5 | $6 |"); }
verdict() { awk "BEGIN { print ($1) ? \"yes\" : \"**no**\" }"; }
mib_s() { awk "BEGIN { printf \"%.0f MiB/s\", $bytes / 1048576 / $1 }"; }

if have hash_ours; then
    o="$(med hash_ours)"; g="$(med hash_git)"; s1="$(med hash_sha1sum)"
    row "tree hash: ours vs \`git add -A && git write-tree\`" "$(fmt "$o") s ($(mib_s "$o"))" \
        "$(fmt "$g") s" "$(fmt "$o / $g")" "< 1" "$(verdict "$o < $g")"
    row "tree hash: ours vs \`cat \| sha1sum\`" "$(fmt "$o") s" "$(fmt "$s1") s ($(mib_s "$s1"))" \
        "$(fmt "$o / $s1")" "<= 1" "$(verdict "$o <= $s1")"
fi
if have install_ours; then
    o="$(med install_ours)"; c="$(med install_curl_tar)"; q="$(med install_sequential)"
    row "install: ours vs \`curl \| tar xzf -\`" "$(fmt "$o") s ($(mib_s "$o"))" "$(fmt "$c") s" \
        "$(fmt "$o / $c")" "<= 1.15" "$(verdict "$o <= 1.15 * $c")"
    row "install: sequential vs ours (speed-up)" "$(fmt "$o") s" "$(fmt "$q") s" \
        "$(fmt "$q / $o")x" ">= 2x" "$(verdict "$q >= 2 * $o")"
fi
if have lookup_first_ns; then
    f="$(med lookup_first_ns)"; p="$(med lookup_repeat_ns)"
    af="$(med lookup_api_first_ns)"; ap="$(med lookup_api_repeat_ns)"
    row "lookup: first \`clima_artifact!\` call in a process" "$(fmt "$f / 1000") µs" "" "" \
        "<= 100 µs" "$(verdict "$f <= 100000")"
    row "lookup: repeated \`clima_artifact!\` call" "$(fmt "$p") ns" "" "" "<= 1 µs" \
        "$(verdict "$p <= 1000")"
    row "lookup: \`Artifacts::ensure_installed\`, first / repeated (info)" \
        "$(fmt "$af / 1000") µs / $(fmt "$ap / 1000") µs" "" "" "" ""
fi
if have rss_ours_kib; then
    k="$(med rss_ours_kib)"; ck="$(med rss_curl_tar_kib)"
    os="$(med rss_ours_s)"; cs="$(med rss_curl_tar_s)"
    row "peak RSS installing $big_size (1 run)" "$(fmt "$k / 1024") MiB" \
        "$(fmt "$ck / 1024") MiB (curl\|tar)" "" "<= 16 MiB" "$(verdict "$k <= 16384")"
    row "install time of the $big_size artifact (1 run, info)" "$(fmt "$os") s" \
        "$(fmt "$cs") s (curl\|tar)" "$(fmt "$os / $cs")" "" ""
fi
if have mpi_single; then
    s="$(med mpi_single)"; m="$(med mpi_multi)"; u="$(med mpi_startup)"
    row "MPI: $mpi_ranks-rank fetch vs 1 process, whole job" "$(fmt "$m") s" "$(fmt "$s") s" \
        "$(fmt "$m / $s")" "<= 1.2" "$(verdict "$m <= 1.2 * $s")"
    row "MPI: same, excluding MPI start-up ($(fmt "$u") s)" "$(fmt "$m - $u") s" "$(fmt "$s") s" \
        "$(fmt "($m - $u) / $s")" "<= 1.2" "$(verdict "$m - $u <= 1.2 * $s")"
fi
frows=()
for kind in "${floor_kinds[@]}"; do
    for comp in "${floor_comps[@]}"; do
        k="${kind}_$comp"
        have "floor_${k}_floor" || continue
        cb="$(med "floor_${kind}_content_bytes")"; tb="$(med "floor_${k}_tar_bytes")"
        o="$(med "floor_${k}_run_ours")"; f="$(med "floor_${k}_floor")"
        stages="$(for st in decompress sha1 sha256 write; do
            printf '%s %s / ' "$st" "$(fmt "$(med "floor_${k}_$st")")"; done)"
        frows+=("| $kind .tar.$comp ($(fmt "$tb * 100 / $cb")% of $(fmt "$cb / 1048576") MiB) | ${stages% / } (parse $(fmt "$(med "floor_${k}_parse")")) | $(fmt "$f") s | $(fmt "$o") s | **$(fmt "$o / $f")** | $(verdict "$o <= 1.25 * $f") |")
        if have "floor_${k}_cpu_ours"; then
            # All CPU an install costs on this machine, spread perfectly over its cores: no
            # scheduling of this pipeline's threads finishes before that (the floor leaves out
            # the receiving).
            cores="$(med "floor_${k}_cores")"; co="$(med "floor_${k}_cpu_ours")"
            cs="$(med "floor_${k}_cpu_server")"; ci="$(med "floor_${k}_cpu_idle")"
            cw="$(med "floor_${k}_cpu_window")"; cn="$(med "floor_${k}_cpu_online")"
            frows+=("| ... CPU bound / floor: (ours $(fmt "$co") + server $(fmt "$cs") s of CPU) / $cores cores; the machine's $cn cores were $(fmt "$ci * 100 / ($cn * $cw)")% idle meanwhile | | | $(fmt "($co + $cs) / $cores") s | $(fmt "($co + $cs) / $cores / $f") | |")
        fi
        c="$(med "floor_${k}_run_curl_tar")"
        frows+=("| ... \`curl \| tar\` / ours | | | $(fmt "$c") s | $(fmt "$c / $o")x | $(verdict "$c >= 3 * $o") (>= 3x) |")
        if have "floor_${k}_run_pooch"; then
            p="$(med "floor_${k}_run_pooch")"
            frows+=("| ... pooch $pooch_version / ours | | | $(fmt "$p") s | $(fmt "$p / $o")x | $(verdict "$p >= 4 * $o") (>= 4x) |")
        fi
        for name in "${alt_names[@]}"; do
            t="$(med "floor_${k}_run_alt_$name")"
            frows+=("| ... \`$name\` (--also-cli) / floor | | | $(fmt "$t") s | $(fmt "$t / $f") | |")
        done
    done
done

{
    if [ "${#frows[@]}" -gt 0 ]; then
        echo "Floor ($(med "floor_${floor_kinds[0]}_${floor_comps[0]}_cores") cores; stage seconds, single thread, median of $runs; ratio = ours / floor, target <= 1.25):"
        echo
        echo "| tarball | stages (s) | floor | ours / contender | ratio | met |"
        echo "|---|---|---|---|---|---|"
        printf '%s\n' "${frows[@]}"
        echo
    fi
    if [ -s "$scratch/parallel.txt" ]; then
        echo "Large downloads over capped streams (scripts/bench-parallel.sh):"
        cat "$scratch/parallel.txt"
        echo
    fi
    [ "${#rows[@]}" -gt 0 ] || { echo "Raw samples: $samples"; exit 0; }
    echo "Dataset: $nfiles files, $bytes bytes ($size requested, seed $seed), tarball $tar_bytes bytes"
    echo "(gzip -6); outputs written to $scratch_fs; median of $runs alternating runs;"
    echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo
    echo "| measurement | ours | baseline | ratio | target | met |"
    echo "|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Raw samples (seconds unless named): $samples"
} | tee "$work/results-$stamp.md"
