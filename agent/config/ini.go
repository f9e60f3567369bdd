package config

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// iniValue is one option read from a config file, with where it came from so
// a bad value can be reported precisely.
type iniValue struct {
	value string
	line  int
}

// parseINI reads an oslo.config style INI file: "[section]" headers,
// "key = value" or "key: value" lines, '#' and ';' comment lines, and
// indented continuation lines appended to the previous value with a newline.
// Section and key names are kept as written except that keys are
// lower-cased, as oslo.config does. Options before any section header are an
// error, as in oslo.config.
func parseINI(data []byte) (map[string]map[string]iniValue, error) {
	sections := map[string]map[string]iniValue{}
	var section string
	var lastKey string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		raw := sc.Text()
		if n == 1 {
			raw = strings.TrimPrefix(raw, "\ufeff")
		}
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if raw[0] == ' ' || raw[0] == '\t' {
			// Continuation of the previous value.
			if lastKey == "" {
				return nil, fmt.Errorf("line %d: continuation line without an option before it", n)
			}
			v := sections[section][lastKey]
			v.value += "\n" + line
			sections[section][lastKey] = v
			continue
		}
		if line[0] == '[' {
			if !strings.HasSuffix(line, "]") || len(line) < 3 {
				return nil, fmt.Errorf("line %d: malformed section header %q", n, line)
			}
			section = strings.TrimSpace(line[1 : len(line)-1])
			if section == "" {
				return nil, fmt.Errorf("line %d: empty section name", n)
			}
			if sections[section] == nil {
				sections[section] = map[string]iniValue{}
			}
			lastKey = ""
			continue
		}
		if section == "" {
			return nil, fmt.Errorf("line %d: option %q outside any [section]", n, line)
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("line %d: want \"name = value\", got %q", n, line)
		}
		key := strings.ToLower(strings.TrimSpace(line[:i]))
		sections[section][key] = iniValue{value: strings.TrimSpace(line[i+1:]), line: n}
		lastKey = key
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	return sections, nil
}
