package single_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
)

// BenchmarkClusterThroughput measures lock+unlock (TryAcquire, Release) on
// distinct keys, 64 goroutines for a fixed time, against one redis-server
// and against a 3-master cluster on the same machine, with each client. It
// runs each case once, whatever -benchtime says, and reports locks/s (one
// lock+unlock is one op; ns/op is the inverse of the aggregate rate):
//
//	go test -bench ClusterThroughput -run '^$' ./single/
//
// docs/scaling.md has the figures and why the cluster need not win on one
// small machine.
func BenchmarkClusterThroughput(b *testing.B) {
	const (
		workers = 64
		period  = 2 * time.Second
	)
	run := func(b *testing.B, n node.Node) {
		lk := benchLocker(b, n)
		ctx := context.Background()
		for i := range workers { // load the scripts on every master, warm the pools
			l, err := lk.TryAcquire(ctx, "tp-"+strconv.Itoa(i))
			require.NoError(b, err)
			_ = l.Release(ctx)
		}
		b.ResetTimer()
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int
		)
		stop := time.Now().Add(period)
		start := time.Now()
		for i := range workers {
			key := "tp-" + strconv.Itoa(i)
			wg.Go(func() {
				ops := 0
				for time.Now().Before(stop) {
					l, err := lk.TryAcquire(ctx, key)
					if err != nil {
						b.Error(err)
						return
					}
					if err := l.Release(ctx); err != nil {
						b.Error(err)
						return
					}
					ops++
				}
				mu.Lock()
				total += ops
				mu.Unlock()
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		rate := float64(total) / elapsed.Seconds()
		b.ReportMetric(rate, "locks/s")
		b.ReportMetric(float64(elapsed.Nanoseconds())/float64(total), "ns/op")
	}

	srv := redistest.Start(b)
	for _, c := range redistest.Nodes(b, srv.Addr()) {
		b.Run("node=1/"+c.Name, func(b *testing.B) { run(b, c.Node) })
	}
	cl := redistest.StartCluster(b, 3)
	for _, c := range cl.Nodes(b) {
		b.Run("cluster=3/"+c.Name, func(b *testing.B) { run(b, c.Node) })
	}
}
