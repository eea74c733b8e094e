#!/usr/bin/env bash
# Install, then run the whole test suite (unit + integration against a real sandbox
# that the tests start on their own ports and stop at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
exec .venv/bin/python -m pytest -ra --durations=25 "$@"
