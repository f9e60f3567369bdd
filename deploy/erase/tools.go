package erase

import (
	"strings"
)

// ataSecurityLines returns the tab-indented lines after "Security:" in
// `hdparm -I` output, tabs turned to spaces and trimmed, as IPA compares
// them (substring tests such as "not frozen" run over the joined list).
func ataSecurityLines(out string) []string {
	_, after, ok := strings.Cut(out, "\nSecurity: \n")
	if !ok {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(after, "\n") {
		if !strings.HasPrefix(l, "\t") {
			break
		}
		lines = append(lines, strings.ReplaceAll(strings.TrimSpace(l), "\t", " "))
	}
	return lines
}

// hasLine reports whether one of lines equals s exactly: IPA tests
// `'supported' in security_lines`, list membership, not a substring.
func hasLine(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}
