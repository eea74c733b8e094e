#!/usr/bin/env bash
# The main job: install, bring a multi-region sandbox up, and tour it.
# The sandbox keeps running afterwards; stop it with: .venv/bin/isthmus sandbox down
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
.venv/bin/isthmus sandbox up "$@"
.venv/bin/isthmus sandbox tour
