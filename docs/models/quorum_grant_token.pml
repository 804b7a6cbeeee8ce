/* Quorum token in the grant (docs/quorum.md, "The handoff"): a release
   hands the lock to the queue's head and, on the same node and in the same
   script, commits the head's token: the released lease's token + 1, where
   the node's counter is lower. The head holds the lock with that token,
   without a commit round of its own, once a majority of the grants it
   counts committed it; else it commits a token drawn from the grants'
   counters, as after a vote.

   Three clients, three nodes, quorum 2, counters that are kept; locks
   vanish at any moment (expiry, a clock step, a paused holder), so mutual
   exclusion is not assumed. A acquires (votes, then commits max(read) + 1)
   and releases, handing the lock to B where B's vote was refused (its
   ticket names it there); B votes, and when its votes fall short counts
   the grants it heard; when they fall short too, B tries again: its next
   attempt's vote takes over a lock handed to the first (the ticket names
   that attempt), and carries the grant's token where the node's counter
   is still it. That attempt holds with the token in the grant when its
   counted votes carry it and read no counter above it, nor equal to it
   but where a grant of B's set it: it commits the token where the vote
   did not carry it, as commit.lua does (a counter equal to the token
   counts as committed), and holds with a majority of the two together.
   C acquires as A does, at any time. Claims, asserted
   in every state:
   unique:  two successful acquisitions never carry the same token;
   ordered: an acquisition that started after another one finished
            carries a larger token. */
#define N 3
#define Q 2
byte lock[N];     /* 0 free, else the client 1..3 */
byte ctr[N];      /* fence counter */
byte tok[4];      /* token of a successful acquisition, 0: failed or not yet */
bool done[4];
bool before[16];  /* before[y*4+x]: x had finished when y started */
bool tick[N];     /* B's vote was refused at node i: its ticket is there */
bool tick2[N];    /* so was its second attempt's: the ticket names that one */
bool granted[N];  /* A's release handed B's first attempt the lock at node i */
byte gctr[N];     /* the counter the grant's message carried */
byte gtok[N];     /* the token the grant committed there, 0 for none */

inline start(c) {
  atomic { before[c*4+1] = done[1]; before[c*4+2] = done[2]; before[c*4+3] = done[3] }
}

/* phase 1: lock + read the counter, nodes in any order; B's refused vote
   leaves its ticket */
inline phase1(c) {
  k = 0;
  do
  :: k == N -> break
  :: else ->
     atomic {
       if
       :: !visited[0] -> i = 0
       :: !visited[1] -> i = 1
       :: !visited[2] -> i = 2
       fi;
       visited[i] = 1; k++;
       if
       :: lock[i] == 0 -> lock[i] = c; read[i] = ctr[i]; vote[i] = 1; votes++
       :: lock[i] != 0 && c == 2 -> tick[i] = 1
       :: else -> skip
       fi;
       i = 0
     }
  od;
  atomic { visited[0] = 0; visited[1] = 0; visited[2] = 0; k = 0 }
}

/* phase 2: commit t on the nodes of on[] where still owner and the
   counter lower; tok[c] = t with a majority */
inline phase2(c) {
  i = 0; commits = 0;
  do
  :: i == N -> break
  :: else ->
     atomic { if :: on[i] && lock[i] == c && ctr[i] < t -> ctr[i] = t; commits++ :: else -> skip fi; i++ }
  od;
  atomic {
    if :: commits >= Q -> tok[c] = t :: else -> skip fi;
    i = 0; commits = 0; t = 0; on[0] = 0; on[1] = 0; on[2] = 0
  }
}

/* the token a vote round allows: max(read) + 1 over the votes */
inline draw() {
  atomic {
    i = 0; t = 0;
    do :: i == N -> break :: else -> if :: vote[i] && read[i] >= t -> t = read[i] :: else -> skip fi; on[i] = vote[i]; i++ od;
    t = t + 1; i = 0;
    read[0] = 0; read[1] = 0; read[2] = 0; vote[0] = 0; vote[1] = 0; vote[2] = 0; votes = 0
  }
}

inline plain(c) {
  phase1(c);
  if
  :: votes >= Q -> draw(); phase2(c)
  :: else -> atomic { read[0] = 0; read[1] = 0; read[2] = 0; vote[0] = 0; vote[1] = 0; vote[2] = 0; votes = 0 }
  fi
}

active proctype A() {
  bool rel[N];
  byte i, k;
  /* A holds the lock on every node with token 1, committed on nodes 0
     and 1 and perhaps 2. Or node 2's counter is above it: a commit of an
     acquisition that failed (one node of three) left it there, and A's
     vote, read after A's round was decided, took the lock over it. */
  atomic {
    lock[0] = 1; lock[1] = 1; lock[2] = 1; ctr[0] = 1; ctr[1] = 1;
    if :: ctr[2] = 1 :: skip :: ctr[2] = 3 fi;
    tok[1] = 1; done[1] = 1
  };
  /* the release, on each node in any order, lost on any of them */
  if
  :: tok[1] != 0 ->
     k = 0;
     do
     :: k == N -> break
     :: else ->
        atomic {
          if
          :: !rel[0] -> i = 0
          :: !rel[1] -> i = 1
          :: !rel[2] -> i = 2
          fi;
          rel[i] = 1; k++;
          if
          :: lock[i] == 1 && tick[i] ->
             lock[i] = 2;
             if :: ctr[i] < tok[1] + 1 -> ctr[i] = tok[1] + 1; gtok[i] = ctr[i] :: else -> skip fi;
             gctr[i] = ctr[i];
             granted[i] = 1
          :: lock[i] == 1 && tick2[i] ->
             /* to B's second attempt, which does not count it */
             lock[i] = 2;
             if :: ctr[i] < tok[1] + 1 -> ctr[i] = tok[1] + 1 :: else -> skip fi
          :: lock[i] == 1 && !tick[i] && !tick2[i] -> lock[i] = 0
          :: skip /* lost */
          fi;
          i = 0
        }
     od
  :: else -> skip
  fi
}

/* B's second attempt, after its first failed: the first's release frees
   the locks its votes set (not those handed to it); the vote takes over
   a lock handed to the first attempt (gv: carrying the grant's token,
   where the counter is still it), or sets a free one, or is refused and
   moves the ticket to this attempt. */
inline retry() {
  atomic {
    i = 0;
    do
    :: i == N -> break
    :: else -> if :: vote[i] && lock[i] == 2 -> lock[i] = 0 :: else -> skip fi;
       vote[i] = 0; read[i] = 0; on[i] = 0; i++
    od;
    votes = 0; i = 0; t = 0
  };
  k = 0;
  do
  :: k == N -> break
  :: else ->
     atomic {
       if
       :: !visited[0] -> i = 0
       :: !visited[1] -> i = 1
       :: !visited[2] -> i = 2
       fi;
       visited[i] = 1; k++;
       if
       :: lock[i] == 2 && granted[i] ->
          read[i] = ctr[i]; vote[i] = 1; votes++;
          if :: gtok[i] != 0 && ctr[i] == gtok[i] -> gv[i] = 1 :: else -> skip fi
       :: lock[i] == 0 -> lock[i] = 2; read[i] = ctr[i]; vote[i] = 1; votes++
       :: lock[i] == 1 && tick[i] -> tick[i] = 0; tick2[i] = 1
       :: else -> skip
       fi;
       i = 0
     }
  od;
  atomic { visited[0] = 0; visited[1] = 0; visited[2] = 0; k = 0 };
  if
  :: votes >= Q ->
     atomic {
       p = tok[1] + 1; cm = 0; ok = 1; i = 0;
       do
       :: i == N -> break
       :: else ->
          if :: vote[i] && gv[i] -> cm++ :: else -> skip fi;
          if :: vote[i] && (read[i] > p || read[i] == p && !gv[i]) -> ok = 0 :: else -> skip fi;
          on[i] = vote[i] && !gv[i];
          i++
       od;
       i = 0
     };
     if
     :: ok && cm >= Q -> tok[2] = p
     :: ok && cm >= 1 && cm < Q ->
        /* commit p where the vote did not carry it, as commit.lua does */
        i = 0; commits = cm;
        do
        :: i == N -> break
        :: else ->
           atomic { if :: on[i] && lock[i] == 2 && ctr[i] <= p -> ctr[i] = p; commits++ :: else -> skip fi; i++ }
        od;
        atomic { if :: commits >= Q -> tok[2] = p :: else -> skip fi; i = 0 }
     :: else -> draw(); phase2(2)
     fi
  :: else -> skip
  fi
}

active proctype B() {
  byte read[N]; bool vote[N]; bool visited[N]; bool on[N]; bool gv[N];
  byte votes, commits, t, i, k, cm, g, p; bool ok;
  done[1];
  start(2);
  phase1(2);
  if
  :: votes >= Q -> draw(); phase2(2)
  :: else ->
     /* the grants heard so far, node by node, at any moment */
     i = 0; cm = 0; g = 0; t = 0;
     do
     :: i == N -> break
     :: else ->
        atomic {
          if
          :: granted[i] ->
             on[i] = 1; g++;
             if :: gctr[i] >= t -> t = gctr[i] :: else -> skip fi;
             if :: gtok[i] != 0 && gtok[i] == tok[1] + 1 -> cm++ :: else -> skip fi
          :: else -> skip
          fi;
          i++
        }
     od;
     if
     :: cm >= Q -> tok[2] = tok[1] + 1 /* the token in the grant */
     :: else ->
        if
        :: g >= Q -> t = t + 1; phase2(2)
        :: else -> retry()
        fi
     fi
  fi;
  done[2] = 1
}

active proctype C() {
  byte read[N]; bool vote[N]; bool visited[N]; bool on[N];
  byte votes, commits, t, i, k;
  done[1];
  start(3);
  plain(3);
  done[3] = 1
}

/* locks vanish at any moment, one at a time, CHAOS of them in a run (the
   second attempt multiplies the states: 3 keeps the check to minutes) */
#ifndef CHAOS
#define CHAOS 3
#endif
byte lost;
active proctype Chaos() {
  done[1];
end:
  do
  :: atomic { lost < CHAOS && lock[0] != 0 -> lock[0] = 0; lost++ }
  :: atomic { lost < CHAOS && lock[1] != 0 -> lock[1] = 0; lost++ }
  :: atomic { lost < CHAOS && lock[2] != 0 -> lock[2] = 0; lost++ }
  od
}

#define UNIQ(x, y) (tok[x] == 0 || tok[y] == 0 || tok[x] != tok[y])
#define ORD(y, x) (!before[y*4+x] || tok[x] == 0 || tok[y] == 0 || tok[y] > tok[x])

bool unique = 1, ordered = 1; /* each claim, named in a failure */

active proctype Claims() {
end:
  do
  :: atomic { !(UNIQ(1, 2) && UNIQ(1, 3) && UNIQ(2, 3)) -> unique = 0; assert(unique) }
  :: atomic { !(ORD(2, 1) && ORD(3, 1) && ORD(1, 2) && ORD(3, 2) && ORD(1, 3) && ORD(2, 3)) -> ordered = 0; assert(ordered) }
  od
}
