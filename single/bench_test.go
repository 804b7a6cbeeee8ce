package single_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/single"
)

// The uncontended lock+unlock of bench/ (which adds the peer libraries),
// here as go test benchmarks so benchstat can compare commits:
//
//	go test -run '^$' -bench . -count 10 ./single/ > new.txt
//	benchstat old.txt new.txt
//
// BenchmarkEvalFloor is one EVALSHA through the same Node: the round trip
// every lock+unlock pays twice, so its ratio to the floor is the cost of
// dlock itself.

var benchFloor = node.NewScript("redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000) return 1")

// benchLocker returns a Locker on n after one lock+unlock, so dialing and
// loading the scripts stay out of the figures.
func benchLocker(b *testing.B, n node.Node) *single.Locker {
	b.Helper()
	lk, err := single.New(n)
	require.NoError(b, err, "New")
	b.Cleanup(func() { _ = lk.Close() })
	ctx := context.Background()
	l, err := lk.TryAcquire(ctx, "bench-warm")
	require.NoError(b, err, "warm-up TryAcquire")
	require.NoError(b, l.Release(ctx), "warm-up Release")
	return lk
}

func BenchmarkEvalFloor(b *testing.B) {
	srv := redistest.Start(b)
	for _, c := range redistest.Nodes(b, srv.Addr()) {
		b.Run(c.Name, func(b *testing.B) {
			ctx := context.Background()
			keys := []string{"bench-floor"}
			_, err := c.Node.Eval(ctx, benchFloor, keys, "1") // dial, load
			require.NoError(b, err)
			b.ReportAllocs()
			before := serverScriptMicros(b, srv)
			for b.Loop() {
				if _, err := c.Node.Eval(ctx, benchFloor, keys, "1"); err != nil {
					b.Fatal(err)
				}
			}
			reportServer(b, srv, before)
		})
	}
}

// serverScriptMicros is the time srv has spent running scripts, in µs.
func serverScriptMicros(b *testing.B, srv *redistest.Server) float64 {
	b.Helper()
	_, usec, err := srv.ScriptStats()
	require.NoError(b, err)
	return usec
}

// reportServer reports the server's script time per op since before (a
// serverScriptMicros reading): what the scripts cost the server, which a
// client-side profile does not show.
func reportServer(b *testing.B, srv *redistest.Server, before float64) {
	b.ReportMetric((serverScriptMicros(b, srv)-before)/float64(b.N), "server-µs/op")
}

// BenchmarkTryAcquireRelease is one TryAcquire and Release at a time, on
// one key, on every client library (redistest.AllClients).
func BenchmarkTryAcquireRelease(b *testing.B) {
	srv := redistest.Start(b)
	for _, c := range redistest.AllNodes(b, srv.Addr()) {
		b.Run(c.Name, func(b *testing.B) {
			lk := benchLocker(b, c.Node)
			ctx := context.Background()
			b.ReportAllocs()
			before := serverScriptMicros(b, srv)
			for b.Loop() {
				l, err := lk.TryAcquire(ctx, "bench-serial")
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			reportServer(b, srv, before)
		})
	}
}

// BenchmarkTryAcquireReleaseParallel runs 32 goroutines per GOMAXPROCS
// (64 on the 2-core machines of docs/benchmarks.md), each on its own key,
// on every client library.
func BenchmarkTryAcquireReleaseParallel(b *testing.B) {
	srv := redistest.Start(b)
	for _, c := range redistest.AllNodes(b, srv.Addr()) {
		b.Run(c.Name, func(b *testing.B) {
			lk := benchLocker(b, c.Node)
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				key := "bench-par-" + strconv.FormatInt(next.Add(1), 10)
				for pb.Next() {
					l, err := lk.TryAcquire(ctx, key)
					if err != nil {
						b.Error(err)
						return
					}
					if err := l.Release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
