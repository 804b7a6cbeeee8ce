#!/usr/bin/env bash
# The whole test suite, as the README promises: installs what the tests need
# on a fresh Debian machine (redis-server, redis-cli, gcc, Debian's
# postgresql when no /usr/lib/postgresql/*/bin/initdb is there,
# staticcheck), then vets, runs staticcheck and runs every test with the
# race detector against real redis-server processes and, for the SQL
# fence, a real PostgreSQL (internal/testkit/pgtest); then
# scripts/test-servers.sh runs the server-dependent packages again on
# Valkey 8.0 and 7.2 and Redis 7.4, and scripts/test-redis62.sh the
# floor's test on Redis 6.2.
set -euo pipefail
cd "$(dirname "$0")/.."

# phase says, on stderr, where the suite is and how long it has run, so
# that a slow run shows which part grew.
phase() { echo "test.sh: $1 at ${SECONDS}s" >&2; }

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
# Debian keeps PostgreSQL's programs off PATH, under its release; the
# package leaves its own cluster down, and the tests run initdb themselves.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Valkey and the other Redis releases, from ../shared/valkey and
# ../shared/redis beside the repository: their builds are checked here, so
# that a missing one is said at once; their tests run last.
./scripts/test-servers.sh --check
./scripts/test-redis62.sh --check

# observe/otelmetric is a module of its own (it keeps OpenTelemetry out of
# dlock's dependencies), so ./... from the root does not reach it.
modules=(. observe/otelmetric)
# go vet and staticcheck with -trimpath, as every go test below: without
# it the clone's folder is in their cache keys, and a clone in a new
# folder (CI's) vets and checks everything again, about 130 s of two
# cores, against about 2 s with the cache another clone left.
phase "vet"
for m in "${modules[@]}"; do (cd "$m" && go vet -trimpath ./...); done

# -short, the quick form for a contributor's loop: every package's tests
# against real servers, without the race detector, the fuzz targets,
# staticcheck or the other servers, four packages at a time (the tests
# wait on servers and TTLs far more than they compute), and the tests
# that loop over the client libraries with go-redis alone unless
# DLOCK_CLIENTS says otherwise (the whole suite tries each on a Redis and
# a Valkey). Every go test here is built with -trimpath, as
# scripts/testbin.sh builds the test binaries, so that each build serves
# a clone in any folder. The whole suite below is what CI runs.
if [ "${1:-}" = -short ]; then
  phase "quick run"
  export DLOCK_CLIENTS=${DLOCK_CLIENTS:-go-redis}
  for m in "${modules[@]}"; do (cd "$m" && go test -count=1 -trimpath -p 4 -parallel 4 ./...); done
  phase "done"
  exit 0
fi
# The docs against the code first (names, printed scripts, examples, the
# README's Layout): a second, and the race run below runs them again.
phase "docs check"
go test -count=1 -trimpath -run '^TestDocs' ./internal/testkit/docscheck

# The benchmark module is separate (it keeps the peer libraries out of
# dlock's dependencies); vetting it keeps `cd bench && go run .` building.
(cd bench && go vet -trimpath ./...)

# staticcheck, at one pinned version so that every machine reports the same
# findings. go install puts it in GOBIN, or else the first GOPATH entry's
# bin, which a fresh machine need not have on PATH: it is called by path.
staticcheck_version=v0.8.2
gobin="$(go env GOBIN)"
if [ -z "$gobin" ]; then gopath="$(go env GOPATH)"; gobin="${gopath%%:*}/bin"; fi
staticcheck="$gobin/staticcheck"
case "$("$staticcheck" -version 2>/dev/null || true)" in
*"(${staticcheck_version#v})"*) ;;
*)
  echo "installing: staticcheck $staticcheck_version" >&2
  go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
  ;;
esac
# bench's own package is ours and checked; the peer libraries it imports
# are not, and staticcheck reports only on the packages it is given.
phase "staticcheck"
for m in "${modules[@]}" bench; do (cd "$m" && GOFLAGS=-trimpath "$staticcheck" ./...); done

# Allocation budgets, measured without the race detector, which distorts
# allocation counts (their files are built with !race): only the packages
# that have them, so that no other test binary is built twice.
phase "allocation budgets"
go test -count=1 -trimpath -timeout 5m -run 'Allocs' ./single ./quorum
(cd observe/otelmetric && go test -count=1 -trimpath -timeout 5m -run 'Allocs' ./...)

# Every test with the race detector. The test binaries are built first
# (scripts/testbin.sh: once each), so that no compile or link competes
# for the CPU with tests that count time, and the longest packages start
# first (single, quorum, the root package, the nemesis, the command).
# Two packages at a time (go test's default on two cores): four at once,
# tried, starved the tests with 50-300 ms TTLs of CPU under the race
# detector ("granted after its validity ran out"). Within a package, the
# tests that wait for seconds on the servers (t.Parallel, see
# CONTRIBUTING.md) run four at a time, after the others.
phase "race binaries"
. scripts/testbin.sh
racebin=$(mktemp -d)
trap 'rm -rf "$racebin"' EXIT
for m in "${modules[@]}"; do
  pkgs=(./...) prefix=${m//\//-}-
  if [ "$m" = . ]; then
    pkgs=(./single ./quorum . ./internal/testkit/nemesis ./cmd/dlock ./...) prefix=root-
  fi
  (cd "$m" && testbin_list "$racebin/$prefix" "${pkgs[@]}")
done >"$racebin/list"
testbin_build "$racebin/list" -race
# The nemesis's short runs last: alone, with the machine to themselves.
# Beside another package under the race detector, its process was late to
# wake in three quarters of a run, which then judged too little of it
# (RATE judged in 21%); its two runs at a time load both cores already.
phase "race run"
# With go-redis alone of the two client libraries the tests loop over
# (redistest.Clients): the race detector judges dlock's code, which is
# the same whichever library is under it, and looping over both doubled
# the strategies' CPU time for no race more to find. valkey-go meets the strategies
# on Redis 7.4 and Valkey 8.0 (scripts/test-servers.sh); the tests that
# name a library (its adapter's, a quorum of mixed libraries, a second
# process on the other library) still use it here.
grep -v '/internal/testkit/nemesis ' "$racebin/list" >"$racebin/rest"
grep '/internal/testkit/nemesis ' "$racebin/list" >"$racebin/nemesis"
DLOCK_CLIENTS=go-redis testbin_run "$racebin/rest" 2 -test.parallel=4 || { echo "test.sh: the race run failed (above)" >&2; exit 1; }
phase "race run: the nemesis"
# Its catch runs (TestNemesisCatches) are left to scripts/test-servers.sh,
# which runs them on this Redis without the race detector.
testbin_run "$racebin/nemesis" 1 -test.skip=TestNemesisCatches || { echo "test.sh: the race run failed (above)" >&2; exit 1; }

# Fuzz targets, each for a fixed count of runs (about a second each on a
# quiet 2-core machine; their seed corpora already ran above as plain
# tests). One instrumented test binary per package (go test -c -fuzz),
# built two at a time like the race binaries, then each target run from
# it: go test -fuzz would link a package's binary again for every target.
# A count, not a duration: with a duration, go1.26's fuzz coordinator can
# fail a target with a bare "context deadline exceeded" at the end. Every
# Fuzz function in the tree must have its line below, and every line its
# function: a target renamed or added is not silently left unfuzzed.
phase "fuzz targets"
targets=$(cat <<'TARGETS'
./connect FuzzParseURL 750x
./internal/keyname FuzzNames 4500x
./internal/settings FuzzLocker 12000x
./internal/settings FuzzCall 15000x
./internal/engine FuzzStaleCounter 15000x
./internal/testkit/fuzzreply FuzzDecode 12000x
./single FuzzReadClaim 1500x
./single FuzzReadClaimAll 3000x
./single FuzzHeed 750x
./permits FuzzReadClaim 1500x
./permits FuzzHeed 1000x
./rwlock FuzzReadClaim 1500x
./claims FuzzReadClaim 1500x
./quorum FuzzParseVote 1000x
./quorum FuzzParseSetVote 1000x
./quorum FuzzReadCommit 1000x
./fence FuzzPutReply 1000x
./ratelimit FuzzParseReply 1500x
./cmd/dlock FuzzRunArgs 750x
./cmd/dlock FuzzConfigFile 500x
TARGETS
)
found=$(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' --exclude-dir=bench . |
  sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' | sort -u)
listed=$(awk '{ print $1, $2 }' <<<"$targets" | sort -u)
if [ "$found" != "$listed" ]; then
  echo "test.sh: the fuzz targets in the tree and the list in scripts/test.sh differ (< in the tree, > listed):" >&2
  diff <(echo "$found") <(echo "$listed") >&2 || true
  exit 1
fi
fuzzbin=$(mktemp -d)
trap 'rm -rf "$racebin" "$fuzzbin"' EXIT
awk '{ print $1 }' <<<"$targets" | uniq | xargs go list -f '{{.ImportPath}} {{.Dir}}' |
  awk -v p="$fuzzbin/" '{ print $1, $2, p NR ".test" }' >"$fuzzbin/list"
testbin_build "$fuzzbin/list" -fuzz=.
fuzzcache="$(go env GOCACHE)/fuzz"
# The list has a line per package in the order of the targets' packages:
# each target finds its binary there by that order, without asking go
# list again.
# shellcheck disable=SC2016
if ! awk -v cache="$fuzzcache" 'NR == FNR { line[++n] = $0; next }
  $1 != last { last = $1; i++ ; split(line[i], f, " ") }
  { print f[2], f[3], $2, $3, cache "/" f[1] }' "$fuzzbin/list" - <<<"$targets" |
  xargs -P 2 -L 1 sh -c '
  cd "$1" && "$2" -test.run="^\$" -test.fuzz="^$3\$" -test.fuzztime="$4" -test.parallel=1 -test.fuzzcachedir="$5" >"$2.$3.log" 2>&1 </dev/null ||
    { cat "$2.$3.log"; echo "FAIL	fuzz $3 in $1"; exit 1; }' _; then
  echo "test.sh: a fuzz target failed (above)" >&2
  exit 1
fi

# The server-dependent packages again, on Valkey 8.0 and 7.2 and Redis 7.4
# (see scripts/test-servers.sh). After the race run rather than beside it:
# the two at once load two cores so that timing-bound tests of either fail.
phase "other servers"
./scripts/test-servers.sh
# Below the floor: Redis 6.2, what refuses at once and what works (seconds).
phase "redis 6.2"
./scripts/test-redis62.sh
phase "done"
