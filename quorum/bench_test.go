package quorum_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// The uncontended quorum lock+unlock of bench/ (which adds redsync), on
// N=5, as go test benchmarks so benchstat can compare commits:
//
//	go test -run '^$' -bench . -count 10 ./quorum/ > new.txt
//	benchstat old.txt new.txt
//
// The nodes are declared durable so the benchmark need not wait out the
// lost-data guard of fresh servers; the guard's epoch read stays in every
// vote's pipeline either way, so the cost per operation is the same.

const benchNodes = 5

// benchQuorum runs f once per client library and token mode, each on a
// Locker over the same five servers.
func benchQuorum(b *testing.B, f func(b *testing.B, lk *quorum.Locker)) {
	srvs := redistest.StartN(b, benchNodes)
	for _, client := range redistest.Clients {
		ns := make([]node.Node, len(srvs))
		for i, s := range srvs {
			ns[i] = redistest.NodeFor(b, client, s.Addr())
		}
		for _, mode := range []string{"tokens", "notokens"} {
			b.Run(client+"/"+mode, func(b *testing.B) {
				opts := []option.Option{option.DurableNodes(true)}
				if mode == "notokens" {
					opts = append(opts, option.Tokens(false))
				}
				lk, err := quorum.New(ns, opts...)
				require.NoError(b, err, "New")
				defer lk.Close()
				// Dialing, script loading and the key's first commit
				// stay out of the figures.
				ctx := context.Background()
				for _, key := range []string{"bench-serial", "bench-warm"} {
					l, err := lk.TryAcquire(ctx, key)
					require.NoError(b, err, "warm-up TryAcquire")
					require.NoError(b, l.Release(ctx), "warm-up Release")
				}
				f(b, lk)
			})
		}
	}
}

// BenchmarkTryAcquireRelease is one TryAcquire and Release at a time, on
// one key. An attempt that fails (a node slower than the node timeout on a
// loaded machine) is counted in failed/op, not fatal.
func BenchmarkTryAcquireRelease(b *testing.B) {
	benchQuorum(b, func(b *testing.B, lk *quorum.Locker) {
		ctx := context.Background()
		failed := 0
		b.ReportAllocs()
		for b.Loop() {
			l, err := lk.TryAcquire(ctx, "bench-serial")
			if err != nil {
				failed++
				continue
			}
			if err := l.Release(ctx); err != nil {
				failed++
			}
		}
		b.ReportMetric(float64(failed)/float64(b.N), "failed/op")
	})
}

// BenchmarkTryAcquireReleaseParallel runs 32 goroutines per GOMAXPROCS
// (64 on the 2-core machines of docs/benchmarks.md), each on its own key.
// A failed attempt (a node slower than the node timeout under this load)
// is counted in the failed/op metric, not fatal.
func BenchmarkTryAcquireReleaseParallel(b *testing.B) {
	benchQuorum(b, func(b *testing.B, lk *quorum.Locker) {
		var next, failed atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			key := "bench-par-" + strconv.FormatInt(next.Add(1), 10)
			for pb.Next() {
				l, err := lk.TryAcquire(ctx, key)
				if err != nil {
					failed.Add(1)
					continue
				}
				if err := l.Release(ctx); err != nil {
					failed.Add(1)
				}
			}
		})
		b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
	})
}

// BenchmarkAcquireAll holds four keys at once, one holder at a time: "set"
// is one AcquireAll of the four and its Release, "sequential" four
// Acquires one after the other and their four Releases. An op is the four
// keys held and let go; sets/s is ops per second.
//
//	go test -run '^$' -bench AcquireAll -count 5 ./quorum/
func BenchmarkAcquireAll(b *testing.B) {
	keys := []string{"bench-set-a", "bench-set-b", "bench-set-c", "bench-set-d"}
	benchQuorum(b, func(b *testing.B, lk *quorum.Locker) {
		ctx := context.Background()
		l, err := lk.AcquireAll(ctx, keys) // load the set's scripts
		require.NoError(b, err, "warm-up AcquireAll")
		require.NoError(b, l.Release(ctx), "warm-up Release")
		b.Run("set", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l, err := lk.AcquireAll(ctx, keys)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sets/s")
		})
		b.Run("sequential", func(b *testing.B) {
			b.ReportAllocs()
			held := make([]*lease.Lease, len(keys))
			for b.Loop() {
				for j, key := range keys {
					l, err := lk.Acquire(ctx, key)
					if err != nil {
						b.Fatal(err)
					}
					held[j] = l
				}
				for _, l := range held {
					if err := l.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sets/s")
		})
	})
}
