// Package lazyregexp is a regular expression compiled on its first use,
// after Go's own internal/lazyregexp. A package-level regexp.MustCompile
// runs in every start of the agent, whichever command it runs; one from
// New costs its compilation only to the runs that match with it.
package lazyregexp

import (
	"os"
	"regexp"
	"strings"
	"sync"
)

// Regexp is a regexp.Regexp compiled when first used.
type Regexp struct {
	expr string
	once sync.Once
	rx   *regexp.Regexp
}

func (r *Regexp) re() *regexp.Regexp {
	r.once.Do(func() { r.rx = regexp.MustCompile(r.expr) })
	return r.rx
}

// New returns the regular expression expr, compiled on first use. Test
// binaries compile it at once, so a bad pattern fails every test of its
// package rather than only the one that reaches it.
func New(expr string) *Regexp {
	r := &Regexp{expr: expr}
	if strings.HasSuffix(os.Args[0], ".test") {
		r.re()
	}
	return r
}

// String returns the source text.
func (r *Regexp) String() string { return r.expr }

// MatchString is regexp.Regexp.MatchString.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

// FindSubmatch is regexp.Regexp.FindSubmatch.
func (r *Regexp) FindSubmatch(b []byte) [][]byte { return r.re().FindSubmatch(b) }

// ReplaceAllFunc is regexp.Regexp.ReplaceAllFunc.
func (r *Regexp) ReplaceAllFunc(src []byte, repl func([]byte) []byte) []byte {
	return r.re().ReplaceAllFunc(src, repl)
}
