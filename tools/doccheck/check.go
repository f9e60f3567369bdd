package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Finding is one line that breaks a rule.
type Finding struct {
	File string
	Line int
	Rule string
	Text string
}

func (f Finding) String() string { return fmt.Sprintf("%s:%d: %s: %s", f.File, f.Line, f.Rule, f.Text) }

// rule is one kind of text a README or guide must not carry. inCode
// rules also look inside code blocks and code spans: a date or a load
// figure is as stale in a log excerpt as in prose, while "we" or "took
// 3 s" there is usually a command's output or option.
type rule struct {
	name   string
	re     *regexp.Regexp
	inCode bool
	// keep, when set, vets each match: the line and the match's offsets.
	keep func(line string, m []int) bool
}

const months = `(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)`

// durationUnit is a unit of a measured duration.
const durationUnit = `(?:ms|s|sec|secs|seconds?|min|mins|minutes?|h|hours?)`

var rules = []rule{
	{name: "date", inCode: true, re: regexp.MustCompile(`\b(?:19|20)\d\d-[01]\d-[0-3]\d\b`)},
	{name: "date", inCode: true, re: regexp.MustCompile(
		`\b` + months + `\.? [0-3]?\d(?:st|nd|rd|th)?,? (?:19|20)\d\d\b` + // March 4, 2026
			`|\b[0-3]?\d(?:st|nd|rd|th)? ` + months + `\b` + // 4 March
			`|\b` + months + `,? (?:19|20)\d\d\b`)}, // March 2026
	// HH:MM or HH:MM:SS standing alone: not part of a MAC or IPv6 address,
	// a device number or a port (those touch a colon, a dot or a hex digit).
	{name: "clock time", inCode: true, re: regexp.MustCompile(`(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d)?`), keep: standsAlone},
	{name: "load figure", inCode: true, re: regexp.MustCompile(`(?i)\bload (?:of |at |was |is )?\d|\bload averages?\b|\bloadavg\b`)},
	{name: "timing", re: regexp.MustCompile(`(?i)\b(?:took|takes|taking|lasted|ran|finished|passed|completed|measured)\b[^.;:\n]{0,24}?\b\d+(?:\.\d+)? ?` + durationUnit + `\b`)},
	{name: "timing", re: regexp.MustCompile(`(?i)\b\d+ ?(?:min|m) ?\d+(?:\.\d+)? ?s\b`)}, // 26 min 8 s, 26m8s
	{name: "timing", re: regexp.MustCompile(`(?i)\bin (?:about |under |over |just )?\d+(?:\.\d+)? ?(?:min|mins|minutes?|h|hours?)\b`)},
	{name: "first person", re: regexp.MustCompile(`\b(?:[Ww]e|[Oo]urs?|[Uu]s|[Mm]e|[Mm]y|[Mm]ine|I|[Tt]oday|[Tt]onight|[Yy]esterday)\b`), keep: firstPerson},
	{name: "issue number", re: regexp.MustCompile(`(?i)\bissues? #?\d+\b|\b(?:fixes|closes|see) #\d+\b`)},
}

// standsAlone reports whether the match is not glued to a neighbouring
// colon, dot, digit, hex letter or word character.
func standsAlone(line string, m []int) bool {
	glued := func(c byte) bool {
		return c == ':' || c == '.' || c == '_' ||
			c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	return (m[0] == 0 || !glued(line[m[0]-1])) && (m[1] == len(line) || !glued(line[m[1]]))
}

// firstPerson drops the uses of these words that are not narration: "I"
// in I/O or I-cache, and "us" as microseconds after a number.
func firstPerson(line string, m []int) bool {
	w := line[m[0]:m[1]]
	before, after := byte(' '), byte(' ')
	if m[0] > 0 {
		before = line[m[0]-1]
	}
	if m[1] < len(line) {
		after = line[m[1]]
	}
	switch w {
	case "I":
		return !strings.ContainsRune("/-'", rune(after)) && !strings.ContainsRune("/-", rune(before))
	case "us", "Us":
		prev := strings.TrimRight(line[:m[0]], " ")
		return prev == "" || prev[len(prev)-1] < '0' || prev[len(prev)-1] > '9'
	}
	return true
}

// allowMarker on a line exempts it from the rule named after it (one
// rule per marker), for the rare true statement a rule would refuse.
const allowMarker = "<!-- doccheck: allow "

// codeSpan matches inline code.
var codeSpan = regexp.MustCompile("`[^`]*`")

// Check reads one Markdown file and returns what breaks the rules.
func Check(name string, r io.Reader) ([]Finding, error) {
	var out []Finding
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	inFence := false
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		isFence := strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")
		if isFence {
			inFence = !inFence
			continue
		}
		prose := ""
		if !inFence {
			// Same length, so offsets agree with line.
			prose = codeSpan.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat(" ", len(s)) })
		}
		for _, ru := range rules {
			if strings.Contains(line, allowMarker+ru.name+" -->") {
				continue
			}
			text := prose
			if ru.inCode {
				text = line
			}
			if text == "" {
				continue
			}
			for _, m := range ru.re.FindAllStringIndex(text, -1) {
				if ru.keep != nil && !ru.keep(text, m) {
					continue
				}
				out = append(out, Finding{File: name, Line: n, Rule: ru.name, Text: excerpt(line, m)})
				break
			}
		}
	}
	return out, sc.Err()
}

// excerpt is the match with some context, so a long table row stays
// readable in the report.
func excerpt(line string, m []int) string {
	const ctx = 40
	start, end := max(0, m[0]-ctx), min(len(line), m[1]+ctx)
	for start > 0 && !utf8.RuneStart(line[start]) {
		start--
	}
	for end < len(line) && !utf8.RuneStart(line[end]) {
		end++
	}
	s := line[start:end]
	if start > 0 {
		s = "..." + s
	}
	if end < len(line) {
		s += "..."
	}
	return strings.TrimSpace(s)
}
