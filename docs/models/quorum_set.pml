/* The quorum's set acquisition (quorum/multi.go and attempt.go; lua/vote_set.lua,
   commit_set.lua, release_set.lua), with the lost-data guard and the node-wide repair
   (quorum/repair.go). Three nodes, quorum 2, two keys, two clients, each acquiring one set
   once: client 1 {0,1}, client 2 {0,1} (SET1, SET2: bit k for key k; -DSET2=2 gives client 2
   the set {1}; SET3, a third client, is 0: none).
   - Phase 1: every node runs the vote of the whole set in one script: every key set for the
     client, or none when any key is held there by another; a vote run again by its owner
     finds the keys its own. Nodes answer in any order; once Q votes count, later answers are
     not read. A node that lost its data and is not repaired yet still sets the locks, but its
     vote does not count (the client reads its epoch: it sits out).
   - The token of each key: the highest effective counter max(counter, floor) read for that
     key, + 1 (the code's clock floor is left out, as in the other models).
   - Phase 2, on the counted voters: one commit of the whole set per node, which commits only
     when the client holds every lock of the set there and, key by key, the counter is below
     the token and so is the node's floor, or the counter is already at the token (this commit
     run again); then each key below its token takes it and raises the node's high-water mark;
     otherwise no key is committed. Granted with Q commits while the TTL has not run out.
   - Release: a granted lease's on every node when it ends; a failed attempt's where its vote
     set the locks (awaited, before it returns), then where its answer was not read (in the
     background). A release deletes only the owner's locks.
   - Re-sent calls: client 1 may run one vote or one commit twice (go-redis re-sends a command
     after a lost reply): the first run's reply is lost, anything may happen before the second
     run, whose reply the client reads (RERUNS: how many such calls, 1).
   - Time: each attempt's TTL runs out at some moment (exp). Until then none of its locks
     vanishes but by a release or a data loss (the validity, TTL - elapsed - drift, ends
     before any lock its votes set expires); after it, the locks vanish (all at once: see
     docs/models.md), and a vote that has not landed yet never does (a node timeout is far
     below the TTL: its call failed). A lease is valid from its grant to its release or exp.
     -DCLOCKS=0 drops that timing assumption: any lock vanishes on any node at any moment (a
     clock jump, a paused holder), as in the token models; EXCL and HELDS are then not claimed.
   - Node 0 may lose its data (locks, counters, mark, floor) once, at any moment. It then sits
     out until every attempt started before the loss is over (TTL run out or released, and no
     lock of it left: one maximum TTL after the loss, in time), and is repaired at that
     moment: floor = max(floor, the marks of nodes 1 and 2), mark = max(mark, floor).
     -DREPAIR=0 leaves the floor alone (the sit-out stays); -DLOSS=0: no node loses data.
   Claims, asserted in every state by Monitor:
   EXCL     two valid leases never share a key;
   UNIQUE   two granted sets that share a key carry different tokens for it;
   ORDERED  a set whose acquisition started after another's was granted carries a larger
            token for every key they share;
   WHOLES   on every node, a client holds every key of its set or none; an attempt that
            failed holds no key on a quorum once it returned, and none at all once its
            background releases ran;
   HELDS    a valid lease holds each key of its set on a quorum (a node sitting out counted).
     spin -a quorum_set.pml && gcc -O2 -w -DSAFETY -DCOLLAPSE -o pan pan.c && ./pan */
#define N 3
#define Q 2
#ifndef SET1
#define SET1 3
#endif
#ifndef SET2
#define SET2 3
#endif
#ifndef SET3
#define SET3 0
#endif
#ifndef RERUNS
#define RERUNS 1
#endif
#ifndef REPAIR
#define REPAIR 1
#endif
#ifndef CLOCKS
#define CLOCKS 1
#endif
#ifndef LOSS
#define LOSS 1
#endif

#define L(k, i)   lock##k[i]
#define CT(k, i)  ctr##k[i]
#define IN(c, k)  in##k[c]
#define TOK(c, k) tok##k[c]
#define BIT(i)    (1 << (i))
#define HAS(m, i) (((m) >> (i)) & 1)
#define EFF(k, i) (CT(k, i) > floor[i] -> CT(k, i) : floor[i])
#define ON(c, i)  (L(0, i) == c || L(1, i) == c)
/* an attempt is over once its TTL has run out or it was released, and none of its locks is
   left: it can no longer set a lock nor commit */
#define OVER(c)   ((exp[c] || done[c]) && !ON(c, 0) && !ON(c, 1) && !ON(c, 2))

byte lock0[N];      /* lockK[i]: the owner of key K's lock on node i (a client 1..3), 0 for none */
byte lock1[N];
byte ctr0[N];       /* ctrK[i]: key K's fence counter on node i */
byte ctr1[N];
byte high[N];       /* the node's high-water mark: the highest token it committed, any key */
byte floor[N];      /* raised by the repair; a counter counts as max(counter, floor) */
bool guard[N];      /* lost its data and not repaired yet: its votes do not count */
bool in0[4];        /* inK[c]: client c's set holds key K */
bool in1[4];
byte tok0[4];       /* tokK[c]: client c's token for key K, once granted */
byte tok1[4];
bool granted[4];    /* c's acquisition returned with a lease */
bool returned[4];   /* c's acquisition returned, granted or not */
bool valid[4];      /* c's lease is valid: granted, not released, TTL not run out */
bool exp[4];        /* c's TTL has run out */
bool started[4];
bool done[4];       /* c's acquisition, lease and releases are over */
bool after[16];     /* after[d * 4 + c]: c's acquisition was granted when d's started */
byte reruns;
bool lost;
byte inflight_at_loss;   /* the clients whose attempt was not over at the loss */
byte rm;

/* node 0 has sat out: every attempt in flight at its loss is over */
#define SATOUT ((!HAS(inflight_at_loss, 1) || OVER(1)) && (!HAS(inflight_at_loss, 2) || OVER(2)) && (!HAS(inflight_at_loss, 3) || OVER(3)))

/* the node-wide repair of node 0, as soon as its sit-out allows (see docs/models.md): from the
   marks of the other nodes (a quorum of them: both, with N = 3) */
inline repair() {
  if
  :: lost && guard[0] && SATOUT ->
     rm = high[1];
     if :: high[2] > rm -> rm = high[2] :: else -> skip fi;
     if :: REPAIR && rm > floor[0] -> floor[0] = rm :: else -> skip fi;
     if :: floor[0] > high[0] -> high[0] = floor[0] :: else -> skip fi;
     guard[0] = 0; rm = 0
  :: else -> skip
  fi
}

/* lua/vote_set.lua on node i for client c; its reply: st (1: every key of the set is c's
   there), g (the node sits out), r0, r1 (the effective counters of the set's keys) */
inline vote(c, i) {
  if
  :: !exp[c] ->   /* see readvote */
     st = 1;
     if
     :: IN(c, 0) -> if :: L(0, i) == 0 -> skip :: L(0, i) == c -> mine++ :: else -> st = 0 fi
     :: else -> skip
     fi;
     if
     :: IN(c, 1) -> if :: L(1, i) == 0 -> skip :: L(1, i) == c -> mine++ :: else -> st = 0 fi
     :: else -> skip
     fi;
     if
     :: st && mine < IN(c, 0) + IN(c, 1) ->
        if :: IN(c, 0) && L(0, i) == 0 -> L(0, i) = c :: else -> skip fi;
        if :: IN(c, 1) && L(1, i) == 0 -> L(1, i) = c :: else -> skip fi
     :: else -> skip
     fi;
     mine = 0;
     g = guard[i];
     if :: IN(c, 0) -> r0 = EFF(0, i) :: else -> skip fi;
     if :: IN(c, 1) -> r1 = EFF(1, i) :: else -> skip fi
  :: else -> skip
  fi
}

/* the client reads node i's vote, unless Q votes already count (it has stopped reading) or the
   TTL has run out: the vote did not land in time (a node timeout is far below the TTL), its
   call failed, and it never lands */
inline readvote(c, i) {
  if
  :: votes >= Q || exp[c] -> unread = unread | BIT(i)
  :: else ->
     if :: st -> lockset = lockset | BIT(i) :: else -> skip fi;
     if :: st && !g -> counted = counted | BIT(i); votes++ :: else -> skip fi;
     if :: r0 > m0 -> m0 = r0 :: else -> skip fi;
     if :: r1 > m1 -> m1 = r1 :: else -> skip fi
  fi;
  st = 0; g = 0; r0 = 0; r1 = 0
}

/* lua/commit_set.lua on node i for client c with tokens t0, t1; its reply r: 1 committed, 0 c
   does not hold every lock of the set, 2 a counter or the floor is not below a token */
inline commit(c, i) {
  r = 1;
  if :: IN(c, 0) && L(0, i) != c -> r = 0 :: else -> skip fi;
  if :: IN(c, 1) && L(1, i) != c -> r = 0 :: else -> skip fi;
  if
  :: r == 1 ->
     if :: IN(c, 0) && (CT(0, i) > t0 || CT(0, i) < t0 && floor[i] >= t0) -> r = 2 :: else -> skip fi;
     if :: IN(c, 1) && (CT(1, i) > t1 || CT(1, i) < t1 && floor[i] >= t1) -> r = 2 :: else -> skip fi
  :: else -> skip
  fi;
  if
  :: r == 1 ->
     if
     :: IN(c, 0) && CT(0, i) < t0 -> CT(0, i) = t0; if :: t0 > high[i] -> high[i] = t0 :: else -> skip fi
     :: else -> skip
     fi;
     if
     :: IN(c, 1) && CT(1, i) < t1 -> CT(1, i) = t1; if :: t1 > high[i] -> high[i] = t1 :: else -> skip fi
     :: else -> skip
     fi
  :: else -> skip
  fi
}

inline readcommit() {
  if :: r == 1 -> commits++ :: else -> skip fi;
  r = 0
}

/* lua/release_set.lua on node i: every lock of c's set that c holds there */
inline release(c, i) {
  if :: IN(c, 0) && L(0, i) == c -> L(0, i) = 0 :: else -> skip fi;
  if :: IN(c, 1) && L(1, i) == c -> L(1, i) = 0 :: else -> skip fi
}

/* phase 1 ends once every node has voted: the tokens, if Q votes count */
inline endvote(c) {
  if
  :: vis == BIT(N) - 1 ->
     if
     :: votes >= Q ->
        if :: IN(c, 0) -> t0 = m0 + 1 :: else -> skip fi;
        if :: IN(c, 1) -> t1 = m1 + 1 :: else -> skip fi
     :: else -> counted = 0   /* no phase 2 */
     fi;
     m0 = 0; m1 = 0; votes = 0; vis = 0; phase = 2
  :: else -> skip
  fi
}

/* phase 2 ends once every counted voter has answered: granted with Q commits while the TTL has
   not run out */
inline endcommit(c) {
  if
  :: vis == counted ->
     if
     :: commits >= Q && !exp[c] ->
        granted[c] = 1; valid[c] = 1; returned[c] = 1; TOK(c, 0) = t0; TOK(c, 1) = t1
     :: else -> skip
     fi;
     vis = 0; counted = 0; commits = 0; t0 = 0; t1 = 0; phase = 3
  :: else -> skip
  fi
}

/* Node i's vote, in one step with the client reading it (the first also starts the
   acquisition); or a first run whose reply is lost: the client sends it again (rr), and
   reads the second run's reply. */
#define VOTE(i) \
  :: d_step { phase == 1 && !rr && !HAS(vis, i); start(c, S); vis = vis | BIT(i); vote(c, i); readvote(c, i); endvote(c) } \
  :: d_step { phase == 1 && !rr && !HAS(vis, i) && c == 1 && reruns < RERUNS && !exp[c]; start(c, S); \
              vis = vis | BIT(i); reruns++; rr = i + 1; vote(c, i); st = 0; g = 0; r0 = 0; r1 = 0 }
/* Node i's commit, likewise */
#define COMMIT(i) \
  :: d_step { phase == 2 && !rr && HAS(counted, i) && !HAS(vis, i); vis = vis | BIT(i); commit(c, i); readcommit(); \
              endcommit(c) } \
  :: d_step { phase == 2 && !rr && HAS(counted, i) && !HAS(vis, i) && c == 1 && reruns < RERUNS; \
              vis = vis | BIT(i); reruns++; rr = i + 1; commit(c, i); r = 0 }

inline start(c, S) {
  if
  :: !started[c] ->
     started[c] = 1; IN(c, 0) = S & 1; IN(c, 1) = S >> 1;
     after[c * 4 + 1] = granted[1]; after[c * 4 + 2] = granted[2]; after[c * 4 + 3] = granted[3]
  :: else -> skip
  fi
}

inline acquire(c, S) {
  byte phase = 1, vis, counted, lockset, unread, votes, commits, rr, st, g, mine, r, r0, r1, m0, m1, t0, t1;
  /* phase 1: every node runs the vote; the answers come in any order. Phase 2: the commit on
     every counted voter, in any order. */
  do
  VOTE(0)
  VOTE(1)
  VOTE(2)
  :: d_step { phase == 1 && rr; vote(c, rr - 1); readvote(c, rr - 1); rr = 0; endvote(c) }
  COMMIT(0)
  COMMIT(1)
  COMMIT(2)
  :: d_step { phase == 2 && rr; commit(c, rr - 1); readcommit(); rr = 0; endcommit(c) }
  :: phase == 2 && counted == 0 -> d_step { endcommit(c) }
  :: phase == 3 -> break
  od;
  if
  :: granted[c] ->
     /* the lease ends, and is released on every node */
     d_step { valid[c] = 0; release(c, 0); release(c, 1); release(c, 2); lockset = 0; unread = 0; done[c] = 1; repair() }
  :: else ->
     /* the failure's release where the vote set the locks, awaited: the acquisition returns
        after it; then where its answer was not read, in the background */
     d_step {
       if :: HAS(lockset, 0) -> release(c, 0) :: else -> skip fi;
       if :: HAS(lockset, 1) -> release(c, 1) :: else -> skip fi;
       if :: HAS(lockset, 2) -> release(c, 2) :: else -> skip fi;
       returned[c] = 1; lockset = 0;
       if :: unread == 0 -> done[c] = 1; repair() :: else -> skip fi
     }
     if
     :: unread ->
        d_step {
          if :: HAS(unread, 0) -> release(c, 0) :: else -> skip fi;
          if :: HAS(unread, 1) -> release(c, 1) :: else -> skip fi;
          if :: HAS(unread, 2) -> release(c, 2) :: else -> skip fi;
          unread = 0; done[c] = 1; repair()
        }
     :: else -> skip
     fi
  fi
}

active proctype A() { acquire(1, SET1) }
active proctype B() { acquire(2, SET2) }
active proctype C() { if :: SET3 -> acquire(3, SET3) :: else -> done[3] = 1 fi }

/* time: a TTL runs out, then the attempt's locks vanish; node 0 may lose its data */
#define ALLDONE (done[1] && done[2] && done[3])
#define EXPIRE(c) \
  :: d_step { !ALLDONE && started[c] && !done[c] && !exp[c]; exp[c] = 1; valid[c] = 0; repair() }
#if CLOCKS
#define VANISH(c) \
  :: d_step { !ALLDONE && exp[c] && (ON(c, 0) || ON(c, 1) || ON(c, 2)); \
              release(c, 0); release(c, 1); release(c, 2); repair() }
#else
/* a lock vanishes on one node at any moment */
#define GONE(c, i) :: d_step { !ALLDONE && ON(c, i); release(c, i); repair() }
#define VANISH(c) GONE(c, 0) GONE(c, 1) GONE(c, 2)
#endif
active proctype Chaos() {
  do
  EXPIRE(1)
  EXPIRE(2)
  EXPIRE(3)
  VANISH(1)
  VANISH(2)
  VANISH(3)
  :: d_step {
       LOSS && !ALLDONE && !lost;
       lost = 1; guard[0] = 1;
       L(0, 0) = 0; L(1, 0) = 0; CT(0, 0) = 0; CT(1, 0) = 0; high[0] = 0; floor[0] = 0;
       inflight_at_loss = (started[1] && !OVER(1) -> BIT(1) : 0) | (started[2] && !OVER(2) -> BIT(2) : 0) |
                          (started[3] && !OVER(3) -> BIT(3) : 0);
       repair()
     }
  :: ALLDONE -> break
  od
}

#define SHARE(c, d, k) (IN(c, k) && IN(d, k))
#define EX(c, d) (!(valid[c] && valid[d] && (SHARE(c, d, 0) || SHARE(c, d, 1))))
#define UNQ(c, d, k) (!(granted[c] && granted[d] && SHARE(c, d, k)) || TOK(c, k) != TOK(d, k))
#define UQ(c, d) (UNQ(c, d, 0) && UNQ(c, d, 1))
#define ORDK(c, d, k) (!(granted[c] && granted[d] && after[d * 4 + c] && SHARE(c, d, k)) || TOK(d, k) > TOK(c, k))
#define ORD(c, d) (ORDK(c, d, 0) && ORDK(c, d, 1) && ORDK(d, c, 0) && ORDK(d, c, 1))
/* on node i, c holds every key of its set or none */
#define NODEWHOLE(c, i) (!(IN(c, 0) && IN(c, 1)) || L(0, i) == c && L(1, i) == c || L(0, i) != c && L(1, i) != c)
/* key k of a valid lease: held on two nodes of three, a node sitting out counted as holding it */
#define H(c, k, i) (L(k, i) == c || guard[i])
#define HOLDS(c, k) (!IN(c, k) || H(c, k, 0) && H(c, k, 1) || H(c, k, 0) && H(c, k, 2) || H(c, k, 1) && H(c, k, 2))
/* no key of c's on two nodes of three; none on any */
#define FEW(c) (!(ON(c, 0) && ON(c, 1) || ON(c, 0) && ON(c, 2) || ON(c, 1) && ON(c, 2)))
#define NONE(c) (!ON(c, 0) && !ON(c, 1) && !ON(c, 2))
#define WHOLE(c) (NODEWHOLE(c, 0) && NODEWHOLE(c, 1) && NODEWHOLE(c, 2) && \
  (!(returned[c] && !granted[c]) || FEW(c)) && (!(done[c] && !granted[c]) || NONE(c)))
#define HELD(c) (!valid[c] || HOLDS(c, 0) && HOLDS(c, 1))

#define EXCL    (EX(1, 2) && EX(1, 3) && EX(2, 3))
#define UNIQUE  (UQ(1, 2) && UQ(1, 3) && UQ(2, 3))
#define ORDERED (ORD(1, 2) && ORD(1, 3) && ORD(2, 3))
#define WHOLES  (WHOLE(1) && WHOLE(2) && WHOLE(3))
#define HELDS   (HELD(1) && HELD(2) && HELD(3))

bool excl, unique, ordered, whole, held;   /* set only in a state that breaks a claim: name it */

/* checks every claim in every state between two steps (each step is one d_step) */
active proctype Monitor() {
end:
  atomic {
    !((EXCL || !CLOCKS) && UNIQUE && ORDERED && WHOLES && (HELDS || !CLOCKS)) ->
    excl = EXCL || !CLOCKS; unique = UNIQUE; ordered = ORDERED; whole = WHOLES; held = HELDS || !CLOCKS;
    assert(excl); assert(unique); assert(ordered); assert(whole); assert(held)
  }
}
