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
# dlock.test) cannot share a folder.
testbin_build() {
  local list=$1
  shift
  # shellcheck disable=SC2016
  TESTBIN_FLAGS="$*" xargs -P 2 -L 1 sh -c 'set -f; cd "$2" && go test -c $TESTBIN_FLAGS -o "$3" . >/dev/null' _ <"$list"
}

# testbin_run LIST P [FLAG...]: runs the binary of each line of LIST in
# its package's folder, P at a time, once each (-test.count=1, 15 minutes
# at most, then FLAG...: -test.run=..., -test.skip=...), and prints a line
# per package as go test does, with the output of those that failed. It
# fails when one did.
testbin_run() {
  local list=$1 p=$2
  shift 2
  # shellcheck disable=SC2016
  # The output goes beside the binary, named after LIST too: two runs of
  # one binary (one per server) may run at once.
  TESTBIN_FLAGS="$*" TESTBIN_LIST=${list##*/} xargs -P "$p" -L 1 sh -c '
    set -f
    start=$(date +%s) out="$3.$TESTBIN_LIST.log"
    if (cd "$2" && "$3" -test.count=1 -test.timeout=15m $TESTBIN_FLAGS) >"$out" 2>&1 </dev/null; then
      echo "ok  	$1	$(( $(date +%s) - start ))s"
    else
      cat "$out"; echo "FAIL	$1	$(( $(date +%s) - start ))s"; exit 1
    fi' _ <"$list"
}
