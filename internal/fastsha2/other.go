//go:build !amd64 || purego

package fastsha2

import "hash"

// Elsewhere crypto/sha256 and crypto/sha512 are used as they are.
func assembly256() hash.Hash { return nil }
func assembly512() hash.Hash { return nil }
