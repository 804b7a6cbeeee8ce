#!/usr/bin/env bash
# The suite's parts that depend on the server, run again on the other
# servers people run: on Valkey 8.0.1 and on Redis 7.4.1 the strategies
# (single, quorum), the primitives (election, permits, claims, rwlock),
# the root package (Open, OpenURL, TLS, Sentinel, Cluster, the
# least-privilege ACL users), the node adapters, the test double
# (dlocktest), the nemesis in its short mode and the test harness itself
# (servers, replicas, Sentinel, Cluster, the clock shim); on Valkey 7.2.7
# the strategies, the harness's tests of what the server says it is
# (TestBuild, TestInfoServerFields) and the clock shim's (TestClock*).
# The builds are those of ../shared/valkey and ../shared/redis beside the
# repository (see their READMEs); a missing one fails the run.
#
# Without the race detector: scripts/test.sh runs the same Go code under it
# on Debian's Redis 7.0, and what differs here is the server. For the same
# reason the allocation budgets (the Allocs tests) are left to
# scripts/test.sh, which runs them alone: they count the client's
# allocations, whatever the server. Valkey 7.2 runs beside 8.0: the tests
# wait on servers and clocks far more than they compute, so they overlap
# well on two cores; Redis 7.4 after them.
set -euo pipefail
cd "$(dirname "$0")/.."

bins=()
for build in valkey/8.0.1/valkey valkey/7.2.7/valkey redis/7.4.1/redis; do
  for b in server cli; do
    if [ ! -x "../shared/$build-$b" ]; then
      echo "test-servers: ../shared/$build-$b is missing: the builds belong in ../shared/valkey and ../shared/redis beside the repository (see their READMEs)" >&2
      exit 1
    fi
  done
  # Absolute, since each package's tests run in their own folder.
  bins+=("$(cd "$(dirname "../shared/$build")" && pwd)/$(basename "$build")-server")
done
v8=${bins[0]} v7=${bins[1]} r74=${bins[2]}
# --check: only that the builds are there (scripts/test.sh asks first, so
# that a missing one is said at once, not after the Redis suite).
[ "${1:-}" = --check ] && exit 0

# Left to scripts/test.sh, whatever the server: the allocation budgets
# (see the top), and the ACL tests that read only the repository's files
# (TestACLCoversScripts) or judge that each rule of a line is needed
# (TestACLEachNeeded: its servers' refusals are the same on both); the
# least-privilege users themselves (TestACLLeastPrivilege) run here. And
# the nemesis's catch runs (TestNemesisCatches), which show that its
# checker fails on planted bugs: the checker is Go code the race run
# tries on Redis 7.0; what each server here must show is TestNemesis, its
# promises kept.
skip='Allocs|TestACLEachNeeded|TestACLCoversScripts|TestNemesisCatches'

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

. scripts/testbin.sh

run() { # name server list -p flags...
  local name=$1 bin=$2 list=$3 p=$4 start=$SECONDS
  shift 4
  if DLOCK_SERVER=$bin testbin_run "$list" "$p" -test.skip="$skip" "$@" >"$log/$name" 2>&1; then
    status=ok
  else
    status=FAIL
  fi
  sed "s/^/[$name] /" "$log/$name"
  echo "[$name] $status in $((SECONDS - start))s"
  [ "$status" = ok ]
}

# The longest first, so that no long package starts last.
v8pkgs=(./single ./quorum . ./internal/testkit/nemesis ./election ./rwlock ./internal/testkit/redistest ./permits ./node/... ./claims ./ratelimit ./dlocktest)
# The test binaries first, once each (scripts/testbin.sh), so that no
# compile or link competes with tests that count time; then three
# packages at a time on Valkey 8.0 beside one at a time on Valkey 7.2,
# then three at a time on Redis 7.4 (the tests mostly wait on servers and
# TTLs), all running binaries of the same build. Valkey 8.0 and Redis 7.4
# at once, two at a time each, starved the nemesis's short mode (its
# process late to wake in 40% of the run) and failed its RATE floor.
testbin_list "$log/" "${v8pkgs[@]}" >"$log/v8"
testbin_build "$log/v8"
cp "$log/v8" "$log/r74" # a list of its own: testbin_run logs beside each binary by the list's name
awk '$1 ~ /\/(single|quorum)$/' "$log/v8" >"$log/v7"
awk '$1 ~ /\/internal\/testkit\/redistest$/' "$log/v8" >"$log/v7-info"
run valkey-7.2.7 "$v7" "$log/v7" 1 &&
  run valkey-7.2.7-info "$v7" "$log/v7-info" 1 -test.run='TestBuild|TestInfoServerFields|TestClock' &
p7=$!
rc=0
run valkey-8.0.1 "$v8" "$log/v8" 3 || rc=1
wait $p7 || rc=1
run redis-7.4.1 "$r74" "$log/r74" 3 || rc=1
exit $rc
