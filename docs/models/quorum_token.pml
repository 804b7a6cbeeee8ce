/* Quorum fencing token (docs/quorum.md): two clients, N nodes, locks that may vanish at any moment
   (expiry, clock jump, a paused holder): mutual exclusion is NOT assumed. Checked claims:
   (1) two successful acquisitions never carry the same token;
   (2) an acquisition that starts after another one finished gets a larger token (SEQ=1).
   Counters are durable (no node loses data) in this model. */
#define N 3
#define Q 2
#ifndef SEQ
#define SEQ 0
#endif
byte lock[N];          /* 0 free, 1 client A, 2 client B */
byte ctr[N];           /* fence counter per node */
byte tok[3];           /* token of a successful acquisition, 0 = failed */
bool done[3];

inline acquire(c) {
  byte read[N]; bool vote[N]; bool visited[N]; byte votes, commits, t, i, k;
  votes = 0; commits = 0; t = 0; k = 0;
  /* phase 1: lock + read counter, nodes in any order */
  do
  :: k == N -> break
  :: else ->
     if
     :: !visited[0] -> i = 0
     :: !visited[1] -> i = 1
     :: !visited[2] -> i = 2
     fi;
     visited[i] = 1; k++;
     atomic { if :: lock[i] == 0 -> lock[i] = c; read[i] = ctr[i]; vote[i] = 1; votes++ :: else -> skip fi }
  od;
  if
  :: votes >= Q ->
     i = 0;
     do :: i == N -> break :: else -> if :: vote[i] && read[i] >= t -> t = read[i] :: else -> skip fi; i++ od;
     t = t + 1;
     /* phase 2: commit t where still owner and counter lower */
     i = 0;
     do
     :: i == N -> break
     :: else ->
        atomic { if :: vote[i] && lock[i] == c && ctr[i] < t -> ctr[i] = t; commits++ :: else -> skip fi };
        i++
     od;
     if :: commits >= Q -> tok[c] = t :: else -> skip fi
  :: else -> skip
  fi;
  done[c] = 1
}

active proctype A() { acquire(1) }
active proctype B() { if :: SEQ -> done[1] :: else -> skip fi; acquire(2) }

/* locks vanish at any moment */
active proctype Chaos() {
  byte i;
  do
  :: i = 0; do :: i < N -> if :: lock[i] = 0 :: skip fi; i++ :: else -> break od
  :: done[1] && done[2] -> break
  od
}

ltl unique  { [] ((done[1] && done[2] && tok[1] != 0 && tok[2] != 0) -> tok[1] != tok[2]) }
ltl ordered { [] ((SEQ && done[1] && done[2] && tok[1] != 0 && tok[2] != 0) -> tok[2] > tok[1]) }
