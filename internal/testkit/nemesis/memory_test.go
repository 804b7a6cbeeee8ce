package nemesis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// keyMemory counts a lock key's own server keys and nothing else, whatever
// glob characters the key holds, names the keys of dlock's that no lock
// accounts for, and a record of gone owners left behind takes a key past
// MemBound.
func TestKeyMemory(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	keys := []string{"a{b}c", "}x{y", "*", "bin\x00\xff"}
	must := func(err error) {
		t.Helper()
		require.NoError(t, err)
	}
	// The single strategy's hash, for every key; a quorum fence counter.
	for _, k := range keys {
		must(c.HSet(ctx, keyname.Single(k), "attempts", "1796162311771973").Err())
	}
	must(c.Set(ctx, "dlock:{a{b}c}:fence", "1796162311771973", 0).Err())
	// Names that only look alike: another key's, and node-wide ones.
	must(c.Set(ctx, "dlock:{a{b}c}x", strings.Repeat("x", 2000), 0).Err())
	must(c.Set(ctx, "dlock:{*}}", strings.Repeat("x", 2000), 0).Err())
	must(c.Set(ctx, "dlock:epoch", "1", 0).Err())
	// Gone owners piling up under "}x{y", kept an hour.
	gone := keyname.Single("}x{y") + ":gone"
	for i := range 20 {
		must(c.HSet(ctx, gone, strconv.Itoa(i)+strings.Repeat("0", 31), "1").Err())
	}
	must(c.PExpire(ctx, gone, time.Hour).Err())

	per, names, other, err := keyMemory(c, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(other) != 2 {
		t.Errorf("keys of no lock: %v; want the two look-alikes", other)
	}
	for i, k := range keys {
		t.Logf("%q: %d B in %v", k, per[i], names[i])
	}
	wantNames := []int{2, 2, 1, 1}
	for i, k := range keys {
		if len(names[i]) != wantNames[i] {
			t.Errorf("%q: counted %v; want %d server keys", k, names[i], wantNames[i])
		}
	}
	if per[0] > MemBound || per[2] > MemBound || per[3] > MemBound {
		t.Errorf("a hash and a counter: %v B; want within %d", per, MemBound)
	}
	if per[1] <= MemBound {
		t.Errorf("%q with 20 gone owners: %d B; want past %d", keys[1], per[1], MemBound)
	}
}
