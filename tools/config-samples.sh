#!/usr/bin/env bash
# Writes etc/*.conf.sample with oslo-config-generator from the options in the
# code (one generator config per service in etc/oslo-config-generator/).
# tests/unit/test_config_samples.py fails while a sample is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
for config in etc/oslo-config-generator/*.conf; do
  .venv/bin/oslo-config-generator --config-file "$config"
done
ls etc/*.conf.sample
