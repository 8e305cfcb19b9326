# Sourced (not run) by scripts/test.sh and scripts/ci-mpi.sh: the environment the MPI tests run
# in, and the check that none of them was skipped.
#
# How "skipped" is detected: every MPI test that really launched `mpirun` touches a file named
# after itself in $CLIMA_MPI_TEST_MARKER_DIR; `mpi_check_markers` lists the tests of the `mpi`
# module of the `it` test binary and requires one marker per test. CLIMA_REQUIRE_MPI=1 also makes a missing
# `mpirun` a test failure rather than a skip.

# OpenMPI in containers: allow root, oversubscription, no CMA single-copy (harmless for MPICH).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export CLIMA_REQUIRE_MPI=1

mpi_markers="$(mktemp -d)"
trap 'rm -rf "$mpi_markers"' EXIT
export CLIMA_MPI_TEST_MARKER_DIR="$mpi_markers"

# mpi_check_markers PREFIX: returns 1 (messages start with PREFIX) unless every test of the `mpi`
# target left its marker; on success sets `mpi_test_count` to the number of those tests.
mpi_check_markers() {
    local prefix="$1" expected missing
    expected="$(cargo test -p clima-artifact-tests --features mpi --test it -- mpi:: --list --format terse 2>/dev/null \
        | sed -n 's/^mpi::\(.*::\)\{0,1\}\([^:]*\): test$/\2/p' | sort)"
    if [ -z "$expected" ]; then
        echo "$prefix the `mpi` module of the `it` test binary lists no tests (built without the \`mpi\` feature?)" >&2
        return 1
    fi
    missing="$(comm -23 <(echo "$expected") <(ls "$mpi_markers" | sort))"
    if [ -n "$missing" ]; then
        echo "$prefix these MPI tests did not run mpirun (skipped):" >&2
        echo "$missing" >&2
        return 1
    fi
    mpi_test_count="$(echo "$expected" | wc -l)"
}
