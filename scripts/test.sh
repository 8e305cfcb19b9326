#!/usr/bin/env bash
# The whole test suite (the README's test command).
#
# With an MPI installation present (`mpirun` and `mpicc`) the MPI tests run too, under real
# `mpirun`, and the script FAILS if any of them did not launch mpirun (each MPI test leaves a marker
# file when it really ran; see scripts/ci-mpi.sh). Under CI (CI=true) a missing MPI is an error, so
# the MPI tests can never be skipped silently there.
set -euo pipefail
cd "$(dirname "$0")/.."

# The S3 sync backend is pure Rust: always built and tested (its tests need `moto_server`, see
# scripts/s3-test-server.sh; without it they skip outside CI and fail under CI=true).
features=(--features clima-artifact-runtime/s3)
mpi=0
if command -v mpirun >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1; then
    mpi=1
    features+=(--features clima-artifact-runtime/mpi,clima-artifact-tests/mpi,quickstart-mpi/mpi)
    echo "== MPI found ($(mpirun --version 2>&1 | head -n1)): MPI tests enabled"
    # OpenMPI in containers: allow root, oversubscription, no CMA single-copy (harmless for MPICH).
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=1
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    export CLIMA_REQUIRE_MPI=1
    markers="$(mktemp -d)"
    trap 'rm -rf "$markers"' EXIT
    export CLIMA_MPI_TEST_MARKER_DIR="$markers"
elif [ "${CI:-}" = "true" ]; then
    echo "error: CI=true but MPI is missing (need mpirun and mpicc: apt-get install -y libopenmpi-dev openmpi-bin libclang-dev)" >&2
    exit 1
else
    echo "== MPI not found: MPI tests are skipped (apt-get install -y libopenmpi-dev openmpi-bin libclang-dev to run them)"
fi

cargo test --workspace "${features[@]}"

if [ "$mpi" = 1 ]; then
    expected="$(cargo test -p clima-artifact-tests --features mpi --test mpi -- --list --format terse 2>/dev/null \
        | sed -n 's/: test$//p' | sort)"
    if [ -z "$expected" ]; then
        echo "error: the mpi test target lists no tests (built without the \`mpi\` feature?)" >&2
        exit 1
    fi
    missing="$(comm -23 <(echo "$expected") <(ls "$markers" | sort))"
    if [ -n "$missing" ]; then
        echo "error: these MPI tests did not run mpirun (skipped):" >&2
        echo "$missing" >&2
        exit 1
    fi
    echo "== all $(echo "$expected" | wc -l) MPI tests ran under mpirun"
fi
