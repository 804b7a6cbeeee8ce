#!/usr/bin/env bash
# The randomized nemesis (internal/nemesis) in long mode: both strategies
# under overlapping faults for DURATION (default 30m), then LIVE and MEM,
# writing docs/results/soak.md and docs/results/soak.json.
#
#   ./scripts/soak.sh              # 30 minutes, a random seed (printed)
#   DURATION=2m SEED=42 ./scripts/soak.sh
#   RACE=1 ./scripts/soak.sh       # with the race detector (slower)
#
# It exits non-zero when a promise was broken or a bound missed; the report
# is written either way.
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${DURATION:-30m}"
seed="${SEED:-0}"
race=()
[ -n "${RACE:-}" ] && race=(-race)

go test "${race[@]}" -count=1 -timeout 0 -v -run 'TestNemesis$' ./internal/nemesis \
  -args -nemesis.duration "$duration" -nemesis.seed "$seed" -nemesis.report "$PWD/docs/results"
