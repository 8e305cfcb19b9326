#!/usr/bin/env bash
# The whole test suite (the README's test command).
#
# With an MPI installation present (`mpirun` and `mpicc`) the MPI tests run too, under real
# `mpirun`, and the script FAILS if any of them did not launch mpirun (each MPI test leaves a marker
# file when it really ran; see scripts/mpi-env.sh). Under CI (CI=true) a missing MPI is an error, so
# the MPI tests can never be skipped silently there.
set -euo pipefail
cd "$(dirname "$0")/.."

# The S3 sync backend is pure Rust: always built and tested (its tests need `moto_server`, see
# scripts/s3-test-server.sh; without it they skip outside CI and fail under CI=true).
features=(--features clima-artifact-sync/s3)
mpi=0
if command -v mpirun >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1; then
    mpi=1
    features+=(--features clima-artifact-runtime/mpi,clima-artifact-tests/mpi,quickstart-mpi/mpi)
    echo "== MPI found ($(mpirun --version 2>&1 | head -n1)): MPI tests enabled"
    source scripts/mpi-env.sh
elif [ "${CI:-}" = "true" ]; then
    echo "error: CI=true but MPI is missing (need mpirun and mpicc: apt-get install -y libopenmpi-dev openmpi-bin libclang-dev)" >&2
    exit 1
else
    echo "== MPI not found: MPI tests are skipped (apt-get install -y libopenmpi-dev openmpi-bin libclang-dev to run them)"
fi

cargo test --workspace --no-fail-fast "${features[@]}"

if [ "$mpi" = 1 ]; then
    mpi_check_markers "error:"
    echo "== all $mpi_test_count MPI tests ran under mpirun"
fi
