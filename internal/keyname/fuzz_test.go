package keyname_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/keyname"
)

// crc16 is the CRC16 (XMODEM) a Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot is the cluster slot of key, as Redis computes it: of the hash tag,
// the bytes between the first "{" and the first "}" after it, when that is
// not empty; else of the whole key.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) & 16383)
}

// tagged says whether key has a non-empty hash tag.
func tagged(key string) bool {
	i := strings.IndexByte(key, '{')
	return i >= 0 && strings.IndexByte(key[i+1:], '}') > 0
}

func TestSlot(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	if got := crc16("123456789"); got != 0x31c3 {
		t.Errorf("crc16(123456789) = %#x; want 0x31c3", got)
	}
	for _, tt := range []struct {
		key  string
		want int
	}{{"foo", 12182}, {"{user1000}.following", 3443}, {"user1000", 3443}} {
		if got := slot(tt.key); got != tt.want {
			t.Errorf("slot(%q) = %d; want %d", tt.key, got, tt.want)
		}
	}
}

// unescape undoes the escape of a key that starts with "}" (see Single).
var unescape = strings.NewReplacer("%7D", "}", "%25", "%")

// decode returns the key that base, a name Single, RWLock or Claims made
// after prefix, was made from.
func decode(base, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(base, prefix)
	if !ok || !strings.HasSuffix(rest, "}") {
		return "", false
	}
	rest = rest[:len(rest)-1]
	if esc, ok := strings.CutPrefix(rest, "%{"); ok {
		return unescape.Replace(esc), true
	}
	return strings.CutPrefix(rest, "{")
}

// Suffixes the scripts append to a lock's base name.
var suffixes = []string{"", ":gone", ":q", ":qx", ":released", ":active", ":owners", ":pending", ":ready", ":floor:x"}

// FuzzNames checks, for any two keys: a key is either refused with an
// *ArgError for the key (CheckKey) or named so that every key of its lock,
// of each kind, is in one cluster slot under a non-empty hash tag; the
// name gives back the key; and two kinds or two keys never share a name.
func FuzzNames(f *testing.F) {
	for _, s := range [][2]string{
		{"a", "b"}, {"", "x"}, {"}", "%7D"}, {"{", "}"}, {"{}", "}{"}, {"}%}", "%}"}, {"a}b", "{x}"},
		{"dlock:%{%7D}", "}"}, {"\x00\xff", "\xff"}, {strings.Repeat("}", 300), strings.Repeat("{", 300)},
		{"claims:x", "rw:x"}, {"%", "%25"}, {"}claims", "}rw"},
	} {
		f.Add(s[0], s[1])
	}
	kinds := []struct {
		prefix string
		name   func(string) string
	}{
		{"dlock:", keyname.Single},
		{"dlock:rw:", keyname.RWLock},
		{"dlock:claims:", keyname.Claims},
		{"dlock:permits:", func(k string) string { return "dlock:permits:" + strings.TrimPrefix(keyname.Single(k), "dlock:") }},
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, key := range []string{a, b} {
			if err := engine.CheckKey(key); err != nil {
				var ae *argerr.Error
				if !errors.As(err, &ae) || ae.Arg != "key" {
					t.Fatalf("CheckKey(%q) = %v; want an *ArgError for the key", key, err)
				}
				continue
			}
			for _, k := range kinds {
				base := k.name(key)
				if !tagged(base) {
					t.Fatalf("key %q: name %q has no hash tag: its keys spread over slots", key, base)
				}
				for _, s := range suffixes {
					if slot(base+s) != slot(base) {
						t.Fatalf("key %q: %q in slot %d, %q in slot %d", key, base, slot(base), base+s, slot(base+s))
					}
				}
				if got, ok := decode(base, k.prefix); !ok || got != key {
					t.Fatalf("key %q: name %q decodes as %q, %v", key, base, got, ok)
				}
			}
		}
		for i, ka := range kinds {
			for j, kb := range kinds {
				if (i != j || a != b) && ka.name(a) == kb.name(b) {
					t.Fatalf("keys %q and %q share the name %q", a, b, ka.name(a))
				}
			}
		}
	})
}
