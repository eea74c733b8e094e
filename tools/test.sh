#!/usr/bin/env bash
# Install, then run the test suite in three tiers, cheapest first (tests/tiers.py
# says which test belongs where):
#
#   ./tools/test.sh unit         ruff, mypy, and the pure unit tests on every core;
#                                no sockets, processes or sandbox (a few minutes)
#   ./tools/test.sh component    local servers and processes but no OpenStack: the
#                                kmock tier, MariaDB/PostgreSQL engines, Chromium,
#                                job-worker processes
#   ./tools/test.sh integration  one sandbox for the whole tier, started on free ports
#                                when the run begins (it comes up while the earlier
#                                tiers run) and stopped at the end; every test not
#                                marked exclusive on three workers
#                                (ISTHMUS_TEST_WORKERS), then the exclusive ones
#                                alone (they stop, freeze or reconfigure services).
#                                As root, the OVN tests too (ISTHMUS_TEST_OVN=0 leaves
#                                them out), on a second sandbox (three ML2/OVN
#                                regions) in the background beside the exclusive ones
#   ./tools/test.sh ovn          regions on ML2/OVN: builds the OVN root once
#                                (tools/ovn-root.sh), then tests/integration/ovn on a
#                                sandbox of its own (up --ovn, three regions)
#   ./tools/test.sh              the first three in that order, stopping at the first
#                                tier that fails (CI runs this)
#   ./tools/test.sh ARGS...      one plain pytest run with ARGS (its integration
#                                tests start a sandbox of their own unless
#                                ISTHMUS_SANDBOX_DIR names a running one)
#
# Each pytest run writes a JUnit XML report to test-reports/ (TEST_REPORTS to move
# it); tools/compare_durations.py compares two of them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
PY=.venv/bin/python
reports=${TEST_REPORTS:-test-reports}
mkdir -p "$reports"

pytest_run() {  # NAME ARGS...: one pytest run, its report in $reports/NAME.xml
  local name=$1; shift
  "$PY" -m pytest -ra --durations=25 --junitxml="$reports/$name.xml" -o junit_suite_name="$name" "$@"
}

if [ $# -gt 0 ] && [[ "$1" != unit && "$1" != component && "$1" != integration && "$1" != ovn ]]; then
  exec "$PY" -m pytest -ra --durations=25 "$@"
fi

# A tier's function runs in an `||` list, where bash ignores `set -e`: each
# step's failure is collected by hand.
tier_unit() {
  local status=0
  echo "[test] ruff check"
  .venv/bin/ruff check --quiet . || status=1
  echo "[test] mypy"
  # Its cache outside the clone: a fresh checkout on this machine (CI's) checks
  # only what changed. Keyed by file contents, so any clone may share it.
  MYPY_CACHE_DIR=${MYPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/isthmus/mypy} .venv/bin/mypy || status=1
  pytest_run unit --tier unit -n auto -q || status=$?
  return "$status"
}

tier_component() {
  pytest_run component --tier component -n 2 -q
}

# The integration tier's sandbox starts in the background as soon as the run
# begins, so it comes up while the unit and component tiers run. It is stopped
# on exit, whatever happened (after its start has finished: a sandbox stopped
# half-way through its start would leave services behind).
sandbox_state=""
sandbox_starter=""
start_sandbox() {
  sandbox_state=$(mktemp -d "${TMPDIR:-/tmp}/isthmus-test-sandbox.XXXXXX") || return 1
  trap stop_sandbox EXIT
  echo "[test] starting the test sandbox in $sandbox_state (in the background)"
  sandbox_started=$(date +%s)
  ( "$PY" -m tests.sandboxes start "$sandbox_state" >"$sandbox_state.log" 2>&1
    echo $? >"$sandbox_state.rc" ) &
  sandbox_starter=$!
}

stop_sandbox() {
  stop_ovn_sandbox
  [ -n "$sandbox_state" ] || return 0
  [ -z "$sandbox_starter" ] || wait "$sandbox_starter" 2>/dev/null || true
  .venv/bin/isthmus sandbox down --state-dir "$sandbox_state" >/dev/null 2>&1 || true
  rm -f "$sandbox_state.log" "$sandbox_state.rc"
}

# The OVN tests (regions on ML2/OVN, tests/integration/ovn) have a sandbox of
# their own, three OVN regions without Cinder. As root (ISTHMUS_TEST_OVN=0 leaves
# them out), the OVN root is built when the run begins if missing
# (tools/ovn-root.sh, about a minute once per machine, beside the component tier);
# when the parallel phase ends one background job starts that sandbox, runs the
# tests and stops it, beside the exclusive phase, whose CPU-bound modules run
# last (tests/tiers.py RUN_LAST), and at the same CPU priority; the tier waits
# for it at the end. Not beside the parallel phase: that phase keeps both cores
# busy, and the whole run took 27 minutes so. Not at nice 19: there its Open
# vSwitch and OVN daemons starved and pings timed out (docs/ovn.md, "Tests").
ovn_state=""
ovn_job=""
ovn_root_job=""
ovn_wanted() {
  [ "${ISTHMUS_TEST_OVN:-1}" = 1 ] && [ "$(id -u)" -eq 0 ]
}

# The root's build (debootstrap: a minute of downloads, once per machine) starts
# when the unit tier ends, beside the component tier, off the OVN job's path.
start_ovn_root() {
  ovn_wanted || return 0
  ovn_state=$(mktemp -d "${TMPDIR:-/tmp}/isthmus-test-ovn.XXXXXX") || return 1
  ( ./tools/ovn-root.sh >"$ovn_state.root.log" 2>&1; echo $? >"$ovn_state.root.rc" ) &
  ovn_root_job=$!
}

start_ovn_job() {
  if [ "${ISTHMUS_TEST_OVN:-1}" != 1 ]; then
    echo "[test] OVN tests left out (ISTHMUS_TEST_OVN=0; ./tools/test.sh ovn runs them alone)"
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "[test] OVN tests skipped: regions on ML2/OVN need root (network namespaces, Open vSwitch)"
    return 0
  fi
  [ -n "$ovn_state" ] || start_ovn_root || return 1
  echo "[test] OVN tests: sandbox in $ovn_state, in the background"
  ( status=0
    # The build is the parent shell's child, not this subshell's: wait for its rc file.
    for _ in $(seq 900); do [ -e "$ovn_state.root.rc" ] && break; sleep 1; done
    cat "$ovn_state.root.log" >"$ovn_state.log" 2>/dev/null || true
    [ "$(cat "$ovn_state.root.rc" 2>/dev/null)" = 0 ] || status=1
    if [ "$status" = 0 ]; then
      "$PY" -m tests.sandboxes start-ovn "$ovn_state" >>"$ovn_state.log" 2>&1 || status=$?
    fi
    if [ "$status" = 0 ]; then
      ISTHMUS_OVN_SANDBOX_DIR="$ovn_state" pytest_run ovn --tier integration -m ovn tests/integration/ovn \
        >>"$ovn_state.log" 2>&1 || status=$?
    else
      echo "[test] the OVN tests' sandbox did not start" >>"$ovn_state.log"
    fi
    .venv/bin/isthmus sandbox down --state-dir "$ovn_state" >/dev/null 2>&1 || true
    echo "$status" >"$ovn_state.rc" ) &
  ovn_job=$!
}

finish_ovn_job() {
  [ -n "$ovn_job" ] || return 0
  wait "$ovn_job" || true
  ovn_job=""
  echo "[test] === OVN tests (ran in the background) ==="
  cat "$ovn_state.log"
  local rc
  rc=$(cat "$ovn_state.rc" 2>/dev/null || echo 1)
  rm -f "$ovn_state.log" "$ovn_state.rc" "$ovn_state.root.log" "$ovn_state.root.rc"
  ovn_state=""
  return "$rc"
}

stop_ovn_sandbox() {  # on exit: a job cut short leaves no sandbox behind
  [ -n "$ovn_state" ] || return 0
  [ -z "$ovn_job" ] || kill "$ovn_job" 2>/dev/null || true
  [ -z "$ovn_root_job" ] || wait "$ovn_root_job" 2>/dev/null || true
  .venv/bin/isthmus sandbox down --state-dir "$ovn_state" >/dev/null 2>&1 || true
  rm -f "$ovn_state.log" "$ovn_state.rc" "$ovn_state.root.log" "$ovn_state.root.rc"
}

tier_integration() {
  [ -n "$sandbox_state" ] || start_sandbox || return 1
  wait "$sandbox_starter" || true
  sandbox_starter=""
  if [ "$(cat "$sandbox_state.rc" 2>/dev/null)" != 0 ]; then
    echo "[test] the test sandbox did not start:"
    cat "$sandbox_state.log"
    return 1
  fi
  echo "[test] sandbox up in $(( $(date +%s) - sandbox_started ))s (started after the unit tier)"
  export ISTHMUS_SANDBOX_DIR="$sandbox_state"
  local status=0
  pytest_run integration --tier integration -n "${ISTHMUS_TEST_WORKERS:-3}" --dist loadfile \
    -m "not exclusive and not ovn" || status=$?
  start_ovn_job || status=$?
  pytest_run integration-exclusive --tier integration -m "exclusive and not ovn" || status=$?
  finish_ovn_job || status=$?
  return "$status"
}

# The OVN tier alone: its sandbox started by the tests' fixture.
tier_ovn() {
  ./tools/ovn-root.sh || return 1
  pytest_run ovn --tier integration -m ovn tests/integration/ovn
}

tiers=("$@")
[ ${#tiers[@]} -gt 0 ] || tiers=(unit component integration)
for tier in "${tiers[@]}"; do
  case "$tier" in
    unit|component|integration|ovn) ;;
    *) echo "usage: tools/test.sh [unit] [component] [integration] [ovn] | PYTEST-ARGS..." >&2; exit 2 ;;
  esac
done
# The README's flow leaves the demo's sandbox up: say so first, and run beside it.
wants_sandbox=""
if [[ " ${tiers[*]} " == *" integration "* ]]; then
  "$PY" -m tests.sandboxes others || true
  wants_sandbox=1
fi
times=()
for tier in "${tiers[@]}"; do
  # The test sandbox starts in the background once the unit tier is done, beside
  # the component tier: beside the unit tier it made that tier take 2.7 times as
  # long on two cores (165 s against 61 s), and it is still ready by the time the
  # component tier ends.
  if [ -n "$wants_sandbox" ] && [ "$tier" != unit ]; then
    start_sandbox
    start_ovn_root
    wants_sandbox=""
  fi
  echo "[test] === $tier tier ==="
  started=$(date +%s)
  status=0
  "tier_$tier" || status=$?
  times+=("$tier $(( $(date +%s) - started ))s")
  if [ "$status" -ne 0 ]; then
    echo "[test] $tier tier FAILED (exit $status) after ${times[-1]#* }; later tiers not run"
    exit "$status"
  fi
done
echo "[test] passed: ${times[*]}"
