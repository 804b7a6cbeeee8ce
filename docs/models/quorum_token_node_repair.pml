/* Derived from docs/models/quorum_token_repair.pml: the node-wide repair of quorum/repair.go.
   Two keys; each client locks one of them, chosen at will. Every commit raises its node's
   high-water mark (any key). Node 0 may lose its data (locks, counters, mark, floor) at any
   moment; it then casts no vote and takes no commit until the acquisitions in flight at the
   loss have ended (the sit-out) AND it is repaired: floor = max(floor, marks of the other nodes),
   mark = max(mark, floor). A node's counter for a key counts as max(counter, floor).
   Claims as before, for two acquisitions of the same key. -DREPAIR=0: the floor is not raised.
     spin -a -DSEQ=1 quorum_token_node_repair.pml && gcc -O2 -w -o pan pan.c && ./pan -a -N ordered */
#define N 3
#define Q 2
#ifndef SEQ
#define SEQ 0
#endif
#ifndef REPAIR
#define REPAIR 1
#endif
byte lock[2*N];        /* lock[k*N+i]: key k on node i */
byte ctr[2*N];
byte high[N];
byte floor[N];
bool guard[N];
byte key[3];
byte tok[3];
bool done[3];
bool started[3];
bool lost;
byte inflight_at_loss;

inline acquire(c) {
  byte read[N]; bool vote[N]; bool visited[N]; byte votes, commits, t, i, k, e;
  votes = 0; commits = 0; t = 0; k = 0;
  if :: key[c] = 0 :: key[c] = 1 fi;
  started[c] = 1;
  do
  :: k == N -> break
  :: else ->
     if
     :: !visited[0] -> i = 0
     :: !visited[1] -> i = 1
     :: !visited[2] -> i = 2
     fi;
     visited[i] = 1; k++;
     atomic {
       if
       :: lock[key[c]*N+i] == 0 && !guard[i] ->
          lock[key[c]*N+i] = c; vote[i] = 1; votes++;
          read[i] = (ctr[key[c]*N+i] > floor[i] -> ctr[key[c]*N+i] : floor[i])
       :: else -> skip
       fi }
  od;
  if
  :: votes >= Q ->
     i = 0;
     do :: i == N -> break :: else -> if :: vote[i] && read[i] >= t -> t = read[i] :: else -> skip fi; i++ od;
     t = t + 1;
     i = 0;
     do
     :: i == N -> break
     :: else ->
        atomic {
          e = (ctr[key[c]*N+i] > floor[i] -> ctr[key[c]*N+i] : floor[i]);
          if
          :: vote[i] && !guard[i] && lock[key[c]*N+i] == c && e < t ->
             ctr[key[c]*N+i] = t; commits++;
             if :: t > high[i] -> high[i] = t :: else -> skip fi
          :: else -> skip
          fi };
        i++
     od;
     if :: commits >= Q -> tok[c] = t :: else -> skip fi
  :: else -> skip
  fi;
  atomic { done[c] = 1; inflight_at_loss = inflight_at_loss & ~(1 << c) }
}

active proctype A() { acquire(1) }
active proctype B() { if :: SEQ -> done[1] :: else -> skip fi; acquire(2) }

active proctype Chaos() {
  byte i;
  do
  :: i = 0; do :: i < 2*N -> if :: lock[i] = 0 :: skip fi; i++ :: else -> break od
  :: !lost -> atomic {
       lost = 1; lock[0] = 0; lock[N] = 0; ctr[0] = 0; ctr[N] = 0; high[0] = 0; floor[0] = 0; guard[0] = 1;
       inflight_at_loss = (started[1] && !done[1] -> 2 : 0) | (started[2] && !done[2] -> 4 : 0) }
  :: done[1] && done[2] -> break
  od
}

/* repair of node 0, node-wide: after the sit-out, from the marks of the other nodes (a quorum of
   them: both, with N = 3) */
active proctype Repair() {
  byte m;
  (lost && guard[0] && inflight_at_loss == 0);
  atomic { m = high[1]; if :: high[2] > m -> m = high[2] :: else -> skip fi }
  atomic {
    if :: REPAIR && m > floor[0] -> floor[0] = m :: else -> skip fi;
    if :: floor[0] > high[0] -> high[0] = floor[0] :: else -> skip fi;
    guard[0] = 0 }
}

ltl unique  { [] ((done[1] && done[2] && tok[1] != 0 && tok[2] != 0 && key[1] == key[2]) -> tok[1] != tok[2]) }
ltl ordered { [] ((SEQ && done[1] && done[2] && tok[1] != 0 && tok[2] != 0 && key[1] == key[2]) -> tok[2] > tok[1]) }
