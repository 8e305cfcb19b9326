# Sourced by the benchmark scripts: the datasets they share, generated once and cached.

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
