package rwlock_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/rwlock"
)

// Read acquire+release on one key, while one writer loops acquire+release
// on the same key, on each client, as go test benchmarks:
//
//	go test -run '^$' -bench Shared -benchtime 3s ./rwlock/
//
// no-writer runs the readers alone, for scale. c is the number of reader
// goroutines; read/s counts the readers'
// acquire+release pairs per second, write/s the writer's, and
// scripts/op the scripts the server ran per read pair (the writer's
// included).
func BenchmarkShared(b *testing.B) {
	srv := redistest.Start(b)
	for _, cl := range redistest.Nodes(b, srv.Addr()) {
		for _, c := range []int{1, 8, 64} {
			for _, writer := range []bool{true, false} {
				name := cl.Name + "/readers=" + strconv.Itoa(c)
				if !writer {
					name += "/no-writer"
				}
				b.Run(name, func(b *testing.B) {
					lk, err := rwlock.New(cl.Node)
					require.NoError(b, err)
					ctx := context.Background()
					key := "bench:" + cl.Name + ":" + strconv.Itoa(c)
					l, err := lk.Acquire(ctx, key) // dial, load the scripts
					require.NoError(b, err)
					require.NoError(b, l.Release(ctx))

					calls, _, err := srv.ScriptStats()
					require.NoError(b, err)
					var (
						writes atomic.Int64
						stop   = make(chan struct{})
						wg     sync.WaitGroup
					)
					wg.Go(func() {
						for writer {
							select {
							case <-stop:
								return
							default:
							}
							l, err := lk.Acquire(ctx, key)
							if err != nil {
								b.Error(err)
								return
							}
							if err := l.Release(ctx); err != nil {
								b.Error(err)
								return
							}
							writes.Add(1)
						}
					})
					read := func() error {
						l, err := lk.AcquireShared(ctx, key)
						if err != nil {
							return err
						}
						return l.Release(ctx)
					}
					start := time.Now()
					b.ResetTimer()
					if c == 1 {
						for b.Loop() {
							if err := read(); err != nil {
								b.Fatal(err)
							}
						}
					} else {
						b.SetParallelism((c + 1) / 2) // GOMAXPROCS is 2 here: c goroutines
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								if err := read(); err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
					b.StopTimer()
					elapsed := time.Since(start)
					close(stop)
					wg.Wait()
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "read/s")
					b.ReportMetric(float64(writes.Load())/elapsed.Seconds(), "write/s")
					calls2, _, err := srv.ScriptStats()
					require.NoError(b, err)
					b.ReportMetric(float64(calls2-calls)/float64(b.N), "scripts/op")
				})
			}
		}
	}
}
