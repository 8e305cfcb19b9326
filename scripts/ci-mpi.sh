#!/usr/bin/env bash
# Runs the MPI tests (issue 4) and FAILS if any of them was skipped.
#
# Installs nothing: CI installs MPI first (e.g. `apt-get install openmpi-bin libopenmpi-dev
# libclang-dev`, or MPICH). Called by `.ci/run`; also fine to run by hand from the repo root.
#
# How "skipped" is detected: every MPI test that really launched `mpirun` touches a file named
# after itself in $CLIMA_MPI_TEST_MARKER_DIR; this script lists the tests of the `mpi` test
# target and requires one marker per test. CLIMA_REQUIRE_MPI=1 also makes a missing `mpirun`
# a test failure rather than a skip.
set -euo pipefail

cd "$(dirname "$0")/.."

if ! command -v mpirun >/dev/null 2>&1 && ! command -v mpiexec >/dev/null 2>&1; then
    echo "ci-mpi: FAIL: neither mpirun nor mpiexec is on PATH; install OpenMPI or MPICH" >&2
    exit 1
fi

# OpenMPI in containers: allow root, oversubscription, no CMA single-copy (harmless for MPICH).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export CLIMA_REQUIRE_MPI=1

markers="$(mktemp -d)"
trap 'rm -rf "$markers"' EXIT
export CLIMA_MPI_TEST_MARKER_DIR="$markers"

cargo_test=(cargo test -p clima-artifact-tests --features mpi)

"${cargo_test[@]}" --test mpi --test independent_processes

# Every test of the `mpi` target must have left its marker.
expected="$("${cargo_test[@]}" --test mpi -- --list --format terse 2>/dev/null \
    | sed -n 's/: test$//p' | sort)"
if [ -z "$expected" ]; then
    echo "ci-mpi: FAIL: the mpi test target lists no tests (built without the \`mpi\` feature?)" >&2
    exit 1
fi
ran="$(ls "$markers" | sort)"
missing="$(comm -23 <(echo "$expected") <(echo "$ran"))"
if [ -n "$missing" ]; then
    echo "ci-mpi: FAIL: these MPI tests did not run mpirun (skipped):" >&2
    echo "$missing" >&2
    exit 1
fi
echo "ci-mpi: OK: $(echo "$expected" | wc -l) MPI tests ran under mpirun, plus the independent-processes test"
