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
// new lines, split at the first '=', a later duplicate winning. What IPA
// drops without a word (an entry without '=', an empty key, bytes that
// are not text) is returned as a Problem instead, so the caller can say so.
func ParseParameters(b []byte) (map[string]string, []Problem) {
	params := map[string]string{}
	var problems []Problem
	for i, line := range strings.Split(string(b), "\n") {
		for _, tok := range strings.Fields(line) {
			p := Problem{Line: i + 1, Text: tok}
			k, v, ok := strings.Cut(tok, "=")
			switch {
			case !ok:
				p.Reason = "no '=': not a key=value entry"
			case k == "":
				p.Reason = "empty key"
			case strings.ContainsFunc(tok, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0xfffd }):
				p.Reason = "control character or invalid UTF-8"
			case len(params) >= maxParameters:
				p.Reason = fmt.Sprintf("more than %d parameters", maxParameters)
			default:
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

// AppendParameters is cmdline with params after it, key=value each in key
// order, so that a parser where a later duplicate wins (the agent's and
// the init's, as IPA's get_agent_params merges) takes the vmedia values.
// Keys and values hold no white space (ParseParameters split on it).
func AppendParameters(cmdline string, params map[string]string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(cmdline))
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + params[k])
	}
	b.WriteByte('\n')
	return b.String()
}
