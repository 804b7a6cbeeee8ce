#!/usr/bin/env bash
# The fault scenarios (internal/testkit/faults) against real redis-server processes,
# with the race detector as in ./scripts/test.sh, writing the table of what
# they observed to docs/results/faults.md and docs/results/faults.json.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -race -count=1 -timeout 10m ./internal/testkit/faults -args -results "$PWD/docs/results"
