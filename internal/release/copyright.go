package release

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
)

// copyright is a Debian machine-readable copyright file (DEP-5,
// https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/):
// the Files paragraphs in order, and the stand-alone License paragraphs'
// texts by name.
type copyright struct {
	files []filesPara
	texts map[string]string
}

type filesPara struct {
	patterns []*regexp.Regexp
	raw      string // the Files field as written
	license  string // the License field's first line: the short name(s)
}

// parseCopyright reads a DEP-5 file; one without the Format header is
// not machine-readable and gives an error (its licences are unknown).
func parseCopyright(text string) (*copyright, error) {
	paras := paragraphs(text)
	if len(paras) == 0 || !strings.Contains(paras[0]["format"], "copyright-format") {
		return nil, fmt.Errorf("not a machine-readable (DEP-5) copyright file")
	}
	c := &copyright{texts: map[string]string{}}
	for _, p := range paras[1:] {
		lic, ok := p["license"]
		if !ok {
			continue
		}
		name, body, _ := strings.Cut(lic, "\n")
		name = strings.TrimSpace(name)
		files, isFiles := p["files"]
		if !isFiles {
			if strings.TrimSpace(body) != "" {
				c.texts[name] = body
			}
			continue
		}
		fp := filesPara{raw: strings.Join(strings.Fields(files), " "), license: name}
		for _, pat := range strings.Fields(files) {
			fp.patterns = append(fp.patterns, globRegexp(pat))
		}
		c.files = append(c.files, fp)
		if strings.TrimSpace(body) != "" {
			if _, ok := c.texts[name]; !ok {
				c.texts[name] = body
			}
		}
	}
	return c, nil
}

// license returns the License field of the last Files paragraph matching
// name (DEP-5: the last match wins), and that paragraph's Files field.
func (c *copyright) license(name string) (license, files string, ok bool) {
	for i := len(c.files) - 1; i >= 0; i-- {
		for _, re := range c.files[i].patterns {
			if re.MatchString(name) {
				return c.files[i].license, c.files[i].raw, true
			}
		}
	}
	return "", "", false
}

// globRegexp turns a DEP-5 Files pattern into a regexp: '*' matches any
// characters, '/' too; '?' one; '\' escapes '*', '?' and '\'.
func globRegexp(pat string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '\\':
			if i+1 < len(pat) {
				i++
				b.WriteString(regexp.QuoteMeta(pat[i : i+1]))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// paragraphs splits deb822 text into paragraphs of lower-cased field
// names to values; continuation lines are joined with "\n" (a line of
// " ." is an empty line), comments dropped.
func paragraphs(text string) []map[string]string {
	var out []map[string]string
	var cur map[string]string
	last := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
		case strings.TrimSpace(line) == "":
			cur, last = nil, ""
		case line[0] == ' ' || line[0] == '\t':
			if cur != nil && last != "" {
				l := strings.TrimSpace(line)
				if l == "." {
					l = ""
				}
				cur[last] += "\n" + l
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			if cur == nil {
				cur = map[string]string{}
				out = append(out, cur)
			}
			last = strings.ToLower(strings.TrimSpace(k))
			cur[last] = strings.TrimSpace(v)
		}
	}
	return out
}

// spdxLicenses are Debian's short licence names that have an SPDX
// identifier (the copyright format's list, lower-cased).
var spdxLicenses = map[string]string{
	"apache-2.0": "Apache-2.0", "artistic-2.0": "Artistic-2.0",
	"bsd-2-clause": "BSD-2-Clause", "bsd-3-clause": "BSD-3-Clause", "bsd-4-clause": "BSD-4-Clause",
	"cc0-1.0": "CC0-1.0", "expat": "MIT", "mit": "MIT", "isc": "ISC", "zlib": "Zlib",
	"gpl-1": "GPL-1.0-only", "gpl-1+": "GPL-1.0-or-later",
	"gpl-2": "GPL-2.0-only", "gpl-2+": "GPL-2.0-or-later",
	"gpl-3": "GPL-3.0-only", "gpl-3+": "GPL-3.0-or-later",
	"lgpl-2": "LGPL-2.0-only", "lgpl-2+": "LGPL-2.0-or-later",
	"lgpl-2.1": "LGPL-2.1-only", "lgpl-2.1+": "LGPL-2.1-or-later",
	"lgpl-3": "LGPL-3.0-only", "lgpl-3+": "LGPL-3.0-or-later",
	"mpl-1.1": "MPL-1.1", "mpl-2.0": "MPL-2.0",
}

var licenseOp = regexp.MustCompile(`(?i)\s+(or|and)\s+`)

// spdxExpression turns a DEP-5 License short name ("GPL-2+", "GPL-2 or
// MPL-1.1") into an SPDX expression and the licence identifiers in it:
// names with an SPDX identifier become it, the others
// LicenseRef-<pkg>-<name>, scoped to the package whose copyright file
// names them (two packages' "non-free" are different texts).
func spdxExpression(pkg, debian string) (expr string, ids []string) {
	names := licenseOp.Split(debian, -1)
	ops := licenseOp.FindAllStringSubmatch(debian, -1)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(" " + strings.ToUpper(ops[i-1][1]) + " ")
		}
		id := licenseID(pkg, n)
		b.WriteString(id)
		ids = append(ids, id)
	}
	return b.String(), ids
}

func licenseID(pkg, name string) string {
	if id, ok := spdxLicenses[strings.ToLower(strings.TrimSpace(name))]; ok {
		return id
	}
	return "LicenseRef-" + strings.Trim(notIDChars.ReplaceAllString(pkg+"-"+name, "-"), "-")
}
