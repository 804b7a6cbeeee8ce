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
# allocations, whatever the server. The three servers' packages run side
# by side: the tests wait on servers and clocks far more than they
# compute, so they overlap well on two cores.
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
# checker fails on planted bugs: what each server here must show is
# TestNemesis, its promises kept. The catch runs are run here once, on
# Debian's Redis 7.0 (the race run skips them): their workload and
# checker are TestNemesis's, which the race run tries under the race
# detector, and under it they took 100 s of that run's CPU-bound time.
skip='Allocs|TestACLEachNeeded|TestACLCoversScripts|TestNemesisCatches'

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

. scripts/testbin.sh

# The longest first, so that no long package starts last.
pkgs=(./single ./quorum . ./internal/testkit/nemesis ./election ./rwlock ./internal/testkit/redistest ./permits ./node/... ./claims ./ratelimit ./dlocktest)
# The test binaries first, once each (scripts/testbin.sh), so that no
# compile or link competes with tests that count time; then every
# server's packages from one list, four at a time (the tests mostly wait
# on servers and TTLs), all running binaries of the same build. One list
# keeps four running to its end, where a list per server left the last
# one's tail alone on the machine. The nemesis's short mode computes far
# more than the rest: its two runs (Valkey 8.0, Redis 7.4) never overlap
# (TESTBIN_ALONE); the two at once, each beside another package, starved
# it (its process late to wake in 40% of the run) and failed its RATE
# floor.
testbin_list "$log/" "${pkgs[@]}" >"$log/pkgs"
testbin_build "$log/pkgs"
# list NAME SERVER CLIENTS [REGEXP [FLAGS]]: the lines of the packages
# matching REGEXP (all when none is given or it is empty), marked to run
# on SERVER under NAME, their tests with the client libraries CLIENTS, and
# with FLAGS (one word) for testbin_run's own when given. No line may end
# in a blank: xargs -L would join the next line to it.
list() { awk -v n="$1" -v s="$2" -v c="$3" -v re="${4:-.}" -v f="${5:-}" '$1 ~ re { print $0, n, s, c (f == "" ? "" : " " f) }' "$log/pkgs"; }
# Each server with one client library of the two every test loops over
# (redistest.Clients): what differs here is the server. The race run has
# go-redis on Redis 7.0; valkey-go here on Redis 7.4 and on Valkey 8.0
# (Valkey's own), go-redis on Valkey 7.2 (the fork of Redis 7.2): each
# library meets a Redis and a Valkey. The tests that name a library
# (the adapters', the end-to-end test of every client, a quorum of mixed
# libraries, a second process on the other library) still use it.
# Each server's packages in the order above, interleaved, so that the long
# ones start first; on Valkey 7.2 the strategies. The three nemesis runs
# (two short modes and the catch runs) are spread through it: they run
# one at a time (TESTBIN_ALONE), and one that waits for another holds a
# place of the four meanwhile. Valkey 8.0's first, Redis 7.4's after the
# strategies and the root packages have started, the catch runs (the
# heaviest) once the quorum packages are past: beside them, a quorum
# test's 50 ms node calls timed out. So the runs follow one another with
# the others beside them, and none is left alone at the end.
paste -d '\n' <(list valkey-8.0.1 "$v8" valkey-go) <(list redis-7.4.1 "$r74" valkey-go) \
  <(list valkey-7.2.7 "$v7" go-redis '/(single|quorum)$') | grep -v '^$' | grep -v '/nemesis ' >"$log/rest"
{
  list valkey-8.0.1 "$v8" valkey-go '/nemesis$'
  # rest's lines 1-10: single, quorum, the root package and election on
  # each server; 11-16: rwlock, redistest and permits.
  sed -n '1,10p' "$log/rest"
  list redis-7.4.1 "$r74" valkey-go '/nemesis$'
  sed -n '11,16p' "$log/rest"
  # The nemesis's catch runs, on Debian's Redis 7.0 with both libraries:
  # see the skip list above.
  list redis-7.0 redis-server go-redis,valkey-go '/nemesis$' -test.run=TestNemesisCatches
  sed -n '17,$p' "$log/rest"
} >"$log/all"
rc=0
start=$SECONDS
TESTBIN_ALONE='/internal/testkit/nemesis$' testbin_run "$log/all" 4 -test.skip="$skip" -test.parallel=4 || rc=1
echo "test-servers: the packages in $((SECONDS - start))s"
# Valkey 7.2: the harness's tests of what the server says it is and of
# the clock shim.
list valkey-7.2.7-info "$v7" go-redis '/internal/testkit/redistest$' >"$log/v7-info"
testbin_run "$log/v7-info" 1 -test.run='TestBuild|TestInfoServerFields|TestClock' || rc=1
exit $rc
