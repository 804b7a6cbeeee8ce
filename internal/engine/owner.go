package engine

import (
	"crypto/rand"
	"encoding/hex"
)

// NewOwner returns a random value that identifies one lease on the servers.
func NewOwner() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// OwnerIDLen is the length of an owner's random part, in hex digits.
const OwnerIDLen = 32

// OwnerValue returns the value stored for an owner: its random id, then a
// space and the metadata when there is some. Every script compares the
// whole value, so metadata needs no script of its own.
func OwnerValue(id, metadata string) string {
	if metadata == "" {
		return id
	}
	return id + " " + metadata
}

// Metadata returns the metadata part of an owner value (see OwnerValue).
func Metadata(value string) string {
	if len(value) > OwnerIDLen && value[OwnerIDLen] == ' ' {
		return value[OwnerIDLen+1:]
	}
	return ""
}
