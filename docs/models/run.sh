#!/bin/sh
# Checks the quorum token models with spin (Debian package "spin") and gcc,
# and prints one line per model variant and claim: errors found, states.
# The variants are derived from the first two .pml files by the edits below;
# quorum_token_node_repair.pml runs as it is, and with -DREPAIR=0.
# The node-wide model's SEQ=0 check needs about 3.5 GB of memory.
# quorum_set.pml (sets of keys) asserts its own claims in every state, and is
# checked as it is, with -DCLOCKS=0 -DLOSS=0, and in the variants derived
# from it below; its lines name the claim that failed.
# quorum_handoff.pml (a release handing the lock to the queue's head) asserts
# its claims as well, and is checked as it is (about 2 minutes and 2.5 GB)
# and in three variants, each of which must fail.
# quorum_grant_token.pml (a release that commits the head's token in the
# grant, and the waiter's next attempt that holds with it) asserts its
# claims too, and is checked as it is (about 2 minutes and 2.5 GB), in
# three variants that must fail, and in one that passes (the grant's
# counter check, which ownership already implies there).
# Usage: docs/models/run.sh [token|set|handoff|grant]   (from anywhere; works
# in a temporary directory; "token" checks only the token models, "set" only
# the set model, "handoff" only the handoff model, "grant" only the grant's
# token)
set -eu
only=${1:-}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cp "$here"/quorum_token.pml "$here"/quorum_token_repair.pml "$here"/quorum_token_node_repair.pml \
	"$here"/quorum_set.pml "$here"/quorum_handoff.pml "$here"/quorum_grant_token.pml .

# Phase 2 needs only one commit instead of a majority.
sed 's/commits >= Q -> tok/commits >= 1 -> tok/' quorum_token.pml > commit_one.pml
# Phase 2 checks neither ownership nor counter < t (only counter <= t).
sed 's/vote\[i\] \&\& lock\[i\] == c \&\& ctr\[i\] < t/vote[i] \&\& ctr[i] <= t/' quorum_token.pml > commit_unchecked.pml
# The lost node sits out, then votes again with its counter not repaired.
sed 's/atomic { if :: m > ctr\[0\] -> ctr\[0\] = m :: else -> skip fi; guard\[0\] = 0 }/atomic { guard[0] = 0 }/' \
	quorum_token_repair.pml > guard_no_repair.pml
# The lost node is repaired at once, without waiting out the acquisitions in flight.
sed 's/(lost \&\& guard\[0\] \&\& inflight_at_loss == 0);/(lost \&\& guard[0]);/' \
	quorum_token_repair.pml > repair_no_wait.pml
# A commit run again (a client that re-sent it after a lost reply) finds
# the counter already at t while it owns the lock, and counts as a commit:
# phase 2 accepts counter <= t, or (node-wide) a counter equal to t.
sed 's/vote\[i\] \&\& lock\[i\] == c \&\& ctr\[i\] < t/vote[i] \&\& lock[i] == c \&\& ctr[i] <= t/' quorum_token.pml > commit_rerun.pml
sed 's/vote\[i\] \&\& !guard\[i\] \&\& lock\[i\] == c \&\& ctr\[i\] < t/vote[i] \&\& !guard[i] \&\& lock[i] == c \&\& ctr[i] <= t/' \
	quorum_token_repair.pml > repair_rerun.pml
sed '/if :: t > high\[i\] -> high\[i\] = t :: else -> skip fi/a\
          :: vote[i] \&\& !guard[i] \&\& lock[key[c]*N+i] == c \&\& ctr[key[c]*N+i] == t -> commits++' \
	quorum_token_node_repair.pml > node_repair_rerun.pml
# Sets: a node's vote sets the free keys of the set even when another key of
# it is held there (check and set in one pass, not all or none).
sed 's/:: st \&\& mine < IN(c, 0) + IN(c, 1) ->/:: mine < IN(c, 0) + IN(c, 1) ->/' quorum_set.pml > set_vote_partial.pml
# Sets: the commit does not check that the client holds the set's locks
# (its counter checks, and a counter already at the token, stay).
sed 's/IN(c, \([01]\)) \&\& L(\1, i) != c -> r = 0/false -> r = 0/' quorum_set.pml > set_commit_unowned.pml
# Sets: a failed attempt releases only where its vote counted, not where a
# node that sits out set the locks.
sed 's/if :: st -> lockset = lockset | BIT(i)/if :: st \&\& !g -> lockset = lockset | BIT(i)/' quorum_set.pml > set_fail_counted.pml
# Sets: node 0 votes on at once after losing its data (no guard, no repair).
sed 's/lost = 1; guard\[0\] = 1;/lost = 1;/' quorum_set.pml > set_no_guard.pml
# Sets: node 0 is repaired at once, without sitting out.
sed 's/^#define SATOUT .*/#define SATOUT 1/' quorum_set.pml > set_repair_no_wait.pml
# Handoff: a failed attempt's release deletes a lock handed to the attempt
# after its vote there was refused, which the waiter may count on.
sed 's/lock\[i\] == a \&\& ticket\[i\] != a -> take(i, 0)/lock[i] == a -> take(i, 0)/' \
	quorum_handoff.pml > hand_release_deletes.pml
# Handoff: a grant to any attempt of the waiter counts, not only to its latest.
sed 's/counts\[i\] = grant\[i\] == cur;/counts[i] = grant[i] != 0;/' quorum_handoff.pml > hand_any_attempt.pml
# Handoff: a vote takes a lock handed to another attempt of the waiter's, an
# earlier one's late vote included.
sed 's/lock\[i\] == ticket\[i\] \&\& a > ticket\[i\]/lock[i] == ticket[i]/' quorum_handoff.pml > hand_any_order.pml
# Grant's token: the head holds with the token in the grant when one grant
# committed it, not a majority.
sed 's/:: cm >= Q -> tok\[2\]/:: cm >= 1 -> tok[2]/' quorum_grant_token.pml > grant_one.pml
# Grant's token: a release hands the lock, and commits the token, where the
# head's vote has not run yet (no ticket needed).
sed 's/:: lock\[i\] == 1 \&\& tick\[i\] ->/:: lock[i] == 1 ->/; s/:: lock\[i\] == 1 \&\& !tick\[i\] \&\& !tick2\[i\] -> lock\[i\] = 0/:: false -> skip/' \
	quorum_grant_token.pml > grant_no_ticket.pml
# Grant's token: the grant sets the counter to the token whatever it was.
sed 's/if :: ctr\[i\] < tok\[1\] + 1 -> ctr\[i\] = tok\[1\] + 1; gtok\[i\] = ctr\[i\] :: else -> skip fi;/ctr[i] = tok[1] + 1; gtok[i] = ctr[i];/' \
	quorum_grant_token.pml > grant_unchecked.pml
# Grant's token: B's second attempt adopts the grant's token over a counter
# equal to it that its vote did not carry (it refuses only a higher one).
sed 's/if :: vote\[i\] \&\& (read\[i\] > p || read\[i\] == p \&\& !gv\[i\]) -> ok = 0/if :: vote[i] \&\& read[i] > p -> ok = 0/' \
	quorum_grant_token.pml > grant_adopt_equal.pml
for f in grant_one.pml grant_no_ticket.pml grant_unchecked.pml grant_adopt_equal.pml; do
	if cmp -s "$f" quorum_grant_token.pml; then
		echo "run.sh: the edit for $f no longer applies" >&2
		exit 1
	fi
done
for f in hand_release_deletes.pml hand_any_attempt.pml hand_any_order.pml; do
	if cmp -s "$f" quorum_handoff.pml; then
		echo "run.sh: the edit for $f no longer applies" >&2
		exit 1
	fi
done
for f in guard_no_repair.pml repair_no_wait.pml commit_one.pml commit_unchecked.pml commit_rerun.pml repair_rerun.pml node_repair_rerun.pml \
	set_vote_partial.pml set_commit_unowned.pml set_fail_counted.pml set_no_guard.pml set_repair_no_wait.pml; do
	if cmp -s "$f" quorum_token.pml || cmp -s "$f" quorum_token_repair.pml || cmp -s "$f" quorum_token_node_repair.pml ||
		cmp -s "$f" quorum_set.pml; then
		echo "run.sh: the edit for $f no longer applies" >&2
		exit 1
	fi
done

check() { # model, defines, claim
	rm -rf run && mkdir run && cp "$1" run/ && (
		cd run
		spin -a $2 "$1" >/dev/null
		gcc -O2 -w -o pan pan.c
		./pan -a -N "$3" >out.txt 2>&1 || true
		printf '%-28s %-22s %-8s %s, %s\n' "$1" "$2" "$3" \
			"$(grep -o 'errors: [0-9]*' out.txt)" \
			"$(grep -o '[0-9]* states, stored' out.txt)"
	)
}
# model, defines: one safety search that asserts every claim of the set
# model; prints the claim whose assertion failed, if any
check_set() {
	rm -rf run && mkdir run && cp "$1" run/ && (
		cd run
		spin -a $2 "$1" >/dev/null
		gcc -O2 -w -DSAFETY -DCOLLAPSE -o pan pan.c
		./pan >out.txt 2>&1 || true
		if ! grep -q 'errors: [0-9]' out.txt; then
			echo "run.sh: no result for $1 $2" >&2
			cat out.txt >&2
			exit 1
		fi
		printf '%-28s %-22s %-8s %s, %s%s\n' "$1" "$2" all \
			"$(grep -o 'errors: [0-9]*' out.txt)" \
			"$(grep -o '[0-9]* states, stored' out.txt)" \
			"$(grep -o 'assertion violated [a-z]*' out.txt | sed 's/assertion violated/, claim broken:/')"
	)
}
if [ "$only" = grant ] || [ -z "$only" ]; then
	for m in quorum_grant_token.pml grant_one.pml grant_no_ticket.pml grant_unchecked.pml grant_adopt_equal.pml; do
		check_set "$m" ""
	done
fi
[ "$only" = grant ] && exit 0
if [ "$only" = handoff ] || [ -z "$only" ]; then
	for m in quorum_handoff.pml hand_release_deletes.pml hand_any_attempt.pml hand_any_order.pml; do
		check_set "$m" ""
	done
fi
[ "$only" = handoff ] && exit 0
if [ "$only" != token ]; then
	for m in "quorum_set.pml|" "quorum_set.pml|-DCLOCKS=0 -DLOSS=0" \
		"set_vote_partial.pml|-DSET2=2" "set_commit_unowned.pml|-DCLOCKS=0 -DLOSS=0" \
		"set_fail_counted.pml|" "set_no_guard.pml|" "set_repair_no_wait.pml|" \
		"quorum_set.pml|-DREPAIR=0"; do
		check_set "${m%%|*}" "${m#*|}"
	done
fi
[ "$only" = set ] && exit 0

for m in "quorum_token.pml|" "commit_one.pml|" "commit_unchecked.pml|" "commit_rerun.pml|" \
	"quorum_token_repair.pml|-DREPAIR=0" "guard_no_repair.pml|" \
	"repair_no_wait.pml|" "quorum_token_repair.pml|-DREPAIR=1" "repair_rerun.pml|-DREPAIR=1" \
	"quorum_token_node_repair.pml|-DREPAIR=0" "quorum_token_node_repair.pml|-DREPAIR=1" \
	"node_repair_rerun.pml|-DREPAIR=1"; do
	f=${m%%|*} d=${m#*|}
	check "$f" "$d -DSEQ=0" unique
	check "$f" "$d -DSEQ=1" unique
	check "$f" "$d -DSEQ=1" ordered
done
