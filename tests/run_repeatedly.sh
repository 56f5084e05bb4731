#!/usr/bin/env bash
# Runs the whole test suite N times in a row (default 10) and prints, for each run, its duration
# and pytest's counts; exits 1 when any run did not pass. The acceptance "the full suite passes
# 10 times in a row" is `tests/run_repeatedly.sh 10`. Extra arguments go to pytest.
#
#   tests/run_repeatedly.sh [N] [pytest arguments...]
#
# Each run's full output is kept in $RUN_LOGS (default: a new folder under /tmp), so a failure
# can be read afterwards. Run it from the project's root with its virtualenv active.
set -uo pipefail

runs="${1:-10}"
shift $(( $# > 0 ? 1 : 0 ))
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [N] [pytest arguments...]  (N: how many runs, 1 or more)" >&2
    exit 2
fi
cd "$(dirname "$0")/.." || exit 2
logs="${RUN_LOGS:-$(mktemp -d /tmp/reconciler-runs.XXXXXX)}"
mkdir -p "$logs"

milliseconds() { echo $(( $(date +%s%N) / 1000000 )); }
seconds() { printf '%d.%d' $(( $1 / 1000 )) $(( $1 % 1000 / 100 )); }

passed_runs=0
total=0
for run in $(seq 1 "$runs"); do
    log="$logs/run-$run.txt"
    started=$(milliseconds)
    python -m pytest -q -p no:cacheprovider "$@" >"$log" 2>&1
    status=$?
    took=$(( $(milliseconds) - started ))
    total=$(( total + took ))
    # pytest's closing line, e.g. "3 failed, 818 passed, 1 skipped in 201.33s (0:03:21)"
    counts=$(grep -E '^[0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed)' "$log" \
        | tail -1 | sed -E 's/ in [0-9.]+s.*//')
    if [ "$status" -eq 0 ]; then
        verdict=passed
        passed_runs=$((passed_runs + 1))
    else
        verdict="FAILED (exit $status)"
    fi
    echo "run $run/$runs: $verdict in $(seconds "$took") s: ${counts:-no counts}"
done

echo "$passed_runs of $runs runs passed, $(seconds "$total") s in all; logs in $logs"
[ "$passed_runs" -eq "$runs" ]
