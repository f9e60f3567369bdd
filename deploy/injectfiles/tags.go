package injectfiles

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/pyconv"
)

// findTagged returns the partition of disk that mount(8) would find for
// TAG=value, or "".
func findTagged(disk, tag, value string) string {
	switch tag {
	case "UUID", "PARTUUID":
		p, err := blockdev.FindPartitionByUUID(disk, value)
		if err != nil {
			return ""
		}
		return p
	case "PARTLABEL":
		t, err := blockdev.ReadPartTable(disk, sectorSize(disk))
		if err != nil {
			return ""
		}
		for _, p := range t.Partitions {
			if t.Kind == "gpt" && p.Name == value {
				return blockdev.PartitionPath(disk, p.Number)
			}
		}
	case "LABEL":
		for _, part := range blockdev.PartitionsOf("/", disk) {
			if l, err := blockdev.FSLabel(part); err == nil && l == value {
				return part
			}
		}
	}
	return ""
}

// sectorSize is the logical sector size of a disk (512 when sysfs does not
// say, or for a regular file).
func sectorSize(disk string) int {
	sys, err := blockdev.SysBlockDir("/", disk)
	if err != nil {
		return 512
	}
	v, err := blockdev.ReadSysInt(filepath.Join(blockdev.QueueDir(blockdev.ResolveLink(sys)), "logical_block_size"))
	if err != nil || v <= 0 {
		return 512
	}
	return int(v)
}

// FormatURL fills a URL template as Python's str.format(node=node,
// ports=ports) does for the fields a deploy template uses: {node[key]...},
// {ports[index][key]...} and {{ }} escapes; values render as Python's
// str(). Attribute access, conversions and format specs are refused.
func FormatURL(tmpl string, node map[string]any, ports []any) (string, error) {
	var out strings.Builder
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		switch {
		case c == '{' && i+1 < len(tmpl) && tmpl[i+1] == '{', c == '}' && i+1 < len(tmpl) && tmpl[i+1] == '}':
			out.WriteByte(c)
			i++
		case c == '}':
			return "", fmt.Errorf("URL %q: single '}' encountered in format string", tmpl)
		case c == '{':
			end := strings.IndexByte(tmpl[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("URL %q: single '{' encountered in format string", tmpl)
			}
			v, err := lookupField(tmpl[i+1:i+end], node, ports)
			if err != nil {
				return "", fmt.Errorf("URL %q: %w", tmpl, err)
			}
			out.WriteString(pyconv.Str(v))
			i += end
		default:
			out.WriteByte(c)
		}
	}
	return out.String(), nil
}

// lookupField resolves one replacement field, e.g. node[properties][x].
func lookupField(field string, node map[string]any, ports []any) (any, error) {
	if strings.ContainsAny(field, "!:.") {
		return nil, fmt.Errorf("field {%s}: only {node[...]} and {ports[...]} lookups are supported", field)
	}
	name, rest, _ := strings.Cut(field, "[")
	var v any
	switch name {
	case "node":
		v = node
	case "ports":
		v = ports
	default:
		return nil, fmt.Errorf("field {%s}: unknown name %q (node or ports)", field, name)
	}
	if rest != "" {
		rest = "[" + rest
	}
	for rest != "" {
		if rest[0] != '[' {
			return nil, fmt.Errorf("field {%s}: expected '[' at %q", field, rest)
		}
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return nil, fmt.Errorf("field {%s}: missing ']'", field)
		}
		key := rest[1:end]
		rest = rest[end+1:]
		switch x := v.(type) {
		case map[string]any:
			val, ok := x[key]
			if !ok {
				return nil, fmt.Errorf("field {%s}: no key %q", field, key)
			}
			v = val
		case []any:
			n, err := strconv.Atoi(key)
			if err != nil || n < 0 || n >= len(x) {
				return nil, fmt.Errorf("field {%s}: index %q out of range (%d items)", field, key, len(x))
			}
			v = x[n]
		default:
			return nil, fmt.Errorf("field {%s}: %q is not subscriptable", field, key)
		}
	}
	return v, nil
}
