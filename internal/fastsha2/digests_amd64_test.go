//go:build amd64 && !purego

package fastsha2

import "hash"

// assemblyForTest is the assembly digests, used by the tests whatever
// the constructors pick on this CPU.
func assemblyForTest() (sha256, sha512 func() hash.Hash) {
	return func() hash.Hash { return newDigest256() }, func() hash.Hash { return newDigest512() }
}
