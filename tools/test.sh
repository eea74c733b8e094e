#!/usr/bin/env bash
# Install, then run the whole test suite: unit tests and integration tests
# against one real sandbox, started here on free ports and stopped at the end.
#
# Two runs share that sandbox: first every test not marked ``exclusive``, on
# two pytest-xdist workers (a module stays on one worker); then the exclusive
# ones alone (they stop or freeze services, set the shared project's quotas,
# or compare timings). With arguments, one plain pytest run with them (it
# starts its own sandbox if an integration test needs one).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest -ra --durations=25 "$@"
fi

state=$(mktemp -d "${TMPDIR:-/tmp}/isthmus-test-sandbox.XXXXXX")
down() { .venv/bin/isthmus sandbox down --state-dir "$state" >/dev/null 2>&1 || true; }
trap down EXIT
echo "[test] starting the test sandbox in $state"
started=$(date +%s)
.venv/bin/python -m tests.conftest "$state" >/dev/null
echo "[test] sandbox up in $(( $(date +%s) - started ))s"
export ISTHMUS_SANDBOX_DIR="$state"

status=0
.venv/bin/python -m pytest -ra --durations=25 -n 2 --dist loadfile -m "not exclusive" || status=$?
.venv/bin/python -m pytest -ra --durations=25 -m exclusive || status=$?
exit "$status"
