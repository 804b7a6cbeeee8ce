package fence_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
)

// TestStoreExact: tokens up to 2^53 are stored, compared and read back
// exactly, and a token above it, which Lua would take for 2^53, is
// refused with a *lease.ArgError naming it, the register left unchanged.
func TestStoreExact(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	const top = fence.Token(1 << 53)
	for _, c := range redistest.Nodes(t, srv.Addr()) {
		t.Run(c.Name, func(t *testing.T) {
			s := fence.NewStore(c.Node)
			key := "exact:" + c.Name
			for _, tok := range []fence.Token{top - 2, top - 1, top} {
				require.NoError(t, s.Put(ctx, key, tok.String(), tok), "Put(%d)", tok)
				v, got, ok, err := s.Get(ctx, key)
				require.NoError(t, err, "Get")
				if !ok || got != tok || v != tok.String() {
					t.Fatalf("Get = %q@%d ok %v; want %q@%d", v, got, ok, tok.String(), tok)
				}
				if stored, err := srv.Do("HGET", key, "t"); err != nil || stored != tok.String() {
					t.Fatalf("stored token %q, %v; want %s exactly", stored, err, tok)
				}
			}
			// One below the top is older than the top: refused, and the
			// refusal names the top exactly.
			err := s.Put(ctx, key, "older", top-1)
			var se *fence.StaleError
			if !errors.As(err, &se) || se.Highest != top {
				t.Fatalf("Put(2^53-1) after 2^53 = %v; want a *StaleError with Highest %d", err, top)
			}
			for _, tok := range []fence.Token{top + 1, top + 2, 1<<64 - 1} {
				err := s.Put(ctx, key, "above", tok)
				var ae *lease.ArgError
				if !errors.As(err, &ae) || ae.Arg != "t" || !errors.Is(err, lease.ErrInvalid) ||
					!strings.Contains(err.Error(), "2^53") {
					t.Fatalf("Put(%d) = %v; want a *lease.ArgError for t naming the 2^53 rule", tok, err)
				}
			}
			v, got, _, err := s.Get(ctx, key)
			require.NoError(t, err, "Get")
			if got != top || v != top.String() {
				t.Fatalf("Get after the refusals = %q@%d; want %q@%d, unchanged", v, got, top.String(), top)
			}
		})
	}
}

// putLine matches a put as MONITOR shows it (EVALSHA or EVAL): its last
// two arguments, the value and the token.
var putLine = regexp.MustCompile(`"hist" "(w\d+-\d+)" "(\d+)"$`)

// TestStoreHistory: Puts with interleaved tokens from several goroutines
// and clients at once. The server's own order of the puts is read from
// MONITOR (one thread runs the commands, in the order it shows); in it, every Put
// that returned nil must carry a larger token than every write before
// it, and every Put refused as stale must come after a write of a larger
// token: the accepted sequence, in the server's order, is strictly
// increasing, and nothing was refused that should have been written.
func TestStoreHistory(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	conn, err := net.Dial("tcp", srv.Addr())
	require.NoError(t, err, "dial for MONITOR")
	defer conn.Close()
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(t, err, "MONITOR")
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	require.NoError(t, err, "MONITOR")
	require.Equal(t, "+OK\r\n", line, "MONITOR")

	nodes := redistest.Nodes(t, srv.Addr())
	const writers, puts = 4, 150
	type outcome struct{ accepted bool }
	var (
		mu       sync.Mutex
		outcomes = map[string]outcome{} // by value
		wg       sync.WaitGroup
	)
	for w := range writers {
		s := fence.NewStore(nodes[w%len(nodes)].Node)
		wg.Go(func() {
			// Writer w's tokens interleave with the others': w+1,
			// w+1+writers, ... each writer rising, the writers apart.
			for i := range puts {
				tok := fence.Token(w + 1 + i*writers)
				v := fmt.Sprintf("w%d-%d", w, tok)
				err := s.Put(ctx, "hist", v, tok)
				if err != nil && !errors.Is(err, fence.ErrStale) {
					t.Errorf("Put(%d): %v", tok, err)
					return
				}
				mu.Lock()
				outcomes[v] = outcome{accepted: err == nil}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// A marker, so that reading the monitor ends after every put.
	_, err = srv.Do("ECHO", "history-end")
	require.NoError(t, err, "ECHO")
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	var order []string // values, in the server's order
	tokens := map[string]uint64{}
	for {
		line, err := rd.ReadString('\n')
		require.NoError(t, err, "reading MONITOR")
		line = strings.TrimRight(line, "\r\n")
		if strings.Contains(line, `"history-end"`) {
			break
		}
		if m := putLine.FindStringSubmatch(line); m != nil {
			tok, err := strconv.ParseUint(m[2], 10, 64)
			require.NoError(t, err, "token in %q", line)
			// An EVALSHA refused for a script not yet cached is followed
			// by its EVAL, which ran: a put seen again counts where it
			// was seen last.
			if _, seen := tokens[m[1]]; seen {
				order = slices.DeleteFunc(order, func(v string) bool { return v == m[1] })
			}
			order = append(order, m[1])
			tokens[m[1]] = tok
		}
	}
	require.Len(t, order, writers*puts, "puts seen by MONITOR")
	var high uint64
	accepted := 0
	for _, v := range order {
		o, ok := outcomes[v]
		require.True(t, ok, "MONITOR shows a put %s no writer made", v)
		tok := tokens[v]
		switch {
		case o.accepted && tok <= high:
			t.Fatalf("put %s (token %d) accepted after a write of token %d, in the server's order", v, tok, high)
		case !o.accepted && tok > high:
			t.Fatalf("put %s (token %d) refused as stale, though the highest written before it was %d", v, tok, high)
		case o.accepted:
			high = tok
			accepted++
		}
	}
	if high != writers*puts {
		t.Fatalf("highest written token %d; want %d", high, writers*puts)
	}
	t.Logf("%d of %d puts accepted, in strictly rising order", accepted, len(order))
}
