package single_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
)

// BenchmarkAcquireAll: what a set of 4 keys costs against 4 single locks
// taken one after the other, uncontended (each goroutine its own keys):
// an op is a whole acquire and release of the 4 keys either way.
//
//	go test -run '^$' -bench AcquireAll -benchtime 2s ./single/
func BenchmarkAcquireAll(b *testing.B) {
	srv := redistest.Start(b)
	for _, c := range redistest.Nodes(b, srv.Addr()) {
		lk := benchLocker(b, c.Node)
		for _, conc := range []int{1, 16} {
			var id atomic.Int64
			keysOf := func() []string {
				n := strconv.FormatInt(id.Add(1), 10)
				return []string{"a" + n, "b" + n, "c" + n, "d" + n}
			}
			b.Run(c.Name+"/set4/c="+strconv.Itoa(conc), func(b *testing.B) {
				b.SetParallelism(conc)
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					keys := keysOf()
					for pb.Next() {
						l, err := lk.TryAcquireAll(ctx, keys)
						require.NoError(b, err)
						require.NoError(b, l.Release(ctx))
					}
				})
			})
			b.Run(c.Name+"/four/c="+strconv.Itoa(conc), func(b *testing.B) {
				b.SetParallelism(conc)
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					keys := keysOf()
					ls := make([]*lease.Lease, len(keys))
					for pb.Next() {
						for i, k := range keys {
							l, err := lk.TryAcquire(ctx, k)
							require.NoError(b, err)
							ls[i] = l
						}
						for _, l := range ls {
							require.NoError(b, l.Release(ctx))
						}
					}
				})
			})
		}
	}
}
