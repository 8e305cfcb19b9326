#!/usr/bin/env bash
# Runs the MPI tests and FAILS if any of them was skipped.
#
# Installs nothing: CI installs MPI first (e.g. `apt-get install openmpi-bin libopenmpi-dev
# libclang-dev`, or MPICH). Called by `.ci/run`; also fine to run by hand from the repo root.
# The MPI environment and the skip detection live in scripts/mpi-env.sh (shared with test.sh).
set -euo pipefail

cd "$(dirname "$0")/.."

if ! command -v mpirun >/dev/null 2>&1 && ! command -v mpiexec >/dev/null 2>&1; then
    echo "ci-mpi: FAIL: neither mpirun nor mpiexec is on PATH; install OpenMPI or MPICH" >&2
    exit 1
fi

source scripts/mpi-env.sh

cargo test -p clima-artifact-tests --features mpi --test it -- mpi:: independent_processes::

# Every test of the `mpi` module must have left its marker.
mpi_check_markers "ci-mpi: FAIL:"
echo "ci-mpi: OK: $mpi_test_count MPI tests ran under mpirun, plus the independent-processes test"
