#!/usr/bin/env bash
# scripts/test-summary.sh LOG SKIP_DIR: the closing lines of scripts/test.sh.
#
# LOG is the output of `cargo test`; SKIP_DIR holds one file per test that said it skipped
# (`clima_artifact_tests::skip` writes them when CLIMA_TEST_SKIP_DIR is set), holding the
# reason. Prints the skipped tests by reason, then `tests: N passed, N failed, N skipped`, where
# "passed" leaves out the skipped tests (cargo counts them as passed: they returned early).
# NOT_BUILT="N reason" adds N tests that were not even compiled (the MPI tests without MPI).
set -euo pipefail
log="$1"
skip_dir="$2"

read -r passed failed ignored < <(sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed; \([0-9]*\) ignored.*/\1 \2 \3/p' "$log" \
    | awk '{p += $1; f += $2; i += $3} END {print p + 0, f + 0, i + 0}')
returned="$(find "$skip_dir" -type f | wc -l)"
NOT_BUILT="${NOT_BUILT:-}"
not_built="${NOT_BUILT%% *}"
not_built="${not_built:-0}"
skipped=$((returned + not_built))
if [ "$not_built" -gt 0 ]; then
    echo "== $not_built test(s) not built: ${NOT_BUILT#* }"
fi
if [ "$returned" -gt 0 ]; then
    echo "== $returned test(s) skipped, by reason:"
    find "$skip_dir" -type f -exec cat {} + | sort | uniq -c | sort -rn | sed 's/^ */   /'
    echo "   tests: $(find "$skip_dir" -type f -printf '%f\n' | sort | sed 's/--/: /' | paste -sd, - | sed 's/,/, /g')"
fi
if [ "$ignored" -gt 0 ]; then
    echo "== $ignored #[ignore] test(s) not run on their own (helpers that other tests run as child processes, and measurements)"
fi
echo "tests: $((passed - returned)) passed, $failed failed, $skipped skipped"
