package nemesis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// saveSchedule is Redis's default RDB schedule, on for every server.
const saveSchedule = "3600 1 300 100 60 10000"

// server is one redis-server of a deployment, with its own clock.
type server struct {
	*redistest.Server
	n     int
	clock *redistest.Clock
	aof   bool
	// busy is held by a fault on the process (kill, pause, snapshot,
	// failover), so that two of them never act on one server at once.
	busy chan struct{}
}

func (s *server) lock(ctx context.Context) bool {
	select {
	case s.busy <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *server) unlock() { <-s.busy }

// deployment is the servers of one strategy as people run them: save on,
// RDB or AOF everysec per server, each under its own clock, reached by the
// clients through proxies.
//
// Quorum: 5 independent masters, links[i] in front of server i. Single: a
// master and a replica; links[0] is the clients' address and links[1] the
// replica's way to its master, both forwarding to whichever server is the
// master.
type deployment struct {
	strategy string
	srvs     []*server
	links    []*redistest.Proxy

	mu      sync.Mutex
	master  int                 // single: the server links forward to
	samples map[int][]aofSample // AOF servers: their AOF's tail over the last seconds

	clockBusy chan struct{} // one clock off the real one at a time
	stop      func()        // ends the sampler
	sampler   sync.WaitGroup
}

// aofSample is the size of an AOF server's last AOF file at one moment.
type aofSample struct {
	at   time.Time
	file string
	size int64
}

// sampleEvery is how often the sampler records the AOFs' sizes; keep is how
// long it keeps them.
const (
	sampleEvery = 100 * time.Millisecond
	keepSamples = 5 * time.Second
)

func deploy(t *testing.T, p *Plan) *deployment {
	t.Helper()
	d := &deployment{strategy: p.Strategy, clockBusy: make(chan struct{}, 1)}
	for i, aof := range p.AOF {
		args := []string{"--save", saveSchedule}
		if aof {
			args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
		}
		opts := []redistest.Option{redistest.WithArgs(args...)}
		if p.Strategy == Single && i == 1 {
			opts = append(opts, redistest.WithReplicaOf(d.srvs[0].Server), redistest.WithReplicaVia(d.links[1].Addr()))
		}
		srv, clock := redistest.StartClocked(t, opts...)
		d.srvs = append(d.srvs, &server{Server: srv, n: i, clock: clock, aof: aof, busy: make(chan struct{}, 1)})
		switch {
		case p.Strategy == Quorum:
			d.links = append(d.links, redistest.StartProxy(t, srv.Addr()))
		case i == 0: // the clients' link, then the replica's, both to the master
			d.links = append(d.links, redistest.StartProxy(t, srv.Addr()), redistest.StartProxy(t, srv.Addr()))
		}
	}
	if p.Strategy == Single {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := d.srvs[1].WaitSynced(ctx); err != nil {
			t.Fatalf("nemesis: first sync: %v", err)
		}
	}
	d.samples = map[int][]aofSample{}
	ctx, stop := context.WithCancel(context.Background())
	d.stop = stop
	d.sampler.Add(1)
	go d.sample(ctx)
	t.Cleanup(d.close)
	return d
}

// close ends the sampler.
func (d *deployment) close() {
	d.stop()
	d.sampler.Wait()
}

// sample records the size of every AOF server's last AOF file, so that a
// kill can drop the tail an OS crash would have lost.
func (d *deployment) sample(ctx context.Context) {
	defer d.sampler.Done()
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, s := range d.srvs {
				if !s.aof {
					continue
				}
				file, size, err := s.lastAOF()
				if err != nil {
					continue // between a kill and a restart, or not yet written
				}
				d.mu.Lock()
				ss := append(d.samples[s.n], aofSample{at: now, file: file, size: size})
				for len(ss) > 0 && now.Sub(ss[0].at) > keepSamples {
					ss = ss[1:]
				}
				d.samples[s.n] = ss
				d.mu.Unlock()
			}
		}
	}
}

// lastAOF returns the path and size of the server's last incremental AOF
// file, as its manifest names it.
func (s *server) lastAOF() (string, int64, error) {
	dir := filepath.Join(s.Dir(), "appendonlydir")
	b, err := os.ReadFile(filepath.Join(dir, "appendonly.aof.manifest"))
	if err != nil {
		return "", 0, err
	}
	var last string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[0] == "file" && f[4] == "type" && f[5] == "i" {
			last = f[1]
		}
	}
	if last == "" {
		return "", 0, errors.New("no incremental AOF file in the manifest")
	}
	path := filepath.Join(dir, last)
	fi, err := os.Stat(path)
	if err != nil {
		return "", 0, err
	}
	return path, fi.Size(), nil
}

// loseTail truncates the killed server's AOF to its size lose ago: what
// appendfsync everysec leaves on disk when the machine, not just the
// process, dies (a killed process leaves its writes in the page cache).
// The server loads the cut file: aof-load-truncated is on by default.
func (d *deployment) loseTail(s *server, lose time.Duration) (string, error) {
	file, size, err := s.lastAOF()
	if err != nil {
		return "", err
	}
	cut := time.Now().Add(-lose)
	d.mu.Lock()
	var keep *aofSample
	for i, smp := range d.samples[s.n] {
		if !smp.at.After(cut) {
			keep = &d.samples[s.n][i]
		}
	}
	d.mu.Unlock()
	switch {
	case keep == nil:
		return "no AOF sample that old", nil
	case keep.file != file:
		return "AOF rewritten since", nil
	case keep.size >= size:
		return "nothing written since", nil
	}
	if err := os.Truncate(file, keep.size); err != nil {
		return "", err
	}
	return fmt.Sprintf("dropped the AOF's last %d B", size-keep.size), nil
}

// addrs returns the addresses clients dial.
func (d *deployment) addrs() []string {
	if d.strategy == Single {
		return []string{d.links[0].Addr()}
	}
	out := make([]string, len(d.links))
	for i, l := range d.links {
		out[i] = l.Addr()
	}
	return out
}

func (d *deployment) currentMaster() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.master
}

// role names what server n is now.
func (d *deployment) role(n int) string {
	if d.strategy == Quorum {
		return "node"
	}
	if n == d.currentMaster() {
		return "master"
	}
	return "replica"
}

// Event is one fault as it ran.
type Event struct {
	Fault
	Start, End time.Time
	// Roles: each target's role when the fault hit it (single: "master" or
	// "replica"; quorum: "node"); for Failover, the master it killed.
	Roles []string
	// Skipped says why the fault did not run, or ran only in part.
	Skipped string
	// Err is a failure of the harness itself (a restart that failed).
	Err string
	// Note says what a kill-aof dropped.
	Note string
	// Moved (Failover) is when the clients' address moved to the promoted
	// replica: from then on every grant is the new master's, whatever the
	// old one's restart and sync take.
	Moved time.Time
}

// LostData reports whether the event lost a single master's latest
// writes: a kill of the master of any kind, or a failover.
func (e *Event) LostData() bool {
	switch e.Kind {
	case Failover:
		return e.Skipped == ""
	case KillEmpty, KillRDB, KillAOF:
		return len(e.Roles) > 0 && e.Roles[0] == "master"
	}
	return false
}

func (e *Event) String() string {
	s := e.Fault.String()
	if len(e.Roles) > 0 {
		s += " (" + strings.Join(e.Roles, ",") + ")"
	}
	if e.Note != "" {
		s += " " + e.Note
	}
	if e.Skipped != "" {
		s += " skipped: " + e.Skipped
	}
	if e.Err != "" {
		s += " ERROR: " + e.Err
	}
	return s
}

// lockWait bounds how long a fault waits for a server another fault is
// acting on: short, since a fault that runs late would open its windows
// where the schedule meant none (a storm's kill run in the calm after it);
// it is skipped instead. syncWait bounds a failover's wait for the
// replica to be in sync.
const (
	lockWait = 1500 * time.Millisecond
	syncWait = 2 * time.Second
)

// apply runs f on the deployment and records it in e. It returns when the
// fault has ended and healed itself.
func (d *deployment) apply(f Fault, e *Event, pauses pauser) {
	e.Start = time.Now()
	defer func() { e.End = time.Now() }()
	fail := func(err error) {
		if err != nil && e.Err == "" {
			e.Err = err.Error()
		}
	}
	switch f.Kind {
	case KillEmpty, KillRDB, KillAOF:
		var wg sync.WaitGroup
		var mu sync.Mutex
		targets := f.Targets
		if f.Replica {
			targets = []int{1 - d.currentMaster()}
		}
		e.Roles = make([]string, len(targets))
		for i, n := range targets {
			if i > 0 {
				time.Sleep(f.Stagger)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				role, note, err := d.kill(d.srvs[n], f.Kind, f.For, f.Lose)
				mu.Lock()
				defer mu.Unlock()
				e.Roles[i] = role
				if note != "" {
					e.Note = strings.TrimSpace(e.Note + fmt.Sprintf(" server %d: %s;", n, note))
				}
				if errors.Is(err, errBusy) {
					e.Skipped = fmt.Sprintf("server %d busy", n)
					return
				}
				fail(err)
			}()
		}
		wg.Wait()
	case Snapshot:
		s := d.srvs[f.Targets[0]]
		if !d.withLock(e, s) {
			return
		}
		defer s.unlock()
		e.Roles = []string{d.role(s.n)}
		// A save in progress, or another child of the server's (an AOF
		// rewrite, a replica's full sync), leaves no room for a snapshot
		// now: skipped, as a server busy with a fault is.
		switch _, err := s.Do("BGSAVE"); {
		case err == nil || strings.Contains(err.Error(), "in progress"):
		case strings.Contains(err.Error(), "Another child process is active"):
			e.Skipped = fmt.Sprintf("server %d busy with a child process", s.n)
		default:
			fail(fmt.Errorf("BGSAVE on server %d: %w", s.n, err))
		}
	case Pause:
		s := d.srvs[f.Targets[0]]
		if !d.withLock(e, s) {
			return
		}
		defer s.unlock()
		e.Roles = []string{d.role(s.n)}
		fail(s.Signal(syscall.SIGSTOP))
		time.Sleep(f.For)
		fail(s.Signal(syscall.SIGCONT))
	case ClockForward, ClockBack:
		ctx, cancel := context.WithTimeout(context.Background(), lockWait)
		defer cancel()
		select {
		case d.clockBusy <- struct{}{}:
		case <-ctx.Done():
			e.Skipped = "another clock is off"
			return
		}
		defer func() { <-d.clockBusy }()
		s := d.srvs[f.Targets[0]]
		e.Roles = []string{d.role(s.n)}
		jump := f.Jump
		if f.Kind == ClockBack {
			jump = -jump
		}
		s.clock.Jump(jump)
		time.Sleep(f.For)
		s.clock.Reset()
	case Latency, Timeout, ResetPeer:
		link := d.links[f.Targets[0]]
		tx := redistest.Toxic{Name: "nemesis-" + strconv.Itoa(f.N), Stream: f.Stream}
		switch f.Kind {
		case Latency:
			tx.Type, tx.Attributes = "latency", map[string]int64{"latency": f.Latency.Milliseconds(), "jitter": f.Jitter.Milliseconds()}
		case Timeout:
			tx.Type, tx.Attributes = "timeout", map[string]int64{"timeout": f.Delay.Milliseconds()}
		case ResetPeer:
			tx.Type, tx.Attributes = "reset_peer", map[string]int64{"timeout": f.Delay.Milliseconds()}
		}
		if err := link.AddToxic(tx); err != nil {
			fail(err)
			return
		}
		time.Sleep(f.For)
		fail(link.RemoveToxic(tx.Name))
	case Failover:
		d.failover(f, e)
	case HolderPause:
		pauses.pauseNext(f.Worker, f.For)
	case Break:
		if b, ok := pauses.(breaker); ok {
			b.forceRelease(f, e)
		}
	}
}

var errBusy = errors.New("server busy")

func (d *deployment) withLock(e *Event, s *server) bool {
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	if !s.lock(ctx) {
		e.Skipped = fmt.Sprintf("server %d busy", s.n)
		return false
	}
	return true
}

// kill kills s, wipes it (KillEmpty) or drops its AOF's last lose
// (KillAOF), and starts it again after down. It returns s's role when it
// was killed, and what it dropped.
func (d *deployment) kill(s *server, kind Kind, down, lose time.Duration) (role, note string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	if !s.lock(ctx) {
		return "", "", errBusy
	}
	defer s.unlock()
	role = d.role(s.n)
	s.Kill()
	switch {
	case kind == KillEmpty:
		err = s.Wipe()
	case kind == KillAOF && s.aof && lose > 0:
		note, err = d.loseTail(s, lose)
	}
	if err != nil {
		return role, note, err
	}
	time.Sleep(down)
	return role, note, s.StartAgain()
}

// failover promotes the replica: see Failover.
func (d *deployment) failover(f Fault, e *Event) {
	m := d.srvs[d.currentMaster()]
	r := d.srvs[1-m.n]
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	if !m.lock(ctx) {
		e.Skipped = "master busy"
		return
	}
	defer m.unlock()
	if !r.lock(ctx) {
		e.Skipped = "replica busy"
		return
	}
	defer r.unlock()
	// A replica still syncing (after its own restart) would come up empty.
	sctx, scancel := context.WithTimeout(context.Background(), syncWait)
	defer scancel()
	if err := r.WaitSynced(sctx); err != nil {
		e.Skipped = "replica not in sync"
		return
	}
	e.Roles = []string{"master " + strconv.Itoa(m.n)}
	m.Kill()
	var errs []error
	if _, err := r.Do("REPLICAOF", "NO", "ONE"); err != nil {
		errs = append(errs, fmt.Errorf("REPLICAOF NO ONE on server %d: %w", r.n, err))
	}
	r.SetReplicaOf(nil, "")
	errs = append(errs, d.links[0].SetUpstream(r.Addr()), d.links[1].SetUpstream(r.Addr()))
	d.mu.Lock()
	d.master = r.n
	d.mu.Unlock()
	e.Moved = time.Now()
	time.Sleep(f.For)
	m.SetReplicaOf(r.Server, d.links[1].Addr())
	if err := m.StartAgain(); err != nil {
		errs = append(errs, err)
	} else {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		errs = append(errs, m.WaitSynced(sctx))
		scancel()
	}
	if err := errors.Join(errs...); err != nil {
		e.Err = err.Error()
	}
}

// heal undoes whatever a fault may have left behind, though every fault
// heals itself: every server running and continued, every clock real,
// every toxic gone, and a single deployment's replica in sync.
func (d *deployment) heal() error {
	var errs []error
	for _, s := range d.srvs {
		if !s.Running() {
			errs = append(errs, fmt.Errorf("server %d was down after the faults", s.n), s.StartAgain())
		}
		errs = append(errs, s.Signal(syscall.SIGCONT))
		s.clock.Reset()
	}
	for _, l := range d.links {
		errs = append(errs, l.RemoveToxics())
	}
	if d.strategy == Single {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		errs = append(errs, d.srvs[1-d.currentMaster()].WaitSynced(ctx))
	}
	return errors.Join(errs...)
}

// version names the server program and version the deployment runs, as
// the first server reports it: "valkey 8.0.1", "redis 7.0.15".
func (d *deployment) version() string {
	info, err := d.srvs[0].Do("INFO", "server")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	name := fields["server_name"] // Valkey's; Redis 7.0 has none
	if name == "" {
		name = "redis"
	}
	v := fields[name+"_version"]
	if v == "" {
		v = fields["redis_version"]
	}
	return name + " " + v
}
