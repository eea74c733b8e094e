#!/usr/bin/env bash
# Tempest's full compute, volume and network lists against a running sandbox, directly
# against RegionOne and through Isthmus (CentralRegion); prints the comparison table.
#   tools/conformance.sh [--state-dir .sandbox] [--list compute_full] [--concurrency 2] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m tests.conformance.tempest_runner "$@"
