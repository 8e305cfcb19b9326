# Sourced by the benchmark scripts: the datasets they share (generated once and cached), the
# capped loopback server that serves them, and how they launch mpirun.

# make_dataset DATA TARBALL SIZE FILES SEED [gen_dataset.py tree options...]
# Generates DATA/content (scripts/bench/gen_dataset.py), a reproducible TARBALL of it (sorted
# names, fixed owner and times, gzip -6 without a timestamp), DATA/tree (its git tree hash by
# real git) and DATA/sha256, unless DATA.done says they are there already.
make_dataset() {
    local data="$1" tarball="$2" size="$3" files="$4" seed="$5"
    shift 5
    [ -f "$data.done" ] && return 0
    rm -rf "$data" "$tarball"
    python3 "$(dirname "${BASH_SOURCE[0]}")/gen_dataset.py" tree "$data/content" \
        --size "$size" --files "$files" --seed "$seed" "$@"
    tar -C "$data/content" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
        -cf - . | gzip -6 -n > "$tarball"
    (export GIT_DIR="$data/check.git" GIT_WORK_TREE="$data/content"
        git init -q && git add -A && git write-tree) > "$data/tree"
    rm -rf "$data/check.git"
    sha256sum "$tarball" | cut -d' ' -f1 > "$data/sha256"
    touch "$data.done"
}

# bench_manifest FILE NAME TREE SHA URL: an Artifacts.toml with one artifact and one download.
bench_manifest() {
    cat > "$1" <<TOML
[$2]
git-tree-sha1 = "$3"

    [[$2.download]]
    url = "$5"
    sha256 = "$4"
TOML
}

# serve_capped SERVER_BIN TARBALL RATE SCRATCH
# Starts SERVER_BIN (`capped_server`: every connection capped at RATE bytes/s) on TARBALL; it
# lives as long as its stdin, a fifo in SCRATCH held open on fd 9. Sets `server_pid`, `url`,
# `base` (the server's address) and `file` (the tarball's name on it); an EXIT trap stops the
# server and removes SCRATCH.
serve_capped() {
    local server_bin="$1" tarball="$2" rate="$3"
    scratch_dir="$4"
    mkfifo "$scratch_dir/server.in"
    "$server_bin" "$tarball" "$rate" < "$scratch_dir/server.in" > "$scratch_dir/server.url" &
    server_pid=$!
    exec 9> "$scratch_dir/server.in"
    trap 'exec 9>&- 2>/dev/null || true; kill "$server_pid" 2>/dev/null || true; rm -rf "$scratch_dir"' EXIT
    for _ in $(seq 100); do [ -s "$scratch_dir/server.url" ] && break; sleep 0.05; done
    url="$(cat "$scratch_dir/server.url")"
    base="${url%/*}"; file="${url##*/}"
}

# mpirun_setup: the environment OpenMPI needs in a container (root, oversubscription, no CMA
# single-copy; harmless for MPICH) and `mpirun_flags`, the flags to pass to mpirun.
mpirun_setup() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    mpirun_flags=()
    if mpirun --version 2>&1 | grep -q "Open MPI"; then
        mpirun_flags=(--allow-run-as-root --oversubscribe)
    fi
}
