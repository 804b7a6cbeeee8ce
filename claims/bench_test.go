package claims_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
)

// One item through the queue, Add + Claim + Complete, three round trips,
// against the same three steps of a plain ZPOPMIN queue (no token, no
// owner, no lease on the client, no done record, no return of expired
// claims), on the same server and client:
//
//	go test -run '^$' -bench Item -benchtime 3s ./claims/
//
// c1 is one goroutine; c64 is 64 of them on one queue. items/s is what
// counts; server-µs/op is the scripts' time on the server per item.

var (
	// baseAdd: KEYS pending; ARGV id, order score.
	baseAdd = node.NewScript("return redis.call('ZADD', KEYS[1], 'NX', ARGV[2], ARGV[1])")
	// baseClaim: KEYS pending, active; ARGV the lease's end. Replies the
	// id, or nil.
	baseClaim = node.NewScript(`local r = redis.call('ZPOPMIN', KEYS[1])
if not r[1] then return false end
redis.call('ZADD', KEYS[2], ARGV[1], r[1])
return r[1]`)
	// baseComplete: KEYS active; ARGV id.
	baseComplete = node.NewScript("return redis.call('ZREM', KEYS[1], ARGV[1])")
)

// itemFunc moves one item, named by seq, through a queue.
type itemFunc func(ctx context.Context, seq int64) error

func BenchmarkItem(b *testing.B) {
	srv := redistest.Start(b)
	// Item ids never repeat, across runs too: a done record would keep
	// an id out of the queue.
	var seq atomic.Int64
	for _, c := range redistest.Nodes(b, srv.Addr()) {
		for _, impl := range []struct {
			name string
			make func(b *testing.B, n node.Node, name string) itemFunc
		}{{"claims", claimsItem}, {"zpopmin", baselineItem}} {
			for _, conc := range []int{1, 64} {
				b.Run(impl.name+"/"+c.Name+"/c"+strconv.Itoa(conc), func(b *testing.B) {
					f := impl.make(b, c.Node, b.Name())
					ctx := context.Background()
					require.NoError(b, f(ctx, seq.Add(1)), "warm-up") // dial, load the scripts
					b.ReportAllocs()
					before := serverScriptMicros(b, srv)
					if conc == 1 {
						for b.Loop() {
							if err := f(ctx, seq.Add(1)); err != nil {
								b.Fatal(err)
							}
						}
					} else {
						b.SetParallelism(max(1, conc/runtime.GOMAXPROCS(0)))
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								if err := f(ctx, seq.Add(1)); err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
					b.ReportMetric((serverScriptMicros(b, srv)-before)/float64(b.N), "server-µs/op")
				})
			}
		}
	}
}

// claimsItem is Add, Claim and Complete on a claims.Queue. Each goroutine
// claims after its own Add, so a claim always finds an item, though
// perhaps another goroutine's.
func claimsItem(b *testing.B, n node.Node, name string) itemFunc {
	q, err := claims.New(n, name)
	require.NoError(b, err)
	return func(ctx context.Context, seq int64) error {
		if err := q.Add(ctx, "item-"+strconv.FormatInt(seq, 10)); err != nil {
			return err
		}
		c, err := q.Claim(ctx)
		if err != nil {
			return err
		}
		return c.Complete(ctx)
	}
}

// baselineItem is the same on a plain ZPOPMIN queue.
func baselineItem(b *testing.B, n node.Node, name string) itemFunc {
	keys := []string{"base:{" + name + "}:pending", "base:{" + name + "}:active"}
	ttl := settings.DefaultTTL.Milliseconds()
	return func(ctx context.Context, seq int64) error {
		s := strconv.FormatInt(seq, 10)
		if _, err := n.Eval(ctx, baseAdd, keys[:1], "item-"+s, s); err != nil {
			return err
		}
		r, err := n.Eval(ctx, baseClaim, keys, strconv.FormatInt(time.Now().UnixMilli()+ttl, 10))
		if err != nil {
			return err
		}
		_, err = n.Eval(ctx, baseComplete, keys[1:], r.Str(0))
		return err
	}
}

// serverScriptMicros is the time srv has spent running scripts, in µs.
func serverScriptMicros(b *testing.B, srv *redistest.Server) float64 {
	b.Helper()
	_, usec, err := srv.ScriptStats()
	require.NoError(b, err)
	return usec
}
