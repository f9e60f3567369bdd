// Package injectfiles is IPA's inject_files step: files described by
// node.properties[inject_files] and the step's files argument are written
// to (or deleted from) a partition of the install disk, found by number,
// device, UUID or label, or by looking for the file's top directory on
// each partition. Partitions are mounted with mount(2) and unmounted on
// every path; writes are confined to the mounted filesystem.
package injectfiles

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"sort"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/pyconv"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// File is one entry of the files list (IPA's file structure).
type File struct {
	// Path is the absolute path on the target filesystem.
	Path string
	// Partition is the specifier as given: nil when absent or empty
	// (search by path), else a JSON number or string.
	Partition any
	// Content is base64 data or a URL with {node[...]} / {ports[...]}
	// fields; nil when absent.
	Content *string
	// Deleted removes the file instead of writing it.
	Deleted bool
	// Mode and DirMode are chmod values (0: leave as created); Owner and
	// Group chown values (nil: unchanged).
	Mode, DirMode int
	Owner, Group  *int
	// raw is the entry as given, for error messages.
	raw string
}

func (f File) String() string { return f.raw }

// knownField reports whether IPA's _validate_files accepts the key.
func knownField(k string) bool {
	switch k {
	case "path", "partition", "content", "deleted", "mode", "dirmode", "owner", "group":
		return true
	}
	return false
}

// Parse merges the node property (first) and the step argument (second),
// each a JSON list or null, and checks every entry as IPA's
// _validate_files does: all failures in one InvalidCommandParamsError.
// Unlike IPA a path that climbs out of its filesystem ("..") is refused.
func Parse(fromProperties, fromArgs json.RawMessage) ([]File, error) {
	props, err := list(fromProperties, "The `inject_files` node property")
	if err != nil {
		return nil, err
	}
	args, err := list(fromArgs, "The `files` argument")
	if err != nil {
		return nil, err
	}
	var files []File
	var failures []string
	for _, raw := range append(props, args...) {
		f, fails := parseOne(raw)
		failures = append(failures, fails...)
		files = append(files, f)
	}
	if len(failures) > 0 {
		return nil, ipaerror.InvalidCommandParams("Validation of files failed: %s", strings.Join(failures, "; "))
	}
	return files, nil
}

// list decodes a list, treating null, absent and empty values as IPA's
// `or []` does.
func list(raw json.RawMessage, what string) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" || string(raw) == `""` || string(raw) == "false" || string(raw) == "{}" || string(raw) == "0" {
		return nil, nil
	}
	var out []json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, ipaerror.InvalidCommandParams("%s must be a list, got %s", what, jsonType(raw))
	}
	return out, nil
}

func jsonType(raw json.RawMessage) string {
	switch raw[0] {
	case '{':
		return "dict"
	case '"':
		return "str"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

// intField reads a field IPA requires to be an int (type(x) is int: not a
// bool, not a float, not null).
func intField(v any) (int, bool) {
	x, ok := v.(float64)
	if !ok || x != math.Trunc(x) || math.Abs(x) > math.MaxInt32 {
		return 0, false
	}
	return int(x), true
}

func parseOne(raw json.RawMessage) (File, []string) {
	f := File{raw: string(raw)}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return f, []string{fmt.Sprintf("expected an object, got %s", raw)}
	}
	var fails []string
	var unknown []string
	for k := range m {
		if !knownField(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		fails = append(fails, fmt.Sprintf("unexpected fields in %s: %s", raw, strings.Join(unknown, ", ")))
	}
	p, _ := m["path"].(string)
	if _, isStr := m["path"].(string); m["path"] != nil && !isStr {
		fails = append(fails, fmt.Sprintf("path must be a string in %s", raw))
	}
	f.Path = p
	if pyconv.Truthy(m["partition"]) {
		f.Partition = m["partition"]
	}
	switch {
	case !pyconv.Truthy(m["path"]):
		fails = append(fails, fmt.Sprintf("expected a path in %s", raw))
	case path.Dir(p) == "/" && f.Partition == nil:
		fails = append(fails, fmt.Sprintf("%s in root directory requires \"partition\"", raw))
	case strings.HasSuffix(p, "/"):
		fails = append(fails, fmt.Sprintf("directories not supported for %s", raw))
	case escapes(p):
		fails = append(fails, fmt.Sprintf("path %q leaves its filesystem in %s", p, raw))
	}
	if c, ok := m["content"]; ok && c != nil {
		s, isStr := c.(string)
		if !isStr {
			fails = append(fails, fmt.Sprintf("content must be a string in %s", raw))
		}
		f.Content = &s
	}
	f.Deleted = pyconv.Truthy(m["deleted"])
	if pyconv.Truthy(m["content"]) && f.Deleted {
		fails = append(fails, fmt.Sprintf("content cannot be used with deleted in %s", raw))
	}
	for _, field := range []string{"owner", "group", "mode", "dirmode"} {
		v, present := m[field]
		if !present {
			continue
		}
		n, ok := intField(v)
		if !ok {
			fails = append(fails, fmt.Sprintf("%s must be a number in %s", field, raw))
			continue
		}
		switch field {
		case "owner":
			f.Owner = &n
		case "group":
			f.Group = &n
		case "mode":
			f.Mode = n
		case "dirmode":
			f.DirMode = n
		}
	}
	switch f.Partition.(type) {
	case nil, string, float64:
	default:
		fails = append(fails, fmt.Sprintf("partition must be a number or a string in %s", raw))
	}
	return f, fails
}

// escapes reports whether a path, made relative as IPA makes it
// (normpath of the path stripped of slashes), climbs above its root.
func escapes(p string) bool {
	rel := path.Clean(strings.Trim(p, "/"))
	return rel == ".." || strings.HasPrefix(rel, "../")
}
