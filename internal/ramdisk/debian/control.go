package debian

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Stanza is one paragraph of a Debian control file (a Packages index
// entry, a Release file, a .deb's control): field names as written
// (Debian treats them case-insensitively: Get does), continuation lines
// joined with "\n".
type Stanza map[string]string

// Get returns field name, matched case-insensitively.
func (s Stanza) Get(name string) string {
	if v, ok := s[name]; ok {
		return v
	}
	for k, v := range s {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// maxLine bounds a control file's line: the longest in Debian's indexes
// (a Description or a Provides of hundreds of names) stay far below it.
const maxLine = 16 << 20

// ReadStanzas calls fn for every paragraph of the control file r; what
// is named where is what: where names the file in errors. A line that is
// neither "Field: value", a continuation (starting with a space or tab),
// a comment nor blank is an error; so is a continuation before any field.
func ReadStanzas(r io.Reader, where string, fn func(Stanza) error) error {
	return readStanzas(r, where, nil, fn)
}

// readStanzas is ReadStanzas keeping only the fields keep accepts (all
// when nil): a Packages index is mostly descriptions nobody reads here.
func readStanzas(r io.Reader, where string, keep map[string]bool, fn func(Stanza) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	cur := Stanza{}
	last := ""
	n := 0
	// A field's continuation lines are joined when it ends: an InRelease
	// SHA256 field has thousands.
	var more []string
	endField := func() {
		if len(more) > 0 {
			cur[last] += "\n" + strings.Join(more, "\n")
			more = more[:0]
		}
	}
	flush := func() error {
		endField()
		if len(cur) == 0 {
			return nil
		}
		s := cur
		cur, last = make(Stanza, len(s)), ""
		return fn(s)
	}
	// Lines are read as bytes and only kept fields become strings: a
	// Packages index is a million lines, mostly descriptions.
	for sc.Scan() {
		n++
		line := sc.Bytes()
		switch {
		case len(bytes.TrimSpace(line)) == 0:
			if err := flush(); err != nil {
				return err
			}
			last = ""
		case line[0] == '#':
		case line[0] == ' ' || line[0] == '\t':
			if last == "" {
				return fmt.Errorf("%s:%d: continuation line before any field", where, n)
			}
			if _, ok := cur[last]; ok {
				more = append(more, string(bytes.TrimSpace(line)))
			}
		default:
			k, v, ok := bytes.Cut(line, []byte(":"))
			if !ok || len(k) == 0 || bytes.ContainsAny(k, " \t") {
				return fmt.Errorf("%s:%d: not a \"Field: value\" line: %.80q", where, n, line)
			}
			endField()
			if keep == nil || keep[string(k)] {
				last = string(k)
				cur[last] = string(bytes.TrimSpace(v))
			} else {
				last = "-" // a field not kept: its continuations are skipped
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return flush()
}

// ParseDepends returns the package names of a Depends-like field
// ("a (>= 1), b | c, d:any [amd64]"): the first of each set of
// alternatives, without version, architecture qualifier or restriction,
// each once, in order.
func ParseDepends(field string) []string {
	var out []string
	for dep := range strings.SplitSeq(field, ",") {
		dep, _, _ = strings.Cut(dep, "|")
		dep, _, _ = strings.Cut(dep, "(")
		dep, _, _ = strings.Cut(dep, "[")
		dep, _, _ = strings.Cut(dep, "<")
		dep, _, _ = strings.Cut(strings.TrimSpace(dep), ":")
		if dep = strings.TrimSpace(dep); dep != "" && !slices.Contains(out, dep) {
			out = append(out, dep)
		}
	}
	return out
}
