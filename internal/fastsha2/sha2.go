package fastsha2

import (
	"crypto/sha256"
	"crypto/sha512"
	"hash"
)

// New256 returns a SHA-256 hash: this package's when the CPU lacks what
// Go's fast code needs, crypto/sha256's otherwise.
func New256() hash.Hash {
	if h := assembly256(); h != nil {
		return h
	}
	return sha256.New()
}

// New512 returns a SHA-512 hash, chosen as New256's.
func New512() hash.Hash {
	if h := assembly512(); h != nil {
		return h
	}
	return sha512.New()
}

// Implementation256 names the code New256's hashes run, for logs.
func Implementation256() string {
	if assembly256() != nil {
		return "fastsha2 integer assembly"
	}
	return "Go's crypto"
}

// Implementation512 names the code New512's hashes run, for logs.
func Implementation512() string {
	if assembly512() != nil {
		return "fastsha2 integer assembly"
	}
	return "Go's crypto"
}
