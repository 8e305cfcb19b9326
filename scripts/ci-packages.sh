#!/usr/bin/env bash
# The Debian packages the test suite needs, decided by package name, never by probing files
# (a probe for `libclang*.so*` once matched llvm's `libclang-cpp.so.14` and left bindgen without
# `libclang.so`).
#
#   scripts/ci-packages.sh --list                 the packages, one a line
#   scripts/ci-packages.sh --missing [--admindir D]  those dpkg does not list as installed
#   scripts/ci-packages.sh --install              apt-get installs the missing ones (needs root)
#
# --admindir is dpkg's own option (the folder holding dpkg's `status` file), so a test can ask
# what would be installed on a machine described by a status file of its own.
set -euo pipefail

# Keep in step with the README's install line (a test checks that it names the same packages).
ci_packages=(
    openmpi-bin     # mpirun, for the MPI tests
    libopenmpi-dev  # mpi.h and mpicc, for the mpi crate's build
    libclang-dev    # libclang.so, for bindgen in mpi-sys
    pkg-config
    git             # tree-hash vectors computed by real git
    util-linux      # unshare, setpriv, mount
    iproute2        # ip, in network namespaces
    python3-pip     # moto_server (S3 tests) is installed from PyPI
    strace          # which file operations each MPI rank makes (node-local mode test)
    p7zip-full      # `7z`, as Julia's Pkg unpacks: seekable tarballs are read by the real readers
    7zip            # `7zz`
    libarchive-tools  # bsdtar
    zstd            # `zstd -t` and `tar --zstd` of .tar.zst
)

# missing_packages [ADMINDIR]: prints each package of the list that dpkg does not report as
# "install ok installed".
missing_packages() {
    local admin=() p status
    [ -n "${1:-}" ] && admin=(--admindir="$1")
    for p in "${ci_packages[@]}"; do
        status="$(dpkg-query "${admin[@]}" -W -f='${Status}' "$p" 2>/dev/null || true)"
        [ "$status" = "install ok installed" ] || echo "$p"
    done
}

case "${1:-}" in
    --list)
        printf '%s\n' "${ci_packages[@]}"
        ;;
    --missing)
        admindir=""
        if [ "${2:-}" = "--admindir" ]; then admindir="${3:?--admindir needs a folder}"; fi
        missing_packages "$admindir"
        ;;
    --install)
        mapfile -t missing < <(missing_packages "")
        if [ "${#missing[@]}" -eq 0 ]; then
            echo "== Debian packages: all ${#ci_packages[@]} installed (${ci_packages[*]})"
        else
            echo "== installing Debian packages: ${missing[*]}"
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq
            apt-get install -y -qq "${missing[@]}" >/dev/null
            mapfile -t still < <(missing_packages "")
            if [ "${#still[@]}" -gt 0 ]; then
                echo "error: apt-get did not install: ${still[*]}" >&2
                exit 1
            fi
        fi
        ;;
    *)
        echo "usage: $0 --list | --missing [--admindir DIR] | --install" >&2
        exit 2
        ;;
esac
