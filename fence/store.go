package fence

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/engine/lua"
	"github.com/dlockgo/dlock/node"
)

// Store is a fenced register in Redis or Valkey: each key is a hash holding
// a value and the token it was written under, and one Lua script compares
// and writes them together, so no interleaving of writers can let an older
// token overwrite a newer one.
//
// Tokens are compared as Lua numbers, exactly up to 2^53. A nil context
// is reported as an *lease.ArgError.
type Store struct {
	n node.Node
}

// NewStore returns a Store that keeps its registers on n.
func NewStore(n node.Node) *Store { return &Store{n: n} }

// The register's scripts, each in lua/ with its keys, arguments and
// replies.
var (
	putScript = lua.Script(lua.Spec{Name: "fence/put", FS: luaFS, Body: []string{"put.lua"}})
	getScript = lua.Script(lua.Spec{Name: "fence/get", FS: luaFS, Body: []string{"get.lua"}})
)

//go:embed lua
var luaFS embed.FS

// MaxStoreToken is the largest token a Store takes: the script compares
// tokens as Lua numbers (doubles), exact up to 2^53, above which two
// tokens can compare equal.
const MaxStoreToken Token = 1 << 53

// errBadReply is a reply of another shape than the scripts give.
var errBadReply = errors.New("fence: unexpected reply")

// Put writes value to key under token t. It returns an error matching
// ErrStale, and changes nothing, when key was already written under a larger
// token. A t above MaxStoreToken is refused with an *lease.ArgError and
// nothing is sent. A reply of another shape than the script's is an
// error: Put reports a write only when the server said it wrote.
func (s *Store) Put(ctx context.Context, key, value string, t Token) error {
	if err := argerr.CheckContext(ctx); err != nil {
		return err
	}
	if t > MaxStoreToken {
		return &argerr.Error{Arg: "t", Value: t,
			Rule: "must not exceed 2^53 (fence.MaxStoreToken): the store compares tokens as Lua numbers, exact up to 2^53"}
	}
	r, err := s.n.Eval(ctx, putScript, []string{key}, value, t.String())
	return putResult(key, t, r, err)
}

// putResult reads the reply r (or the error err) of the put script for
// key and t: nil only for the integer 1, the write.
func putResult(key string, t Token, r node.Reply, err error) error {
	var re *node.ReplyError
	if errors.As(err, &re) && strings.HasPrefix(re.Msg, "DLSTALE ") {
		h, perr := strconv.ParseUint(strings.TrimPrefix(re.Msg, "DLSTALE "), 10, 64)
		if perr != nil {
			return fmt.Errorf("%w: a refusal without its highest token: %w", errBadReply, err)
		}
		return &StaleError{Resource: key, Token: t, Highest: Token(h)}
	}
	if err != nil {
		return err
	}
	if len(r) != 1 || r[0].Kind != node.Int || r[0].Int != 1 {
		return fmt.Errorf("%w: the put of %s replied %d values, want the integer 1", errBadReply, key, len(r))
	}
	return nil
}

// Get returns the value stored at key and the token it was written under;
// ok is false when key was never written.
func (s *Store) Get(ctx context.Context, key string) (value string, t Token, ok bool, err error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return "", 0, false, err
	}
	r, err := s.n.Eval(ctx, getScript, []string{key})
	if err != nil || len(r) < 2 {
		return "", 0, false, err
	}
	return r.Str(0), Token(r.Int(1)), true, nil
}
