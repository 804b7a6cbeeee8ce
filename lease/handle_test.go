package lease_test

// The handle's text form is a format, checked here on its own; handles
// taken up on real servers are tested in packages single and quorum.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/lease"
)

// sealed returns the text of a handle whose fields are json, with a
// checksum that matches: what only a careful forger writes.
func sealed(json string) string {
	return sealedBody(base64.RawURLEncoding.EncodeToString([]byte(json)))
}

// sealedBody is sealed for a body taken as it is, base64 or not.
func sealedBody(body string) string {
	s := sha256.Sum256([]byte("dlock1." + body))
	return "dlock1." + body + "." + hex.EncodeToString(s[:8])
}

func TestParseHandle(t *testing.T) {
	h := lease.Handle{Strategy: "quorum", Servers: "a:1,b:2,c:3", Key: "k\n\"x\"", Owner: "0123456789abcdef0123456789abcdef host=a pid=1",
		Token: 1<<53 - 1, TTL: 1500 * time.Millisecond, Waiter: "w"}
	text := h.String()
	if strings.ContainsAny(text, " \n\t'\"$") {
		t.Fatalf("String() = %q; want one shell-safe word", text)
	}
	got, err := lease.ParseHandle(text + "\n")
	if err != nil || got != h {
		t.Fatalf("ParseHandle(String()) = %+v, %v; want %+v", got, err, h)
	}
	for _, tc := range []struct {
		name, text, rule string
	}{
		{"empty", "", "must start with"},
		{"other prefix", strings.Replace(text, "dlock1.", "dlock9.", 1), "must start with"},
		{"no checksum", text[:strings.LastIndex(text, ".")], "checksum"},
		{"cut short", text[:len(text)-1], "checksum"},
		{"a field edited", text[:10] + string(text[10]^2) + text[11:], "checksum"},
		{"not base64", sealedBody("!!!"), "base64url"},
		{"not JSON", sealedBody("bm90IGpzb24"), "unreadable"},
		{"unknown field", sealed(`{"s":"single","n":"a:1","k":"k","o":"o","t":1,"l":1000,"x":1}`), "unreadable"},
		{"strategy", sealed(`{"s":"multi","n":"a:1","k":"k","o":"o","t":1,"l":1000}`), "strategy"},
		{"no owner", sealed(`{"s":"single","n":"a:1","k":"k","o":"","t":1,"l":1000}`), "owner"},
		{"no TTL", sealed(`{"s":"single","n":"a:1","k":"k","o":"o","t":1,"l":0}`), "TTL"},
	} {
		_, err := lease.ParseHandle(tc.text)
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != "handle" || !strings.Contains(ae.Rule, tc.rule) {
			t.Errorf("%s: ParseHandle = %v; want an ArgError naming handle, rule with %q", tc.name, err, tc.rule)
		}
		if err != nil && strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("%s: the error quotes the owner: %v", tc.name, err)
		}
	}
	if _, err := lease.ParseHandle(sealed(`{"s":"single","n":"a:1","k":"k","o":"o","t":7,"l":1000}`)); err != nil {
		t.Errorf("a well-formed handle written elsewhere: %v", err)
	}
}
