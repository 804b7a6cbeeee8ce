// Package nemesis runs both lock strategies under randomized, overlapping
// faults, in the spirit of Jepsen's lock workloads, and holds each to
// exactly the promises its documentation makes.
//
// # What runs
//
// Servers as deployments run them: the quorum on 5 independent
// redis-server masters, the single strategy on a master and a replica
// (diskless first sync). Every server saves RDB snapshots on Redis's default
// schedule and, by the seed, persists with RDB only or with AOF
// (appendfsync everysec) too; every server runs under a clock of its own
// (the redistest clock shim) and is reached through a toxiproxy proxy (the
// single replica replicates through a second proxy in front of the master,
// and a failover moves both). Clients use their libraries' defaults:
// go-redis with its 3 retries, valkey-go; the seed picks each worker's.
// Lock keys come in four shapes: plain, braces inside, a leading '}', and
// binary bytes.
//
// Six workers per strategy loop until the run ends: pick a key, dlock.Do
// with a bounded context, record the grant with the key's safety.Resource,
// hold it (briefly, or across renewals), write once or twice with the
// token without looking at the lease's context first (the fence is what is
// under test), read, give it up. Quorum workers use quorum.New with
// tokens and the lost-data guard on; single workers alternate between
// single.New and single.New with option.Replicas(1, 100ms) on the same keys.
// One call in six, a worker holds two
// of the lock keys at once (AcquireAll, the pair in a random order) and
// uses each as a lock's holder does, with that key's token: each key's
// history mixes set leases with single ones, judged as one (lockSet).
// The same workers also lead: on the key of an election's office, three
// calls in four campaign through package election and hold a term instead
// of a plain lock (campaign). Single workers, one call in seven, take one
// of two permits of a semaphore (package permits) on the same server and
// hold it as a lock; each permit's slot is a resource of its own, checked
// as a lock key is (permit). One lock call in three is an overstay: the
// worker takes a free lock key without joining a queue (TryAcquire, the
// next key when one is taken), holds it without renewal to its very end
// by its own clock, and has a waiter of its own queued behind it, granted
// when the lease ends (overstay): the moment a lock that grants early
// lets a second holder in, in every short run. One call in seven, they add an item to a work
// queue (package claims), one of 8 ids completed and added again all run
// long, and claim the next one, hold it as a lock, and complete it or hand
// it back; each item is a resource checked as a lock key is, and a
// Complete the server accepted after a newer claim of its item was granted
// is a FENCE violation (claimItem). MEM bounds a queue by its ids. Two
// calls in seven, they take a side of the read-write lock "rw" (package
// rwlock) on the same server, renewed in the background: a writer one
// time in three, held as a lock (fenced writes to the lock's register, a
// read), else a reader, which reads the register while it holds. The
// writers are checked as a lock key is; every hold, reader's or writer's,
// with safety.CheckShared (ME: no writer's interval overlaps another
// holder's); the readers' tokens with safety.CheckSharedOrder (ORDER: a
// reader's is no older than any token granted before it began, a writer's
// above every reader's granted before it began). The first reader on a
// new server process raises the counter (docs/rwlock.md), so the readers'
// ORDER keeps the single strategy's windows, as the writers' does. One writer in four is paused past its lease
// and then writes: the first reader after a writer raises the counter,
// so a late write the register accepted after a reader was granted with
// a token not above it is a FENCE violation (rwLateWrites). A valid
// reader's read of a register written under a newer token than its own
// (what a fence would refuse) is sorted by the fault that explains it:
// BEHIND:clock, BEHIND:lost-grant, BEHIND:kept-counter (rwBehindClasses,
// docs/trade.md); one no fault explains is a FENCE violation. MEM bounds
// the lock's keys as a lock key's.
//
// The lock keys' registers are rows of a table in a real PostgreSQL
// (Config.SQL, on in TestNemesis and the soaks; package pgtest starts
// it): every fenced write goes through sqlfence.Table.UpsertTx, as a
// user's would, and each write that lands is logged, in the same
// transaction and under the row's lock, to a second table. After the
// run the log is read in its order: a write under a token below one
// already landed for its key is a FENCE finding, whatever the workers
// believed, with no window to excuse it (the database's condition holds
// whatever the locks did). Judged ("FENCE (sql)"): the share of the
// fault phase's seconds in which a write reached the database and was
// answered.
//
// An operator's break (Break, a fault of the mix on both strategies, and
// calm: it suspends no promise) runs ForceRelease on a lock key a
// lease holds as it starts, through a worker's Locker, whoever holds it:
// a plain lock, a set, a holder pause, a term of office. The broken lease
// ends when the break was sent (safety.Break: the break takes effect on
// the servers at a moment between its sending and its answer, and a lease
// granted before the answer may be the one broken, or the waiter the
// break woke), and nothing else is excused; the break's token goes to the
// key's fence, so that FENCE requires the old holder's later writes
// refused, and counts as one of the key's acquisitions, so that ORDER
// requires it above every token granted before it was sent and below the
// next holder's. A break that fails (a storm's fault) may still have
// ended whichever lease was live across it: it ends them all at its
// sending.
//
// Rate limits, on both strategies: every worker also has a
// ratelimit.Limiter of each of two limits (20 per second burst 5, and 7
// per 300 ms burst 3, whose interval, 42857.14… µs, rounds up to 42858)
// on clients of its own of the strategy's servers (the single master, or
// all five quorum nodes), and a goroutine that calls them in turn every
// 45 ms, up to four calls in flight: about three times what the limits
// admit (see rateLoad). Hand-offs by handle, on both strategies: one
// lock call in four writes its lease out (lease.Lease.Handle); another
// worker's Locker takes it up with Resume, holds it as a lock's
// holder does, extending it by hand every third of its TTL, and releases
// it or lets it expire. Before that, a forged handle (the token raised by
// one, the checksum recomputed as docs/handles.md gives the format) is
// resumed on a third worker's Locker; after it, the ended handle is
// resumed again and the first lease extended (see handoff). The key's
// resource sees one holder throughout: the owner does not change.
//
// The faults (see Kind) are planned up front from the seed alone (NewPlan),
// so a seed replays its schedule; the interleaving of the workers is the
// machine's. The schedule alternates storms (3-4.5 s; an eighth of a
// short run), where the whole mix runs, a fault every 0.4 s on average,
// with calm stretches (11-17 s, or to the end of the run) where only the
// faults that suspend no promise of the strategy run (Calm: on the quorum
// all but the clocks, kills of a majority included; on the single
// strategy SIGSTOP, latency, timeouts, resets, snapshots, holder pauses,
// breaks and restarts of the replica), one every 0.7 s. A storm's faults end by
// its end plus 0.3 s, and a fault that cannot have its server within
// 1.5 s is skipped rather than run late, so that the windows (below)
// close early in the calm: every property is judged, not excused, in
// most of the run. The report gives, per property, the share of the
// fault phase that no window covers (Result.Judged); TestNemesis fails
// a run that judged any property in less than half (MinJudged); its
// fresh seeds are drawn again while their plans judge one in less than
// 55% (planMargin), so that a storm the schedule alone planned fails no
// run. Each fault heals itself; the run then heals whatever is left
// (SIGCONT, clocks back to the real time, toxics removed, servers
// restarted, the replica in sync), stops the workers, and checks LIVE and
// MEM.
//
// # Promises, by fault (the labels)
//
// A window is [fault start, fault end + Linger], Linger = the max TTL + 1 s
// (a failover's ends when the clients moved to the promoted replica, not
// when the old master has synced again). A violation is dated by the
// grant that made it one (safety.Violation: the later of the two grants
// involved, a stale Complete of the work queue too) and is excused only
// inside a window of its own property; every other one is a promise
// broken, reported with the faults whose reach holds it.
//
//	fault                                   quorum                   single
//	kill + restart (empty, RDB, AOF)        ME ORDER FENCE           master: ME suspended; replica: all promised
//	failover (with or without WAIT)         –                        ME suspended
//	clock forward then back, back then fwd  ME suspended             ME suspended (either server)
//	SIGSTOP, latency, timeout, reset_peer   ME ORDER FENCE           ME ORDER FENCE
//	snapshot (BGSAVE)                       ME ORDER FENCE           ME ORDER FENCE
//	holder pause (GC)                       FENCE (not an overlap)   FENCE (not an overlap)
//	break (ForceRelease)              ME ORDER FENCE           ME ORDER FENCE
//	data loss near a clock fault            –                        ORDER, FENCE suspended
//
// Both clock kinds step the clock forward once (at the start, or back to
// the real time at the end), which ends leases early: Redlock cannot
// survive it, nor can a lease judged by one server's clock. Only one
// server of a strategy has its clock off at a time, so the quorum's tokens
// keep their order. The single token is floored at its server's clock: a
// kill of the master or a failover whose span, and a clock fault's span,
// come within the jump and a second of each other suspend ORDER and FENCE
// from the loss to the later of the two ends plus the jump and a second.
// Either order breaks the clock condition of docs/single-lease.md: tokens
// issued under a clock jumped ahead outrun the restarted counter, and the
// first claims on an emptied counter under a clock stepped back take that
// clock's word. A paused holder's lease ends at its
// own validity, so its late write is no overlap: the fence must refuse it.
//
// # Properties
//
//   - ME: no two holders of a key valid at once, each by its own clock
//     (safety.Report's overlaps).
//   - ORDER: an acquisition started after another one of its key was
//     granted gets a strictly larger token; no two holders share a token
//     (safety.CheckOrder).
//   - FENCE: no stale write accepted, and the register linearizable.
//   - RATE: in every 1 s window (sliding by 20 ms) the admissions on a
//     limit's key, those whose calls ended in it, are within the bound of
//     docs/ratelimit.md, ⌊Σ_j (B×(1 + R_j) + ⌊T/I⌋) / M⌋ over the N nodes,
//     I = Per/Rate rounded up to a µs (from the Limit itself), T the span
//     of those calls plus 2 ms, R_j the refills of node j overlapping it:
//     on the quorum each kill of the node and each clock fault on it, on
//     the single master each loss of its data (kill, failover) and every
//     clock fault (safety.CheckRate). No window excuses it: the bound
//     counts the faults. Judged: the share of windows in which the
//     servers answered a call (an admission or a refusal), leaving out
//     those with no answer inside the floor's disturbed stretches, where
//     the faults kept the limit out of reach.
//   - RATE floor: in every 6 s window (sliding by 100 ms) calm for 200 ms
//     or more, the admissions of its calm part are at least RateFloor
//     (40%) of the ideal, its calm time over I, less one admission (the
//     call across a calm part's edge) (safety.CheckRateFloor).
//     Calm: on the single strategy no fault on the master or the clients'
//     link (a pause, latency, a timeout or reset, a kill, a failover, a
//     clock off), on the quorum faults on fewer than N−M nodes at once
//     (with N−M out, the rest must all agree); each fault reaches 100 ms
//     past its end, a clock fault its jump further, and on the quorum a
//     calm gap under 500 ms between two such stretches is no calm (the
//     nodes restarted in a storm are still being redialed, see floorGap).
//     Latency is an outage here: the proxy delays each chunk in turn, so
//     the answers a valkey-go connection pipelines wait for each other's
//     delays, and the proxy is rebuilt to add or remove a toxic, which
//     closes every connection. Nor is it calm where the test process
//     itself was starved: a watcher asks to wake every 10 ms, and a wake
//     50 ms late or more (a machine loaded by other work) disturbs the
//     floor from when it was due to 100 ms past it (starvation; the
//     report gives the share of the run). Judged: the share of windows
//     calm enough. The calm time itself is a smaller share of the run
//     (the report's "calm N% of the run"). Under the race detector
//     TestNemesis reports the floor's findings and does not fail on them
//     (see TestNemesis).
//   - HANDLE: a resumed lease carries the token the servers granted; a
//     forged handle is never resumed (nor its lease extended); once the
//     resumed lease was released (the servers said so) or has expired,
//     its handle is never resumed again nor the first lease extended; and
//     an ME violation that names a resumed lease's owner is HANDLE's too.
//     Its windows are ME's: where two holders may be valid at once, a
//     lease the servers lost may be found held again; on the single
//     strategy a clock forward's reaches its jump further, since a lock
//     taken while the server's clock was ahead outlives its lease by the
//     jump once the clock is put back.
//   - LIVE: after healing, every key is acquired, by a fresh Locker of each
//     client library, within LiveBound: quorum max TTL + node timeout +
//     drift + 2×TTL + 3 s; single 2×TTL + 3 s.
//   - MEM: after LIVE, within 20 s, the server keys of each lock key (the
//     names internal/keyname gives it, and those names followed by ":…",
//     summed by MEMORY USAGE, found by SCAN and filtered here, since keys
//     hold glob characters) use at most MemBound (512 B) on every server:
//     the single hash is ~90-130 B, the quorum's fence counter 72 B;
//     gone-owner records and queues must have expired. The lockers'
//     warm-up locks count as keys; a name of dlock's that no lock key
//     accounts for (the quorum's node-wide keys aside) fails MEM.
//
// # Running it
//
// The short mode (20 s of faults per strategy, both in parallel, about a
// minute under -race) runs with the suite:
//
//	go test -race ./internal/testkit/nemesis
//
// A failure prints the seed and the command that replays it:
//
//	go test ./internal/testkit/nemesis -count=1 -run 'TestNemesis$/quorum$' -args -nemesis.seed=N
//
// The long mode is scripts/soak.sh (60 minutes by default, on the server
// program DLOCK_SERVER names), which adds -nemesis.duration,
// -nemesis.report DIR and -nemesis.name NAME and writes DIR/NAME.md and
// DIR/NAME.json.
//
// Config.Plant, or -nemesis.plant in TestNemesis, plants one of the bugs
// Plants lists in the default mix. rate-one-yes: each rate call goes to one Limiter of
// a single node in turn (on the single strategy, the server and a view
// of it under another key), as if one node's yes were a majority.
// trusting-resume: every Locker's nodes answer the servers' token check
// (the inspect script) with the forged handle's token while it is
// resumed, as a resume that trusted the handle would. rate-stingy: the
// workers' limits admit a quarter of the rate the checks hold them to.
// sql-unfenced: the PostgreSQL register written by a plain upsert,
// without the helper's token condition.
//
// TestNemesisCatches shows the nemesis can fail: with the lost-data guard
// off (option.DurableNodes on servers that are not durable) and a schedule
// that kills and empties 3 of 5 nodes every 2-2.5 s, it finds ME broken;
// with resources that do not check tokens and a holder pause about every
// second, it finds FENCE broken; with the single claim script changed to
// take a lease for free in its holder's last 50 ms (Config.EarlyGrant),
// on one key that every worker queues for and a holder pause every
// 0.6-1 s (ExpireHolders), it finds ME broken; with the quorum's vote
// changed to treat a lock as free in its last 100 ms on each node (the
// same Config.EarlyGrant) and every lock call an overstay
// (ExpireQueued), likewise; with rate-one-yes on the quorum it finds
// RATE broken (windows up to ~3× the bound), and with trusting-resume on
// the single strategy HANDLE broken (the forged handles resumed), and
// with rate-stingy on the quorum RATE floor broken, and with sql-unfenced
// on the single strategy and a holder pause about every second the
// PostgreSQL register's log holds a write landed below a newer token.
// -nemesis.plant=early-grant plants the early grant in TestNemesis's
// default mix, on both strategies: docs/testing.md gives how often ten
// short runs find it. TestNemesisRestoreMajority restores 3 of
// 5 quorum nodes from an RDB snapshot moments old, every 2.5-3 s, and must
// find no promise broken: the fault the lost-data guard once missed.
package nemesis
