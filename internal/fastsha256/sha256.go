package fastsha256

import (
	"crypto/sha256"
	"hash"
)

// New returns a SHA-256 hash: this package's when the CPU lacks what Go's
// fast paths need, crypto/sha256's otherwise.
func New() hash.Hash {
	if h := newAssembly(); h != nil {
		return h
	}
	return sha256.New()
}

// Implementation names the code New's hash runs, for logs.
func Implementation() string {
	if newAssembly() != nil {
		return "fastsha256 integer assembly"
	}
	return "crypto/sha256"
}
