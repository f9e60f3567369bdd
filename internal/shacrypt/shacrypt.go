// Package shacrypt is Ulrich Drepper's SHA-crypt, the crypt(3) password
// hashes "$5$" (SHA-256) and "$6$" (SHA-512) that glibc, Python's crypt
// module and oslo's secretutils write: Ironic hashes the rescue password
// with one of them ([conductor]rescue_password_hash_algorithm, sha256 by
// default) before it sends it to the agent. The algorithm follows the
// specification "Unix crypt using SHA-256 and SHA-512" (version 0.6,
// 2016), including its rounds= option and the salt's 16-character limit.
package shacrypt

import (
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
)

// Algorithm is the hash function of a SHA-crypt hash.
type Algorithm int

const (
	// SHA256 is "$5$", 43 characters of hash.
	SHA256 Algorithm = 5
	// SHA512 is "$6$", 86 characters of hash.
	SHA512 Algorithm = 6
)

func (a Algorithm) String() string {
	switch a {
	case SHA256:
		return "SHA-256"
	case SHA512:
		return "SHA-512"
	}
	return fmt.Sprintf("Algorithm(%d)", int(a))
}

// The specification's limits.
const (
	DefaultRounds = 5000
	MinRounds     = 1000
	MaxRounds     = 999999999
	MaxSaltLen    = 16
)

// Hash is a parsed SHA-crypt string:
// $<id>$[rounds=<N>$]<salt>$<hash>.
type Hash struct {
	Algorithm Algorithm
	// Rounds is the number of rounds; RoundsGiven says whether the string
	// names it (its absence means DefaultRounds and changes the output).
	Rounds      int
	RoundsGiven bool
	Salt        string
	// Sum is the encoded hash after the last '$'.
	Sum string
}

// Parse reads a SHA-crypt string. It refuses what glibc's crypt would never
// write, since no password could match it: another id, rounds out of the
// specification's range, a salt longer than 16 characters, a hash of the
// wrong length or outside crypt's base-64 alphabet.
func Parse(s string) (*Hash, error) {
	var h Hash
	switch {
	case strings.HasPrefix(s, "$5$"):
		h.Algorithm = SHA256
	case strings.HasPrefix(s, "$6$"):
		h.Algorithm = SHA512
	default:
		return nil, errors.New("shacrypt: not a SHA-crypt hash: want the prefix $5$ (SHA-256) or $6$ (SHA-512)")
	}
	rest := s[3:]
	h.Rounds = DefaultRounds
	if r, ok := strings.CutPrefix(rest, "rounds="); ok {
		digits, after, found := strings.Cut(r, "$")
		if !found {
			return nil, errors.New("shacrypt: rounds= without a following '$'")
		}
		n, err := parseRounds(digits)
		if err != nil {
			return nil, err
		}
		h.Rounds, h.RoundsGiven, rest = n, true, after
	}
	i := strings.LastIndexByte(rest, '$')
	if i < 0 {
		return nil, errors.New("shacrypt: no '$' between the salt and the hash")
	}
	h.Salt, h.Sum = rest[:i], rest[i+1:]
	if len(h.Salt) > MaxSaltLen {
		return nil, fmt.Errorf("shacrypt: salt of %d characters: at most %d", len(h.Salt), MaxSaltLen)
	}
	if strings.ContainsAny(h.Salt, "$:\n") {
		return nil, errors.New("shacrypt: the salt contains '$', ':' or a newline")
	}
	if want := h.Algorithm.encodedLen(); len(h.Sum) != want {
		return nil, fmt.Errorf("shacrypt: %s hash of %d characters: want %d", h.Algorithm, len(h.Sum), want)
	}
	for i := 0; i < len(h.Sum); i++ {
		if strings.IndexByte(alphabet, h.Sum[i]) < 0 {
			return nil, fmt.Errorf("shacrypt: hash character %q at %d is not in crypt's base-64 alphabet", h.Sum[i], i)
		}
	}
	return &h, nil
}

func parseRounds(digits string) (int, error) {
	if digits == "" || len(digits) > 9 || strings.Trim(digits, "0123456789") != "" {
		return 0, fmt.Errorf("shacrypt: rounds=%q: want a decimal number from %d to %d", digits, MinRounds, MaxRounds)
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < MinRounds || n > MaxRounds {
		return 0, fmt.Errorf("shacrypt: rounds=%s: want a number from %d to %d", digits, MinRounds, MaxRounds)
	}
	return n, nil
}

// String is the hash as crypt writes it.
func (h *Hash) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "$%d$", int(h.Algorithm))
	if h.RoundsGiven {
		fmt.Fprintf(&b, "rounds=%d$", h.Rounds)
	}
	b.WriteString(h.Salt)
	b.WriteByte('$')
	b.WriteString(h.Sum)
	return b.String()
}

// Verify reports whether password hashes to h, comparing in constant time.
func (h *Hash) Verify(password []byte) bool {
	sum := encode(h.Algorithm, digest(h.Algorithm, password, []byte(h.Salt), h.Rounds))
	return subtle.ConstantTimeCompare([]byte(sum), []byte(h.Sum)) == 1
}

// New hashes password with a fresh 16-character salt read from random
// (crypto/rand.Reader in production) and the default rounds, as Python's
// crypt.mksalt and glibc do.
func New(alg Algorithm, password []byte, random io.Reader) (*Hash, error) {
	if alg != SHA256 && alg != SHA512 {
		return nil, fmt.Errorf("shacrypt: unknown algorithm %v", alg)
	}
	raw := make([]byte, MaxSaltLen)
	if _, err := io.ReadFull(random, raw); err != nil {
		return nil, fmt.Errorf("shacrypt: salt: %w", err)
	}
	salt := make([]byte, MaxSaltLen)
	for i, c := range raw {
		salt[i] = alphabet[c&0x3f]
	}
	h := &Hash{Algorithm: alg, Rounds: DefaultRounds, Salt: string(salt)}
	h.Sum = encode(alg, digest(alg, password, salt, h.Rounds))
	return h, nil
}

func (a Algorithm) newHash() hash.Hash {
	if a == SHA256 {
		return sha256.New()
	}
	return sha512.New()
}

func (a Algorithm) encodedLen() int {
	if a == SHA256 {
		return 43
	}
	return 86
}

// digest is steps 1-21 of the specification: the raw digest before the
// base-64 encoding.
func digest(alg Algorithm, password, salt []byte, rounds int) []byte {
	if len(salt) > MaxSaltLen {
		salt = salt[:MaxSaltLen]
	}
	// B: password, salt, password.
	hb := alg.newHash()
	hb.Write(password)
	hb.Write(salt)
	hb.Write(password)
	b := hb.Sum(nil)

	// A: password, salt, B repeated for the password's length, then one
	// of B or the password per bit of that length.
	ha := alg.newHash()
	ha.Write(password)
	ha.Write(salt)
	ha.Write(repeat(b, len(password)))
	for n := len(password); n > 0; n >>= 1 {
		if n&1 != 0 {
			ha.Write(b)
		} else {
			ha.Write(password)
		}
	}
	a := ha.Sum(nil)

	// P: the digest of the password repeated once per byte, cut to its
	// length; S: of the salt repeated 16 + A[0] times, cut to its length.
	hp := alg.newHash()
	for range password {
		hp.Write(password)
	}
	p := repeat(hp.Sum(nil), len(password))
	hs := alg.newHash()
	for range 16 + int(a[0]) {
		hs.Write(salt)
	}
	s := repeat(hs.Sum(nil), len(salt))

	c := a
	h := alg.newHash()
	for i := range rounds {
		h.Reset()
		if i&1 != 0 {
			h.Write(p)
		} else {
			h.Write(c)
		}
		if i%3 != 0 {
			h.Write(s)
		}
		if i%7 != 0 {
			h.Write(p)
		}
		if i&1 != 0 {
			h.Write(c)
		} else {
			h.Write(p)
		}
		c = h.Sum(c[:0])
	}
	return c
}

// repeat is d repeated to n bytes.
func repeat(d []byte, n int) []byte {
	out := make([]byte, 0, n)
	for len(out) < n {
		out = append(out, d[:min(len(d), n-len(out))]...)
	}
	return out
}

// alphabet is crypt's base-64 alphabet.
const alphabet = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// The specification's byte order for the encoding: groups of three digest
// bytes, each group written as four characters, low bits first.
var (
	order256 = [...][3]int{
		{0, 10, 20}, {21, 1, 11}, {12, 22, 2}, {3, 13, 23}, {24, 4, 14},
		{15, 25, 5}, {6, 16, 26}, {27, 7, 17}, {18, 28, 8}, {9, 19, 29},
	}
	order512 = [...][3]int{
		{0, 21, 42}, {22, 43, 1}, {44, 2, 23}, {3, 24, 45}, {25, 46, 4},
		{47, 5, 26}, {6, 27, 48}, {28, 49, 7}, {50, 8, 29}, {9, 30, 51},
		{31, 52, 10}, {53, 11, 32}, {12, 33, 54}, {34, 55, 13}, {56, 14, 35},
		{15, 36, 57}, {37, 58, 16}, {59, 17, 38}, {18, 39, 60}, {40, 61, 19},
		{62, 20, 41},
	}
)

// encode is step 22: the digest in crypt's base-64.
func encode(alg Algorithm, d []byte) string {
	var b strings.Builder
	put := func(b2, b1, b0 byte, n int) {
		w := uint(b2)<<16 | uint(b1)<<8 | uint(b0)
		for range n {
			b.WriteByte(alphabet[w&0x3f])
			w >>= 6
		}
	}
	if alg == SHA256 {
		for _, g := range order256 {
			put(d[g[0]], d[g[1]], d[g[2]], 4)
		}
		put(0, d[31], d[30], 3)
	} else {
		for _, g := range order512 {
			put(d[g[0]], d[g[1]], d[g[2]], 4)
		}
		put(0, 0, d[63], 2)
	}
	return b.String()
}
