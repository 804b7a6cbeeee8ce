package fence

import (
	"context"
	_ "embed"
	"errors"
	"strconv"
	"strings"

	"github.com/dlockgo/dlock/internal/argerr"
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
	//go:embed lua/put.lua
	putLua string
	//go:embed lua/get.lua
	getLua string

	putScript = node.NewScript(putLua)
	getScript = node.NewScript(getLua)
)

// Put writes value to key under token t. It returns an error matching
// ErrStale, and changes nothing, when key was already written under a larger
// token.
func (s *Store) Put(ctx context.Context, key, value string, t Token) error {
	if err := argerr.CheckContext(ctx); err != nil {
		return err
	}
	_, err := s.n.Eval(ctx, putScript, []string{key}, value, t.String())
	var re *node.ReplyError
	if errors.As(err, &re) && strings.HasPrefix(re.Msg, "DLSTALE ") {
		h, _ := strconv.ParseUint(strings.TrimPrefix(re.Msg, "DLSTALE "), 10, 64)
		return &StaleError{Resource: key, Token: t, Highest: Token(h)}
	}
	return err
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
