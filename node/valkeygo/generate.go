package valkeygo

// valkeygo.go is node/rueidis/rueidis.go with valkey-go's names.
//go:generate go test -run ^TestTwin$ -update .
