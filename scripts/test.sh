#!/usr/bin/env bash
# The whole test suite (the README's test command).
#
# With an MPI installation present (`mpirun` and `mpicc`) the MPI tests run too, under real
# `mpirun`, and the script FAILS if any of them did not launch mpirun (each MPI test leaves a marker
# file when it really ran; see scripts/mpi-env.sh). Under CI (CI=true) a missing MPI is an error, so
# the MPI tests can never be skipped silently there.
#
# The last line counts what really ran: `tests: N passed, N failed, N skipped`. A test that
# could not run here (no moto_server, no MPI, not root, ...) says so through
# `clima_artifact_tests::skip`, which leaves a file in $CLIMA_TEST_SKIP_DIR; those tests are
# counted as skipped, not passed, and listed above the last line with the reason.
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
    echo "error: CI=true but MPI is missing (need mpirun and mpicc: scripts/ci-packages.sh --install, as root)" >&2
    exit 1
else
    echo "== MPI not found: MPI tests are skipped (scripts/ci-packages.sh --install, as root, to run them)"
fi

skipped_dir="$(mktemp -d)"
log="$(mktemp)"
cleanup_summary() { rm -rf "$skipped_dir" "$log"; }
trap 'cleanup_summary; [ -n "${mpi_markers:-}" ] && rm -rf "$mpi_markers"; true' EXIT
export CLIMA_TEST_SKIP_DIR="$skipped_dir"

set +e
cargo test --workspace --no-fail-fast "${features[@]}" 2>&1 | tee "$log"
status="${PIPESTATUS[0]}"
set -e

if [ "$status" -ne 0 ] && ! grep -q '^test result: FAILED' "$log"; then
    echo "error: cargo test exited with $status without a failed test (a build error?)" >&2
fi
mpi_status=0
if [ "$mpi" = 1 ] && [ "$status" -eq 0 ]; then
    if mpi_check_markers "error:"; then
        echo "== all $mpi_test_count MPI tests ran under mpirun"
    else
        mpi_status=1
    fi
fi
if [ "$mpi" = 0 ]; then
    export NOT_BUILT="$(grep -c '#\[test\]' clima-artifact-tests/tests/it/mpi.rs) MPI tests (no mpirun and mpicc here; scripts/ci-packages.sh --install, as root, installs them)"
fi
scripts/test-summary.sh "$log" "$skipped_dir"
[ "$status" -eq 0 ] || exit "$status"
exit "$mpi_status"
