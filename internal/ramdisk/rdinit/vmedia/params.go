package vmedia

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Labels and names Ironic gives what it puts on virtual media.
const (
	// ConfigDriveLabel is the boot ISO's label when Ironic made it the
	// config drive (network_data), and a config drive's in general.
	ConfigDriveLabel = "config-2"
	// BootISOLabel is the label of the ISO Ironic builds
	// (images.create_boot_iso).
	BootISOLabel = "VMEDIA_BOOT_ISO"
	// ParametersLabel is the label of the vfat image holding
	// parameters.txt (images.create_vfat_image).
	ParametersLabel = "ir-vfd-dev"
	// ParametersFile is the file of parameters on that image.
	ParametersFile = "parameters.txt"
	// ParamBootMethod is the kernel parameter Ironic's virtual-media boot
	// sets to BootMethodVmedia.
	ParamBootMethod  = "boot_method"
	BootMethodVmedia = "vmedia"
)

// Problem is one entry of parameters.txt that was not taken.
type Problem struct {
	Line   int    // 1-based
	Text   string // the entry
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("line %d: %q: %s", p.Line, p.Text, p.Reason)
}

// maxParameters bounds what one file may hold: Ironic writes a dozen.
const maxParameters = 1000

// ParseParameters reads parameters.txt as IPA does
// (_read_params_from_file): entries key=value separated by white space or
// new lines, split at the first '=', a later duplicate winning. Unlike
// IPA, a value in double quotes may hold blanks, as on the kernel command
// line (sshkey="ssh-ed25519 AAAA... operator@desk"), and is taken without
// its quotes. What IPA drops without a word (an entry without '=', an
// empty key, bytes that are not text), and a quote IPA would have cut in
// two, is returned as a Problem instead, so the caller can say so.
func ParseParameters(b []byte) (map[string]string, []Problem) {
	params := map[string]string{}
	var problems []Problem
	for i, line := range strings.Split(string(b), "\n") {
		words, unclosed := splitWords(line)
		if unclosed != "" {
			words = append(words, unclosed)
		}
		for _, tok := range words {
			p := Problem{Line: i + 1, Text: tok}
			k, v, ok := strings.Cut(tok, "=")
			switch {
			case tok == unclosed:
				p.Reason = "a double quote is not closed on its line"
			case !ok:
				p.Reason = "no '=': not a key=value entry"
			case k == "":
				p.Reason = "empty key"
			case strings.ContainsFunc(tok, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0xfffd }):
				p.Reason = "control character or invalid UTF-8"
			case strings.Contains(k, `"`):
				p.Reason = "double quote in the key"
			case strings.Contains(v, `"`) && !quotedWhole(v):
				p.Reason = `double quote inside a value: quotes go around the whole value (key="a b")`
			case len(params) >= maxParameters:
				p.Reason = fmt.Sprintf("more than %d parameters", maxParameters)
			default:
				if quotedWhole(v) {
					v = v[1 : len(v)-1]
				}
				params[k] = v
				continue
			}
			if len(p.Text) > 80 {
				p.Text = p.Text[:80] + "..."
			}
			problems = append(problems, p)
		}
	}
	return params, problems
}

// quotedWhole reports whether v is one double-quoted string.
func quotedWhole(v string) bool {
	return len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && !strings.Contains(v[1:len(v)-1], `"`)
}

// splitWords splits s at blanks outside double quotes, as the kernel
// splits its command line; a word whose quote is not closed by the end is
// returned apart, as unclosed.
func splitWords(s string) (words []string, unclosed string) {
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return words, ""
		}
		i, inq := 0, false
		for ; i < len(s); i++ {
			if s[i] == '"' {
				inq = !inq
			} else if !inq && strings.IndexByte(" \t\r\n", s[i]) >= 0 {
				break
			}
		}
		if inq {
			return words, s
		}
		words = append(words, s[:i])
		s = s[i:]
	}
}

// AppendParameters is cmdline without the words of the keys params sets,
// then params, key=value each in key order (a value with blanks in double
// quotes): every parser of the merged line takes the medium's value, as
// IPA's get_agent_params merges, including those that take every
// occurrence of a key (sshkey= of the debug login). ParseParameters's
// values hold no double quote.
func AppendParameters(cmdline string, params map[string]string) string {
	var b strings.Builder
	words, unclosed := splitWords(cmdline)
	for _, w := range words {
		k, _, _ := strings.Cut(w, "=")
		if _, ok := params[strings.ReplaceAll(k, `"`, "")]; ok {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		v := params[k]
		if strings.ContainsAny(v, " \t\r\n") {
			v = `"` + v + `"`
		}
		b.WriteString(k + "=" + v)
	}
	// The kernel runs an unclosed quote to the end of its line: it stays
	// last, where it takes nothing of the medium's.
	if unclosed != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(unclosed)
	}
	b.WriteByte('\n')
	return b.String()
}
