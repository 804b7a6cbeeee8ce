# Test binaries built once, then run as go test runs them, for
# scripts/test.sh and scripts/test-servers.sh (sourced by both). go test
# links a test binary again at every call, so a build pass before a timed
# run (there so that no link competes for the CPU with tests that count
# time) cost every link twice.

# testbin_list PREFIX PKG...: a line per package with tests, in the order
# given (go list keeps it, and drops repeats): "import-path folder
# binary", the binaries named PREFIX1.test, PREFIX2.test, ...
testbin_list() {
  local prefix=$1
  shift
  go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "$@" |
    awk -v p="$prefix" 'NF { print $1, $2, p NR ".test" }'
}

# testbin_build LIST [FLAG...]: builds the binary of each line of LIST
# (go test -c FLAG...), two at a time, each into a file of its own: two
# test binaries of one name (the root's and cmd/dlock's are both
# dlock.test) cannot share a folder. Without DWARF (-ldflags=-w), which
# only a debugger reads (a stack trace and the race detector's reports
# come from the symbol table): it was a fifth of each link's time. With
# -trimpath, so that the build cache serves a clone in any folder: with
# the folder in every compiled package's key, a fresh clone compiled
# everything again (one race binary: 18 s against 5).
testbin_build() {
  local list=$1
  shift
  # shellcheck disable=SC2016
  TESTBIN_FLAGS="$*" xargs -P 2 -L 1 sh -c 'set -f; cd "$2" && go test -c -trimpath -ldflags=-w $TESTBIN_FLAGS -o "$3" . >/dev/null' _ <"$list"
}

# testbin_run LIST P [FLAG...]: runs the binary of each line of LIST in
# its package's folder, P at a time, once each (-test.count=1, 15 minutes
# at most, then FLAG...: -test.run=..., -test.skip=...), and prints a line
# per package as go test does, with the output of those that failed. It
# fails when one did. A line may end in two more fields, a name and a
# server: its binary then runs with DLOCK_SERVER set to that server, and
# its lines are marked [name]; in a third, the client libraries its
# tests use (DLOCK_CLIENTS, see redistest.Clients); in a fourth, one word
# of flags that stands for FLAG... on that line. The packages whose import paths match
# TESTBIN_ALONE (an extended regexp, when set) run one at a time: with
# the others beside them, but never two of them at once.
testbin_run() {
  local list=$1 p=$2
  shift 2
  # shellcheck disable=SC2016
  # The output goes beside the binary, named after LIST and the server:
  # one binary may run once per server.
  TESTBIN_FLAGS="$*" TESTBIN_LIST=${list##*/} TESTBIN_LOCK="$list.alone" xargs -P "$p" -L 1 sh -c '
    set -f
    # A line that ended in a blank took the next one in (xargs -L): the
    # packages it swallowed would pass unrun.
    if [ $# -gt 7 ]; then echo "testbin: a line ran into the next: $*" >&2; exit 255; fi
    mark=""
    if [ -n "${5:-}" ]; then export DLOCK_SERVER="$5"; mark="[$4] "; fi
    if [ -n "${6:-}" ]; then export DLOCK_CLIENTS="$6"; fi
    if [ -n "${7:-}" ]; then TESTBIN_FLAGS="$7"; fi
    # One at a time: the lock is held on fd 9 until this shell ends, and
    # the time counts from when it was taken.
    if [ -n "${TESTBIN_ALONE:-}" ] && printf "%s\n" "$1" | grep -Eq "$TESTBIN_ALONE"; then
      exec 9>"$TESTBIN_LOCK" && flock 9
    fi
    start=$(date +%s) out="$3.$TESTBIN_LIST${4:+.$4}.log"
    if (cd "$2" && "$3" -test.count=1 -test.timeout=15m $TESTBIN_FLAGS) >"$out" 2>&1 </dev/null 9>&-; then
      echo "${mark}ok  	$1	$(( $(date +%s) - start ))s"
    else
      sed "s/^/$mark/" "$out"; echo "${mark}FAIL	$1	$(( $(date +%s) - start ))s"; exit 1
    fi' _ <"$list"
}
