package dlock

import (
	"github.com/dlockgo/dlock/redlock"
	"github.com/dlockgo/dlock/single"
)

var (
	_ MultiLocker = (*single.Locker)(nil)
	_ MultiLocker = (*redlock.Locker)(nil)
	_ MultiLocker = (*opened)(nil)
)
