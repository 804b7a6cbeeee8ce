package redistest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/node/goredis"
	rueidisnode "github.com/dlockgo/dlock/node/rueidis"
	"github.com/dlockgo/dlock/node/valkeygo"
)

// clusterTimeout bounds cluster creation and each wait for the nodes to agree.
const clusterTimeout = 30 * time.Second

// Cluster is a Redis Cluster of masters only (no replicas), each a Server
// owned by the test. Its methods fail the test on errors and must be called
// from the test's goroutine.
type Cluster struct {
	t       testing.TB
	servers []*Server
	ids     []string
}

// WithClusterBus gives a cluster node a bus port of its own
// (--cluster-port), drawn with its port, and drawn again with it when
// either bind fails.
func WithClusterBus() Option { return func(c *config) { c.bus = true } }

// StartCluster starts masters (at least 3) servers with cluster-enabled,
// joins them with the cli beside the server (redisproc.CLIPath) --cluster
// create, and returns once every node reports cluster_state:ok and knows
// every other, and each master hears a PUBLISH on every other. Slots are
// spread evenly, as redis-cli does. opts apply to every server.
func StartCluster(t testing.TB, masters int, opts ...Option) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: a cluster needs at least 3 masters, got %d", masters)
	}
	cli, err := redisproc.CLIPath()
	if err != nil {
		t.Fatalf("redistest: a cli is needed to create a cluster: %v", err)
	}
	c := &Cluster{t: t}
	for range masters {
		// The bus port is chosen explicitly (the default, port+10000, may
		// be taken or out of range) and drawn again with the port when
		// either bind fails.
		s := Start(t, append(slices.Clip(opts), WithClusterBus(), WithArgs(
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
		))...)
		c.servers = append(c.servers, s)
		c.ids = append(c.ids, c.do(s, "CLUSTER", "MYID"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append(c.Addrs(), "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, append([]string{"--cluster", "create"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: %s --cluster create: %v\n%s", cli, err, out)
	}
	c.waitFor("cluster_state:ok on every node", func() bool {
		for _, s := range c.servers {
			info, err := s.Do("CLUSTER", "INFO")
			if err != nil || field(info, "cluster_state") != "ok" ||
				field(info, "cluster_known_nodes") != strconv.Itoa(masters) {
				return false
			}
		}
		return true
	})
	c.awaitBus()
	return c
}

// awaitBus returns once a PUBLISH on each master has reached a subscriber
// on every other master. Valkey 8.0 sends a PUBLISH over the cluster bus
// in a light-weight form that a node accepts only from a peer it has
// finished meeting; until then it closes the link and drops the message
// (its log: "Closing link for node that sent a lightweight message of
// type 4 as its first message on the link"). In the first moments of a
// cluster that loses notices between masters; a test must not see them.
func (c *Cluster) awaitBus() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	const channel = "redistest:bus"
	for i, sub := range c.servers {
		ps := sub.doClient().Subscribe(ctx, channel)
		if _, err := ps.Receive(ctx); err != nil {
			_ = ps.Close()
			c.t.Fatalf("redistest: SUBSCRIBE on master %d: %v", i, err)
		}
		for j, pub := range c.servers {
			if j == i {
				continue
			}
			want := fmt.Sprintf("%d to %d", j, i)
			for heard := false; !heard; {
				if ctx.Err() != nil {
					_ = ps.Close()
					c.t.Fatalf("redistest: cluster: master %d never heard a PUBLISH on master %d within %v", i, j, clusterTimeout)
				}
				c.do(pub, "PUBLISH", channel, want)
				// A read timeout here keeps the subscription (ReceiveMessage
				// would redial), and a lost message is published again.
				for end := time.Now().Add(100 * time.Millisecond); !heard && time.Now().Before(end); {
					msg, err := ps.ReceiveTimeout(ctx, time.Until(end))
					if err != nil {
						break
					}
					m, ok := msg.(*redis.Message)
					heard = ok && m.Payload == want
				}
			}
		}
		_ = ps.Close()
	}
}

// Addrs returns the masters' host:port, in index order.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.servers))
	for i, s := range c.servers {
		a[i] = s.Addr()
	}
	return a
}

// Servers returns the masters, in index order.
func (c *Cluster) Servers() []*Server { return slices.Clone(c.servers) }

// Slot returns the hash slot of key.
func (c *Cluster) Slot(key string) int {
	n, err := strconv.Atoi(c.do(c.servers[0], "CLUSTER", "KEYSLOT", key))
	if err != nil {
		c.t.Fatalf("redistest: CLUSTER KEYSLOT %q: %v", key, err)
	}
	return n
}

// Owner returns the index of the master that serves slot, as master 0 sees
// the cluster, or -1 when no master does.
func (c *Cluster) Owner(slot int) int { return c.ownerSeenBy(0, slot) }

// Nodes returns one cluster-aware node.Node per client library (see
// Clients), closed with their clients when the test ends.
func (c *Cluster) Nodes(t testing.TB) []NamedNode {
	t.Helper()
	gr := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DisableIdentity: true})
	vk, err := valkey.NewClient(valkey.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		_ = gr.Close()
		t.Fatalf("redistest: valkey-go cluster client: %v", err)
	}
	gn, vn := goredis.New(gr), valkeygo.New(vk)
	t.Cleanup(func() {
		_ = gn.Close()
		_ = vn.Close()
		_ = gr.Close()
		vk.Close()
		awaitValkeyRefresh()
	})
	return []NamedNode{{Name: "go-redis", Node: gn}, {Name: "valkey-go", Node: vn}}
}

// AllNodes is Nodes with a rueidis cluster client as well (redigo has no
// cluster client), for the adapter tests of package node.
func (c *Cluster) AllNodes(t testing.TB) []NamedNode {
	t.Helper()
	nodes := c.Nodes(t)
	// One seed: given every master's address, rueidis 1.0.80 often drops
	// a connection of its first topology read and closes it 5 s later in
	// a goroutine the test would have to wait for (awaitRefresh); with
	// one it did not in 16 runs.
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs()[:1], DisableCache: true})
	if err != nil {
		t.Fatalf("redistest: rueidis cluster client: %v", err)
	}
	rn := rueidisnode.New(rc)
	t.Cleanup(func() {
		_ = rn.Close()
		rc.Close()
		awaitRefresh("rueidis.(*clusterClient)._refresh")
	})
	return append(nodes, NamedNode{Name: "rueidis", Node: rn})
}

// MoveSlot moves slot, with its keys, to master to by a live migration, as
// an operator resharding a running cluster would; it returns once every
// master agrees on the new owner. Moving a slot to its owner does nothing.
func (c *Cluster) MoveSlot(slot, to int) {
	c.t.Helper()
	c.BeginMove(slot, to).Finish()
}

// SlotMove is a migration of one slot in progress: between BeginMove and
// Finish the source answers for keys it still has and redirects clients
// with ASK for the others, and the destination accepts ASKING clients.
type SlotMove struct {
	c              *Cluster
	slot, from, to int
}

// BeginMove marks slot as importing on master to and migrating on its
// owner, and moves no key yet.
func (c *Cluster) BeginMove(slot, to int) *SlotMove {
	c.t.Helper()
	if to < 0 || to >= len(c.servers) {
		c.t.Fatalf("redistest: move slot %d to master %d of %d", slot, to, len(c.servers))
	}
	from := c.Owner(slot)
	if from < 0 {
		c.t.Fatalf("redistest: slot %d has no owner", slot)
	}
	m := &SlotMove{c: c, slot: slot, from: from, to: to}
	if from == to {
		return m
	}
	s := strconv.Itoa(slot)
	c.do(c.servers[to], "CLUSTER", "SETSLOT", s, "IMPORTING", c.ids[from])
	c.do(c.servers[from], "CLUSTER", "SETSLOT", s, "MIGRATING", c.ids[to])
	return m
}

// MigrateKeys moves the keys the source still holds in the slot to the
// destination, and returns how many it moved.
func (m *SlotMove) MigrateKeys() int {
	c := m.c
	c.t.Helper()
	if m.from == m.to {
		return 0
	}
	src, dst := c.servers[m.from], c.servers[m.to]
	moved := 0
	for {
		out := c.do(src, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(m.slot), "100")
		if out == "" {
			return moved
		}
		keys := strings.Split(out, "\n")
		args := append([]string{"MIGRATE", "127.0.0.1", strconv.Itoa(dst.Port()), "", "0", "5000", "KEYS"}, keys...)
		c.do(src, args...)
		moved += len(keys)
	}
}

// Finish moves the remaining keys, assigns the slot to the destination on
// every master (the destination first, so it never refuses the slot's
// clients), and waits until all of them agree.
func (m *SlotMove) Finish() {
	c := m.c
	c.t.Helper()
	if m.from == m.to {
		return
	}
	m.MigrateKeys()
	s := strconv.Itoa(m.slot)
	order := []int{m.to, m.from}
	for i := range c.servers {
		if i != m.to && i != m.from {
			order = append(order, i)
		}
	}
	for _, i := range order {
		c.do(c.servers[i], "CLUSTER", "SETSLOT", s, "NODE", c.ids[m.to])
	}
	c.waitFor(fmt.Sprintf("every master to see slot %d on master %d", m.slot, m.to), func() bool {
		for i := range c.servers {
			if c.ownerSeenBy(i, m.slot) != m.to {
				return false
			}
		}
		return true
	})
}

// awaitValkeyRefresh waits, at most 6 s, for the goroutines valkey-go starts
// after a topology change to close the replaced connections 5 s later:
// Close does not stop them, and a test's leak check would see them.
func awaitValkeyRefresh() { awaitRefresh("valkey-go.(*clusterClient)._refresh") }

// awaitRefresh waits, at most 6 s, until no goroutine's stack holds mark.
func awaitRefresh(mark string) {
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); {
		if !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte(mark)) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ownerSeenBy parses CLUSTER NODES of master i: each line is
// "<id> <addr> <flags> <master> <ping> <pong> <epoch> <link> <slots>...",
// where a slot entry is "n", "a-b", or a bracketed migration mark.
func (c *Cluster) ownerSeenBy(i, slot int) int {
	out := c.do(c.servers[i], "CLUSTER", "NODES")
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 {
			continue
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := a, error(nil)
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				return slices.Index(c.ids, f[0])
			}
		}
	}
	return -1
}

func (c *Cluster) do(s *Server, args ...string) string {
	c.t.Helper()
	out, err := s.Do(args...)
	if err != nil {
		c.t.Fatalf("redistest: %s on %s: %v", strings.Join(args, " "), s.Addr(), err)
	}
	return out
}

func (c *Cluster) waitFor(what string, ok func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	for !ok() {
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: cluster: no %s within %v", what, clusterTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// field returns the value of name in a "name:value" per line reply.
func field(reply, name string) string {
	for line := range strings.SplitSeq(reply, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
