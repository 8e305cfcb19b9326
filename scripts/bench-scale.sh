#!/usr/bin/env bash
# Benchmark: how collective artifact access scales with the number of ranks, failures at 64
# ranks, and job arrays of independent processes on one depot (issue 40). Not a test: prints
# the tables of BENCHMARKS.md's "Scale" section. Oversubscribed on one machine (`mpirun
# --oversubscribe`, MPI's shared-memory transport).
#
#   scripts/bench-scale.sh [part...]     parts: ranks nodelocal failures arrays (default: all)
#   RANKS="2 8 32 64 128 256" SIZE_MB=4 FAIL_RANKS="8 64" ARRAY=200 ARTIFACTS=20 \
#     scripts/bench-scale.sh
#   PROFILE=dev scripts/bench-scale.sh   # skip the release build (numbers less meaningful)
#   KEEP=1 scripts/bench-scale.sh ranks  # keep every rank's output (the scratch folder)
#
# ranks:    for each P: `mpirun -n P mpi_fetch` of nothing (MPI start-up alone), of the
#           artifact into an empty depot (download) and again (installed), with the collective
#           report; per step the wall time on rank 0 and what every rank sent and received
#           (`clima_comms::traffic`, printed by mpi_fetch), rank 0's peak RSS, the GETs the
#           server saw. A size that takes longer than LIMIT seconds (default 180) is stopped.
# nodelocal: at each NL_RANKS size, node-local mode with the ranks as P/8 "nodes" of 8 (by
#           CLIMA_ARTIFACTS_NODE_ID): what rank 0 (leader 0, the source) received in the install,
#           the GETs, the whole job against the start-up of the same size.
# failures: at each FAIL_RANKS size: one rank asks for another artifact, one node's depot
#           cannot be created (node-local mode, 8 "nodes" by CLIMA_ARTIFACTS_NODE_ID), a 404;
#           every rank must print the same error. Then one rank is SIGKILLed while the others
#           wait for a slow download: mpirun must end.
# arrays:   ARRAY `install_one` processes (no MPI) started at once on one empty depot, all for
#           one artifact, then for ARTIFACTS different ones; under `strace` a second time to count
#           each process's operations on lock files; the waiting processes' log lines.
set -euo pipefail
cd "$(dirname "$0")/.."

parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(ranks nodelocal failures arrays)
nl_ranks="${NL_RANKS:-64 128}"
ranks_list="${RANKS:-2 8 32 64 128 256}"
fail_ranks="${FAIL_RANKS:-8 64}"
size_mb="${SIZE_MB:-4}"
array="${ARRAY:-200}"
artifacts="${ARTIFACTS:-20}"
limit="${LIMIT:-180}"
profile="${PROFILE:-release}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --profile "$profile" -p clima-artifact-tests --features mpi \
    --bin mpi_fetch --bin install_one --bin capped_server >&2
dir_name="$profile"; [ "$profile" = dev ] && dir_name=debug
bin="$CARGO_TARGET_DIR/$dir_name"

source scripts/bench/dataset.sh
mpirun_setup
export CLIMA_ARTIFACTS_PROGRESS=0

work="$(mktemp -d)"
pids=()
# KEEP=1 keeps the scratch folder (every rank's output) and says where it is.
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ -n "${KEEP:-}" ]; then echo "outputs kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }
now() { date +%s.%N; }

# make_artifact NAME MB: a tarball of incompressible data in $work/serve, its hashes in
# $work/NAME.{sha,tree}.
make_artifact() {
    local name="$1" mb="$2" c="$work/content-$1"
    mkdir -p "$c/data" "$work/serve"
    head -c "$((mb * 1024 * 1024))" /dev/urandom > "$c/data/$name.bin"
    tar -C "$c" -czf "$work/serve/$name.tar.gz" data
    sha256sum "$work/serve/$name.tar.gz" | cut -d' ' -f1 > "$work/$name.sha"
    (cd "$c" && git init -q && git add -A && git write-tree) > "$work/$name.tree"
    rm -rf "$c"
}
# entry NAME URL: an Artifacts.toml entry.
entry() {
    printf '[%s]\ngit-tree-sha1 = "%s"\n    [[%s.download]]\n    url = "%s"\n    sha256 = "%s"\n\n' \
        "$1" "$(cat "$work/$1.tree")" "$1" "$2" "$(cat "$work/$1.sha")"
}

make_artifact bench "$size_mb"
make_artifact other 1
for i in $(seq 0 $((artifacts - 1))); do make_artifact "a$i" 1; done
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/serve" 2> "$work/http.log" >/dev/null &
pids+=($!)
for _ in $(seq 50); do curl -sfI -o /dev/null "http://127.0.0.1:$port/bench.tar.gz" && break; sleep 0.1; done
url() { echo "http://127.0.0.1:$port/$1.tar.gz"; }
{
    entry bench "$(url bench)"
    entry other "$(url other)"
    for i in $(seq 0 $((artifacts - 1))); do entry "a$i" "$(url "a$i")"; done
    # A 404: the server has no such file.
    printf '[missing]\ngit-tree-sha1 = "%s"\n    [[missing.download]]\n    url = "%s"\n    sha256 = "%s"\n' \
        "$(printf '1%.0s' $(seq 40))" "$(url nothing-here)" "$(cat "$work/other.sha")"
} > "$work/Artifacts.toml"
manifest="$work/Artifacts.toml"
gets() { grep -c "\"GET /$1.tar.gz" "$work/http.log" || true; }

# run_mpi P OUT ARGS...: mpirun -n P mpi_fetch ARGS (bounded by $limit); wall seconds on stdout.
run_mpi() {
    local p="$1" out="$2"; shift 2
    local s e
    s="$(now)"
    timeout "$limit" mpirun "${mpirun_flags[@]}" -n "$p" "$bin/mpi_fetch" "$manifest" "$@" \
        > "$out" 2> "$out.err" || echo "exit=$?" >> "$out"
    e="$(now)"
    calc "$e - $s"
}
# step OUT STEP FIELD: FIELD of rank 0's STEP line; max_of OUT STEP FIELD: its largest on any rank.
step() { sed -n "s/^STEP rank=0 step=$2 .*$3=\([0-9.]*\).*/\1/p" "$1"; }
max_of() { sed -n "s/^STEP rank=[0-9]* step=$2 .*$3=\([0-9.]*\).*/\1/p" "$1" | sort -g | tail -1; }

part_ranks() {
    echo
    echo "### Collectives by rank count ($size_mb MiB artifact, profile $profile)"
    echo
    echo "| P | start-up s | download: wall s, install step s | installed: wall s, install step s | report step s | rank 0 received in install: msgs / bytes | in report: msgs / bytes | most bytes sent by one rank (install + report) | rank 0 peak RSS MiB | GETs |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for p in $ranks_list; do
        local depot="$work/depot-$p" before cold warm up
        before="$(gets bench)"
        up="$(run_mpi "$p" "$work/up-$p")"
        cold="$(CLIMA_ARTIFACTS_DEPOT_PATH="$depot" run_mpi "$p" "$work/cold-$p" bench --report "$work/report-$p")"
        if grep -q "^exit=" "$work/cold-$p"; then
            echo "| $p | $up | stopped after ${limit} s or failed ($(tail -1 "$work/cold-$p")) | | | | | | | |"
            break
        fi
        warm="$(CLIMA_ARTIFACTS_DEPOT_PATH="$depot" run_mpi "$p" "$work/warm-$p" bench --report "$work/report-$p")"
        local f="$work/warm-$p" sent
        sent="$(sed -n 's/^STEP rank=\([0-9]*\) step=[a-z]* .*sent_bytes=\([0-9]*\).*/\1 \2/p' "$f" \
            | awk '{s[$1]+=$2} END {m=0; for (r in s) if (s[r]>m) m=s[r]; print m}')"
        local rss
        rss="$(sed -n 's/^PEAK rank=0 vmhwm_kb=\([0-9]*\)/\1/p' "$work/cold-$p")"
        printf '| %s | %s | %s, %s | %s, %s | %s | %s / %s | %s / %s | %s | %s | %s |\n' \
            "$p" "$up" "$cold" "$(step "$work/cold-$p" install seconds)" \
            "$warm" "$(step "$f" install seconds)" "$(step "$f" report seconds)" \
            "$(step "$f" install received_messages)" "$(step "$f" install received_bytes)" \
            "$(step "$f" report received_messages)" "$(step "$f" report received_bytes)" \
            "$sent" "$(calc "${rss:-0} / 1024")" "$(( $(gets bench) - before ))"
        rm -rf "$depot"
    done
}

part_nodelocal() {
    echo
    echo "### Node-local mode by rank count (nodes of 8 ranks, $size_mb MiB artifact)"
    echo
    echo "| P | nodes | start-up s | whole job s | rank 0 received in install: msgs / bytes | most bytes one rank received | GETs | every rank's path |"
    echo "|---|---|---|---|---|---|---|---|"
    for p in $nl_ranks; do
        local nodes=$((p / 8)) groups=() up s e before
        up="$(run_mpi "$p" "$work/nlup-$p")"
        for k in $(seq 0 $((nodes - 1))); do
            [ ${#groups[@]} -gt 0 ] && groups+=(":")
            groups+=(-n 8 env CLIMA_ARTIFACTS_NODE_ID="node$k" CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT="$work/nl$k-$p/depot" \
                "$bin/mpi_fetch" "$manifest" bench)
        done
        before="$(gets bench)"
        s="$(now)"
        CLIMA_ARTIFACTS_DEPOT_PATH="$work/nlshared-$p" timeout "$limit" mpirun "${mpirun_flags[@]}" "${groups[@]}" \
            > "$work/nl-$p" 2> "$work/nl-$p.err" || echo "exit=$?" >> "$work/nl-$p"
        e="$(now)"
        local f="$work/nl-$p" most
        most="$(max_of "$f" install received_bytes)"
        printf '| %s | %s | %s | %s | %s / %s | %s | %s | %s/%s |\n' "$p" "$nodes" "$up" "$(calc "$e - $s")" \
            "$(step "$f" install received_messages)" "$(step "$f" install received_bytes)" "$most" \
            "$(( $(gets bench) - before ))" "$(grep -c ' ok path=' "$f" || true)" "$p"
        rm -rf "$work"/nl*-"$p"
    done
}

# same_error OUT P: "P/P same error" when every rank printed one identical err= line.
same_error() {
    local n distinct
    n="$(grep -c '^RESULT .* err=' "$1" || true)"
    distinct="$(sed -n 's/^RESULT rank=[0-9]* size=[0-9]* name=[^ ]* err=//p' "$1" | sort -u | wc -l)"
    if [ "$n" = "$2" ] && [ "$distinct" = 1 ]; then echo "$n/$2 ranks, 1 distinct error"; else echo "$n/$2 ranks with an error, $distinct distinct"; fi
}

part_failures() {
    echo
    echo "### Failures (every rank must end with the same error)"
    echo
    echo "| P | case | wall s | start-up s | every rank |"
    echo "|---|---|---|---|---|"
    for p in $fail_ranks; do
        local up t depot="$work/fdepot-$p"
        up="$(run_mpi "$p" "$work/fup-$p")"
        t="$(CLIMA_ARTIFACTS_DEPOT_PATH="$depot" run_mpi "$p" "$work/f1-$p" bench --other-on-rank $((p - 3)) other)"
        echo "| $p | rank $((p - 3)) asks for another artifact | $t | $up | $(same_error "$work/f1-$p" "$p") |"
        t="$(CLIMA_ARTIFACTS_DEPOT_PATH="$depot" run_mpi "$p" "$work/f2-$p" missing)"
        echo "| $p | a 404 | $t | $up | $(same_error "$work/f2-$p" "$p") |"
        # Node-local mode, 8 "nodes" of P/8 ranks; node 5's depot sits under a regular file.
        local nodes=8 per=$((p / 8)) groups=() s e
        [ "$per" -ge 1 ] || { nodes="$p"; per=1; }
        : > "$work/not-a-folder"
        for k in $(seq 0 $((nodes - 1))); do
            local nd="$work/node$k-$p/depot"
            [ "$k" = 5 ] && nd="$work/not-a-folder/depot"
            [ ${#groups[@]} -gt 0 ] && groups+=(":")
            groups+=(-n "$per" env CLIMA_ARTIFACTS_NODE_ID="node$k" CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT="$nd" \
                "$bin/mpi_fetch" "$manifest" bench)
        done
        s="$(now)"
        CLIMA_ARTIFACTS_DEPOT_PATH="$depot" timeout "$limit" mpirun "${mpirun_flags[@]}" "${groups[@]}" \
            > "$work/f3-$p" 2> "$work/f3-$p.err" || true
        e="$(now)"
        echo "| $p | node 5 of $nodes: its depot cannot be created | $(calc "$e - $s") | $up | $(same_error "$work/f3-$p" "$((nodes * per))") |"
        rm -rf "$depot" "$work"/node*-"$p"
    done
    # One rank SIGKILLed while every rank waits for a download capped at 1 MB/s.
    local p; p="$(echo "$fail_ranks" | awk '{print $NF}')"
    # The server serves until its stdin closes: a fifo held open on fd 3.
    mkfifo "$work/capped.in"
    "$bin/capped_server" "$work/serve/bench.tar.gz" 1000000 > "$work/capped.url" < "$work/capped.in" &
    pids+=($!)
    exec 3> "$work/capped.in"
    for _ in $(seq 50); do [ -s "$work/capped.url" ] && break; sleep 0.1; done
    sed "s#$(url bench)#$(cat "$work/capped.url")#" "$manifest" > "$work/Capped.toml"
    local s e rc=0 victim=""
    s="$(now)"
    CLIMA_ARTIFACTS_DEPOT_PATH="$work/kdepot" timeout "$limit" mpirun "${mpirun_flags[@]}" -n "$p" \
        env BENCH_SCALE_RANK_MARK=1 "$bin/mpi_fetch" "$work/Capped.toml" bench > "$work/kill.out" 2>&1 &
    local mpirun_pid=$!
    sleep 2
    for d in /proc/[0-9]*; do
        if { tr "\0" "\n" < "$d/environ"; } 2>/dev/null | grep -qx "BENCH_SCALE_RANK_MARK=1" \
            && { tr "\0" "\n" < "$d/environ"; } 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$((p / 2))"; then
            victim="${d#/proc/}"; break
        fi
    done
    local k; k="$(now)"
    [ -n "$victim" ] && kill -9 "$victim"
    wait "$mpirun_pid" || rc=$?
    e="$(now)"
    echo
    exec 3>&-
    echo "One rank of $p (rank $((p / 2)), pid ${victim:-none found}) SIGKILLed 2 s into a download capped at 1 MB/s: mpirun ended $(calc "$e - $k") s later with exit code $rc (124 would be the ${limit} s limit)."
}

# array_run N SPEC_OF_I TRACE: N install_one processes at once on one empty depot; the wall time
# until the last one printed its path.
array_run() {
    local n="$1" kind="$2" trace="${3:-}" depot="$work/adepot" s e i started=()
    rm -rf "$depot" "$work/array"; mkdir -p "$work/array"
    s="$(now)"
    for i in $(seq 0 $((n - 1))); do
        local name=bench; [ "$kind" = many ] && name="a$((i % artifacts))"
        if [ -n "$trace" ]; then
            CLIMA_ARTIFACTS_PROGRESS=1 CLIMA_ARTIFACTS_DEPOT_PATH="$depot" strace -f -qq -y -e trace=%file,%desc \
                -o "$work/array/trace.$i" "$bin/install_one" manifest "$manifest" "$name" \
                > "$work/array/out.$i" 2> "$work/array/err.$i" &
        else
            CLIMA_ARTIFACTS_PROGRESS=1 CLIMA_ARTIFACTS_DEPOT_PATH="$depot" "$bin/install_one" manifest "$manifest" "$name" \
                > "$work/array/out.$i" 2> "$work/array/err.$i" &
        fi
        started+=($!)
    done
    for i in "${started[@]}"; do wait "$i" || true; done
    e="$(now)"
    calc "$e - $s"
}

part_arrays() {
    echo
    echo "### Job arrays: $array independent processes at once on one depot (no MPI)"
    echo
    local single before t ok waiting
    before="$(gets bench)"
    local s e; s="$(now)"
    CLIMA_ARTIFACTS_DEPOT_PATH="$work/single" "$bin/install_one" manifest "$manifest" bench > /dev/null
    e="$(now)"; single="$(calc "$e - $s")"; rm -rf "$work/single"
    echo "| case | time to the last path s | one install alone s | processes with a verified path | GETs | lock-file operations per process (strace): median / max | processes whose log names whom they wait for / that waited |"
    echo "|---|---|---|---|---|---|---|"
    for kind in one many; do
        local g0 g1 label
        if [ "$kind" = one ]; then g0="$(gets bench)"; label="1 artifact"; else g0=0; for i in $(seq 0 $((artifacts - 1))); do g0=$((g0 + $(gets "a$i"))); done; label="$artifacts artifacts"; fi
        t="$(array_run "$array" "$kind")"
        ok=0
        for i in $(seq 0 $((array - 1))); do
            local path; path="$(cat "$work/array/out.$i")"
            [ -n "$path" ] && [ -d "$path" ] && ok=$((ok + 1))
        done
        if [ "$kind" = one ]; then g1="$(gets bench)"; else g1=0; for i in $(seq 0 $((artifacts - 1))); do g1=$((g1 + $(gets "a$i"))); done; fi
        # Again under strace: lock-file operations per process.
        array_run "$array" "$kind" trace > /dev/null
        local ops
        ops="$(for i in $(seq 0 $((array - 1))); do grep -c '\.lock' "$work/array/trace.$i" || true; done | sort -g \
            | awk '{a[NR]=$1} END {print a[int((NR+1)/2)] " / " a[NR]}')"
        waiting="$(grep -l 'waiting for' "$work"/array/err.* 2>/dev/null | wc -l)"
        local named; named="$(grep -l 'waiting for .*holds its lock .*: pid [0-9]* on ' "$work"/array/err.* 2>/dev/null | wc -l)"
        cp -r "$work/array" "$work/array-$kind"
        echo "| $label | $t | $single | $ok/$array | $((g1 - g0)) | $ops | $named / $waiting |"
    done
    local example; example="$(grep -h 'waiting for' "$work"/array-one/err.* 2>/dev/null | head -1 | sed "s#$work#<work>#g")"
    echo
    echo "A waiting process's line: \`${example}\`"
}

for part in "${parts[@]}"; do
    case "$part" in
        ranks) part_ranks ;;
        nodelocal) part_nodelocal ;;
        failures) part_failures ;;
        arrays) part_arrays ;;
        *) echo "unknown part $part (ranks, nodelocal, failures, arrays)" >&2; exit 2 ;;
    esac
done
