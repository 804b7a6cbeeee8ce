package quorum

import (
	"slices"
	"testing"
)

// TestGrantedToken: the rule by which an attempt holds with the token a
// release's grants committed (docs/quorum.md, "The token in the grant";
// docs/models/quorum_grant_token.pml): carried by its counted votes, no
// counter read above it, no counted counter equal to it uncarried; the
// commit goes where a counted vote does not carry it.
func TestGrantedToken(t *testing.T) {
	const p = 100
	ok := func(counter, granted int64) vote {
		return vote{answered: true, answer: NodeAnswer{Kind: KindOK}, read: true, set: true, counter: counter, granted: granted}
	}
	held := func(counter int64) vote {
		return vote{answered: true, answer: NodeAnswer{Kind: KindHeld}, read: true, counter: counter}
	}
	silent := vote{}
	for _, c := range []struct {
		name    string
		votes   []vote
		token   int64
		commit  []int
		carried int
	}{
		{"a majority carries it: no commit", []vote{ok(p, p), ok(p, p), ok(p, p), silent, silent}, p, nil, 3},
		{"two carry it: the third commits", []vote{ok(p, p), ok(p, p), ok(p-1, 0), held(p - 1), silent}, p, []int{2}, 2},
		{"one carries it: two commit", []vote{ok(p, p), ok(p-1, 0), ok(7, 0), silent, silent}, p, []int{1, 2}, 1},
		{"the highest carried", []vote{ok(p-5, p-5), ok(p, p), ok(p-1, 0), silent, silent}, p, []int{0, 2}, 1},
		{"none carried", []vote{ok(p, 0), ok(p, 0), ok(p, 0), silent, silent}, 0, nil, 0},
		{"a counter read above it", []vote{ok(p, p), ok(p, p), ok(p-1, 0), held(p + 1), silent}, 0, nil, 0},
		{"a counted counter equal to it, uncarried", []vote{ok(p, p), ok(p, p), ok(p, 0), silent, silent}, 0, nil, 0},
		{"an equal counter where the lock is another's", []vote{ok(p, p), ok(p, p), ok(p, p), held(p), silent}, p, nil, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &ballot{votes: c.votes}
			token, commit, carried := b.grantedToken()
			if token != c.token || !slices.Equal(commit, c.commit) && len(commit)+len(c.commit) > 0 || carried != c.carried {
				t.Errorf("grantedToken() = %d, commit on %v, %d carried; want %d, %v, %d", token, commit, carried, c.token, c.commit, c.carried)
			}
		})
	}
}
