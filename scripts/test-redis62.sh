#!/usr/bin/env bash
# The documented floor, from below: Redis 6.2 (../shared/redis/6.2.16 beside
# the repository, see its README) runs TestServerFloor, which wants the
# lost-data guard's quorum refused with DLVERSION at once and every other
# strategy and primitive working (the table in docs/deployment.md), and
# the fence package, whose Store is plain Lua on one server. A few
# seconds; without the race detector, as scripts/test-servers.sh: the Go
# code ran under it on Redis 7, what differs here is the server. A
# missing build fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=../shared/redis/6.2.16/redis-server
if [ ! -x "$bin" ]; then
  echo "test-redis62: $bin is missing: the Redis builds belong in ../shared/redis beside the repository (see its README)" >&2
  exit 1
fi
# Absolute, since each package's tests run in their own folder.
bin="$(cd "$(dirname "$bin")" && pwd)/redis-server"
[ "${1:-}" = --check ] && exit 0

DLOCK_SERVER=$bin go test -count=1 -timeout 2m -run '^TestServerFloor$' .
DLOCK_SERVER=$bin go test -count=1 -timeout 2m ./fence
