package dlock

import (
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
)

var (
	_ MultiLocker = (*single.Locker)(nil)
	_ MultiLocker = (*quorum.Locker)(nil)
	_ MultiLocker = (*opened)(nil)
)
