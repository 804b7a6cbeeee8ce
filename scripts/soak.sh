#!/usr/bin/env bash
# The randomized nemesis (internal/testkit/nemesis) in long mode: both strategies
# at once, every primitive (locks, sets, election, and on the single
# server permits, the work queue and the read-write lock), under storms
# of faults and calm stretches for DURATION (default 60m) each, then LIVE
# and MEM, writing docs/results/NAME.md and NAME.json. The servers are
# DLOCK_SERVER's (redis-server when unset); NAME defaults to soak-redis,
# or soak-valkey for a valkey-server.
#
#   ./scripts/soak.sh              # 60 minutes on redis-server, a random seed (printed)
#   DURATION=2m SEED=42 ./scripts/soak.sh
#   DLOCK_SERVER=../shared/valkey/8.0.1/valkey-server ./scripts/soak.sh
#   RACE=1 ./scripts/soak.sh       # with the race detector (slower)
#
# It exits non-zero when a promise was broken, a property was judged in
# less than half of the run, or a bound was missed; the report is written
# either way.
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${DURATION:-60m}"
seed="${SEED:-0}"
server="${DLOCK_SERVER:-redis-server}"
# The tests run in their package's folder: a path from the repository's root is made
# absolute (a bare name is looked up on PATH).
case "$server" in */*) server="$(cd "$(dirname "$server")" && pwd)/$(basename "$server")" ;; esac
kind=redis
case "$(basename "$server")" in valkey*) kind=valkey ;; esac
name="${NAME:-soak-$kind}"
race=()
[ -n "${RACE:-}" ] && race=(-race)

DLOCK_SERVER="$server" go test "${race[@]}" -count=1 -timeout 0 -v -run 'TestNemesis$' ./internal/testkit/nemesis \
  -args -nemesis.duration "$duration" -nemesis.seed "$seed" -nemesis.report "$PWD/docs/results" -nemesis.name "$name"
