/* The quorum's handoff (docs/quorum.md, "The handoff"; quorum/lua/hand.lua and vote.lua,
   quorum/hand.go): a lease's release hands the lock, on each node it frees, to the attempt the
   queue head's ticket names, and the waiter holds the lock once a majority granted it to its
   latest attempt, counting the lease from that attempt's start.

   Time is left out, as the token models leave it out: a lock lasts a TTL from when it was set, and
   a lease counted from an attempt's start over that TTL ends before every lock set for the
   attempt after its start. So the claims are about order, with locks that never lapse:
   (own)   every lock a lease counts on was set for the lease's attempt after that attempt started;
   (kept)  while a client counts on a lease, nothing but its holder takes a lock it counts on;
   (one)   no two clients count on a lease at the same time.

   Three clients. H holds the lock on every node at first; it stops counting on its lease, then
   releases it node by node, each release handing the lock over. C takes the lock with a vote
   round of its own, in one step, when a majority is free, ignoring the queue (its head rule is
   fairness, not safety). W waits, with up to two attempts (1, 2):
   - an attempt's vote runs on each node at any time; W reads those that ran when it decides;
   - W holds the lock when a majority of the votes it read set it; else the attempt fails, and its
     release goes, at any later time, to every node whose vote W did not read or that set the
     lock (quorum/attempt.go, fail); the votes it did not read may still land late, before or
     after that release, and the release leaves a lock handed to the attempt where it is (the
     node's ticket names the attempt: its vote there was refused, quorum/lua/release.lua);
   - it hears the grants made so far at any later time, and holds the lock when grants to its
     latest attempt came from a majority of the nodes;
   - a vote takes a lock held by an earlier attempt of W's that the node's ticket names; a refused
     vote makes the ticket name its attempt, unless a later attempt's vote ran there first.
   Drop one rule and a claim fails (docs/models/run.sh). */
#define N 3
#define Q 2
#define H 7
#define C 8
#define VOTING 1
#define FAILED 2
#define AT(a, i) ((a) * N + (i))

byte lock[N];      /* 0 none; H, C, or W's attempt 1..2 */
bool fresh[N];     /* the lock was set since W's latest attempt started */
byte ticket[N];    /* W's latest attempt whose vote this node refused (0: none) */
byte grant[N];     /* the attempt the node's handoff went to (0: none) */

byte cur;          /* W's latest attempt */
byte phase;        /* of cur: VOTING, FAILED */
bool ran[9];       /* attempt a's vote ran on node i: [AT(a, i)] */
bool read[9];      /* ... and W read it */
bool set[9];       /* ... and it set the lock */
bool rel[9];       /* a release of attempt a is on its way to node i */
bool holds[3];     /* H (0), C (1), W (2) count on a lease */
bool counts[N];    /* the nodes W's lease counts on */
bool started;      /* H holds the lock: the others start */
bool own, kept, one;  /* each claim, asserted where it could break: named in a failure */

/* take(i, o): the lock on node i goes to o (kept: not from a lease that counts on it). */
inline take(i, o) {
  kept = !(holds[2] && counts[i] && lock[i] == cur && o != cur); assert(kept); kept = 0;
  lock[i] = o; fresh[i] = 1
}

/* W's vote for attempt a on node i (vote.lua). */
inline wvote(a, i) {
  ran[AT(a, i)] = 1;
  if
  :: lock[i] == a -> set[AT(a, i)] = 1
  :: lock[i] == 0 || lock[i] == ticket[i] && a > ticket[i] -> take(i, a); set[AT(a, i)] = 1
  :: else -> if :: a > ticket[i] -> ticket[i] = a :: else -> skip fi
  fi
}

/* W counts on its latest attempt's lease, on the nodes in counts (own, one). */
inline wholds() {
  for (i : 0 .. N - 1) { own = !counts[i] || lock[i] == cur && fresh[i]; assert(own); own = 0 };
  one = !holds[0] && !holds[1]; assert(one); one = 0;
  holds[2] = 1
}

active proctype Holder() {
  byte i;
  atomic { for (i : 0 .. N - 1) { lock[i] = H }; holds[0] = 1; started = 1; i = 0 }
  holds[0] = 0;
  for (i : 0 .. N - 1) {
    atomic {
      if
      :: lock[i] == H -> lock[i] = 0; if :: ticket[i] != 0 -> take(i, ticket[i]); grant[i] = ticket[i] :: else -> skip fi
      :: else -> skip
      fi
    }
  }
}

active proctype Other() {
  byte i, votes;
  started;
  atomic {
    for (i : 0 .. N - 1) { if :: lock[i] == 0 -> votes++ :: else -> skip fi };
    if
    :: votes >= Q -> for (i : 0 .. N - 1) { if :: lock[i] == 0 -> take(i, C) :: else -> skip fi }; one = !holds[0] && !holds[2]; assert(one); one = 0; holds[1] = 1
    :: else -> skip
    fi;
    i = 0; votes = 0
  }
}

active proctype Waiter() {
  byte a, i, k;
  started;
  atomic { cur = 1; phase = VOTING }
  do
  /* a vote runs: read if its attempt is still deciding, else late */
  :: atomic {
       a = 1; do :: a < cur -> a++ :: break od;
       i = 0; do :: i < N - 1 -> i++ :: break od;
       if :: !ran[AT(a, i)] -> wvote(a, i) :: else -> skip fi;
       a = 0; i = 0
     }
  /* the attempt decides on the votes read */
  :: atomic {
       phase == VOTING && !holds[2] ->
       k = 0;
       for (i : 0 .. N - 1) {
         read[AT(cur, i)] = ran[AT(cur, i)];
         if :: read[AT(cur, i)] && set[AT(cur, i)] -> k++ :: else -> skip fi
       };
       if
       :: k >= Q -> for (i : 0 .. N - 1) { counts[i] = read[AT(cur, i)] && set[AT(cur, i)] }; wholds()
       :: else ->
          phase = FAILED;
          for (i : 0 .. N - 1) { if :: !read[AT(cur, i)] || set[AT(cur, i)] -> rel[AT(cur, i)] = 1 :: else -> skip fi }
       fi;
       i = 0; k = 0
     }
  /* a failed attempt's release lands */
  :: atomic {
       a = 1; do :: a < cur -> a++ :: break od;
       i = 0; do :: i < N - 1 -> i++ :: break od;
       if :: rel[AT(a, i)] -> rel[AT(a, i)] = 0; if :: lock[i] == a && ticket[i] != a -> take(i, 0) :: else -> skip fi
       :: else -> skip
       fi;
       a = 0; i = 0
     }
  /* the grants made so far are heard: a majority for the latest attempt */
  :: atomic {
       phase == FAILED && !holds[2] ->
       k = 0;
       for (i : 0 .. N - 1) {
         counts[i] = grant[i] == cur;
         if :: counts[i] -> k++ :: else -> skip fi
       };
       if :: k >= Q -> wholds() :: else -> for (i : 0 .. N - 1) { counts[i] = 0 } fi;
       i = 0; k = 0
     }
  /* a new attempt */
  :: atomic { phase == FAILED && !holds[2] && cur < 2 -> cur++; phase = VOTING; for (i : 0 .. N - 1) { fresh[i] = 0 }; i = 0 }
  :: break
  od
}
