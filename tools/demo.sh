#!/usr/bin/env bash
# The main job: install, bring a multi-region sandbox up, and tour it.
# Options go to `isthmus sandbox up` (e.g. --state-dir D --base-port P --regions A,B);
# as root it adds --dataplane.
# The sandbox keeps running afterwards; stop it with: .venv/bin/isthmus sandbox down [--state-dir D]
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
state_dir=()
args=("$@")
for i in "${!args[@]}"; do
  case "${args[$i]}" in
    --state-dir) state_dir=(--state-dir "${args[$((i + 1))]}") ;;
    --state-dir=*) state_dir=("${args[$i]}") ;;
  esac
done
# As root the servers are real network endpoints and the tour pings across regions.
dataplane=()
if [ "$(id -u)" -eq 0 ] && [[ " $* " != *" --dataplane "* ]]; then dataplane=(--dataplane); fi
.venv/bin/isthmus sandbox up "${dataplane[@]}" "$@"
.venv/bin/isthmus sandbox tour "${state_dir[@]}"
