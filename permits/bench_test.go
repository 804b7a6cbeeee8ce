package permits_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/permits"
	"github.com/dlockgo/dlock/single"
)

// Acquire+release of one permit, on each client, as go test benchmarks:
//
//	go test -run '^$' -bench . -benchtime 3s ./permits/
//
// one-name: every goroutine on one name of 8 permits, so at c=64 the
// queue serves 56 waiters and every release is a handoff. distinct: each
// acquisition on a name of its own (8 permits). single-lock is the single
// strategy's uncontended lock+unlock on the same server, for scale. c is
// the number of goroutines; acq/s counts acquire+release pairs per second,
// scripts/op the scripts the server ran per pair, server-µs/op the time
// it spent in them.
func BenchmarkAcquireRelease(b *testing.B) {
	srv := redistest.Start(b)
	for _, cl := range redistest.Nodes(b, srv.Addr()) {
		for _, c := range []int{1, 64} {
			b.Run(cl.Name+"/one-name/c="+strconv.Itoa(c), func(b *testing.B) {
				s := benchSemaphore(b, cl.Node)
				run(b, srv, c, func(ctx context.Context, i int64) error {
					l, err := s.Acquire(ctx, "bench", 8)
					if err != nil {
						return err
					}
					return l.Release(ctx)
				})
			})
			b.Run(cl.Name+"/distinct/c="+strconv.Itoa(c), func(b *testing.B) {
				s := benchSemaphore(b, cl.Node)
				prefix := "bench:" + strconv.Itoa(c) + ":"
				run(b, srv, c, func(ctx context.Context, i int64) error {
					l, err := s.Acquire(ctx, prefix+strconv.FormatInt(i, 10), 8)
					if err != nil {
						return err
					}
					return l.Release(ctx)
				})
			})
			b.Run(cl.Name+"/single-lock/c="+strconv.Itoa(c), func(b *testing.B) {
				lk, err := single.New(cl.Node)
				require.NoError(b, err)
				prefix := "bench:single:" + strconv.Itoa(c) + ":"
				run(b, srv, c, func(ctx context.Context, i int64) error {
					l, err := lk.Acquire(ctx, prefix+strconv.FormatInt(i%1024, 10))
					if err != nil {
						return err
					}
					return l.Release(ctx)
				})
			})
		}
	}
}

// benchSemaphore returns a Semaphore on n after one acquire+release, so
// dialing and loading the scripts stay out of the figures.
func benchSemaphore(b *testing.B, n node.Node) *permits.Semaphore {
	b.Helper()
	s, err := permits.New(n)
	require.NoError(b, err)
	ctx := context.Background()
	l, err := s.TryAcquire(ctx, "bench-warm", 1)
	require.NoError(b, err)
	require.NoError(b, l.Release(ctx))
	return s
}

// run runs op b.N times from c goroutines, each call with a number of its
// own, and reports the rate, the scripts the server ran per op and the
// time it spent in them.
func run(b *testing.B, srv *redistest.Server, c int, op func(ctx context.Context, i int64) error) {
	b.Helper()
	ctx := context.Background()
	calls, usec, err := srv.ScriptStats()
	require.NoError(b, err)
	var next atomic.Int64
	b.SetParallelism((c + 1) / 2) // GOMAXPROCS is 2 here: c goroutines
	if c == 1 {
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if err := op(ctx, int64(i)); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(ctx, next.Add(1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acq/s")
	calls2, usec2, err := srv.ScriptStats()
	require.NoError(b, err)
	b.ReportMetric(float64(calls2-calls)/float64(b.N), "scripts/op")
	b.ReportMetric((usec2-usec)/float64(b.N), "server-µs/op")
}
