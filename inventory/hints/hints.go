// Package hints matches Ironic's root-device hints against inventory disks
// as IPA does: ironic-lib's hint parsing and normalisation
// (ironic_python_agent/device_hints.py) over oslo.utils' specs_matcher
// language ("s== foo", ">= 100", "<or> a <or> b"). It reads nothing; it
// imports package inventory for the disk records, never the reverse.
package hints

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/ironic-go/ironic-agent/internal/pyconv"
	"github.com/ironic-go/ironic-agent/inventory"
)

// Root-device hints, as IPA reads node.instance_info.root_device and
// node.properties.root_device (ironic_python_agent/device_hints.py):
// names and types, the normalisation (lower case, URL quoting, an implicit
// "s==" or "=="), and the matching over the inventory's disks.

// HintType is the type IPA gives a hint name.
type HintType int

// Hint types.
const (
	HintString HintType = iota
	HintInt
	HintBool
)

// ValidRootDeviceHints maps each hint name IPA accepts to its type. Any
// other name is an error, not ignored.
func ValidRootDeviceHints() map[string]HintType {
	return map[string]HintType{
		"size": HintInt, "model": HintString, "wwn": HintString, "serial": HintString,
		"vendor": HintString, "wwn_with_extension": HintString, "wwn_vendor_extension": HintString,
		"name": HintString, "rotational": HintBool, "hctl": HintString, "by_path": HintString,
		"tran": HintString,
	}
}

// MinRootDiskSize is the smallest disk IPA picks when no hints are given.
const MinRootDiskSize = 4 << 30

// RootDeviceHints is a parsed, validated and normalised hint set.
type RootDeviceHints struct {
	// exprs holds the normalised expression per hint name: a string for
	// string and int hints, a bool for rotational.
	exprs map[string]any
	// raw keeps the hints as given, for messages.
	raw map[string]any
}

// IsEmpty reports whether there are no hints (the default disk choice
// applies).
func (h *RootDeviceHints) IsEmpty() bool { return h == nil || len(h.exprs) == 0 }

// Normalized returns the hints as IPA's parse_root_device_hints returns
// them: {"model": "s== foo%20model", "size": "== 10", "rotational": true}.
func (h *RootDeviceHints) Normalized() map[string]any {
	out := map[string]any{}
	if h != nil {
		for k, v := range h.exprs {
			out[k] = v
		}
	}
	return out
}

// String renders the hints as given, in name order, for error messages.
func (h *RootDeviceHints) String() string {
	if h == nil {
		return "{}"
	}
	b, err := json.Marshal(h.raw) // map keys come out sorted
	if err != nil {
		return fmt.Sprint(h.raw)
	}
	return string(b)
}

// ParseRootDeviceHints validates and normalises hints decoded from JSON
// (values may be string, bool, float64, json.Number, int or nil). It
// returns an empty hint set for nil or {}.
func ParseRootDeviceHints(raw map[string]any) (*RootDeviceHints, error) {
	h := &RootDeviceHints{exprs: map[string]any{}, raw: raw}
	if len(raw) == 0 {
		return h, nil
	}
	valid := ValidRootDeviceHints()
	var invalid []string
	for name := range raw {
		if _, ok := valid[name]; !ok {
			invalid = append(invalid, name)
		}
	}
	if len(invalid) > 0 {
		sort.Strings(invalid)
		names := make([]string, 0, len(valid))
		for n := range valid {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("root device hints %q are invalid; valid hints are: %s",
			invalid, strings.Join(names, ", "))
	}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		value := raw[name]
		switch valid[name] {
		case HintString:
			s, ok := value.(string)
			if !ok {
				return nil, fmt.Errorf("root device hint %q is not a string value: %s", name, pyconv.Repr(value))
			}
			norm, err := normalizeHintExpression(s, name)
			if err != nil {
				return nil, err
			}
			h.exprs[name] = withDefaultOperator(norm, "s== ")
		case HintInt:
			text := pyconv.Str(value)
			_, values, err := extractHintOperatorAndValues(text, name)
			if err != nil {
				return nil, err
			}
			for _, v := range values {
				// Python's int is unbounded: a value past int64 is still a
				// (positive or negative) integer.
				n, err := pyconv.ParseInt(v)
				if err != nil && !errors.Is(err, strconv.ErrRange) {
					return nil, fmt.Errorf("root device hint %q is not an integer value: %s", name, text)
				}
				if n <= 0 {
					return nil, fmt.Errorf("root device hint %q should be a positive integer: %s", name, text)
				}
			}
			// IPA keeps the size expression as given (not lower-cased).
			h.exprs[name] = withDefaultOperator(text, "== ")
		case HintBool:
			b, err := pyconv.Bool(value)
			if err != nil {
				return nil, fmt.Errorf("root device hint %q is not a Boolean value: %s", name, pyconv.Repr(value))
			}
			h.exprs[name] = b
		}
	}
	return h, nil
}

// withDefaultOperator prepends op when expr has no operator of its own
// (IPA's _append_operator_to_hints).
func withDefaultOperator(expr, op string) string {
	if tree, ok := parseSpec(expr); ok && len(tree) > 1 {
		return expr
	}
	return op + expr
}

// extractHintOperatorAndValues splits "<op> v1 <op> v2" into the operator
// and the stripped values; without an operator the whole expression is
// the one value. The expression is lower-cased first.
func extractHintOperatorAndValues(expr, name string) (string, []string, error) {
	expr = strings.ToLower(strings.TrimFunc(expr, unicode.IsSpace))
	if expr == "" {
		return "", nil, fmt.Errorf("root device hint %q expression is empty", name)
	}
	tree, ok := parseSpec(expr)
	if !ok {
		return "", nil, fmt.Errorf("root device hint %q expression %q cannot be parsed", name, expr)
	}
	if len(tree) <= 1 {
		return "", []string{expr}, nil
	}
	op := tree[0]
	var values []string
	for _, v := range strings.Split(expr, op) {
		// Python filters empty pieces before stripping them.
		if v != "" {
			values = append(values, strings.TrimFunc(v, unicode.IsSpace))
		}
	}
	return op, values, nil
}

// normalizeHintExpression lower-cases and URL-quotes each value, keeping
// the operator: "<or> foo <or> foo bar" -> "<or> foo <or> foo%20bar".
func normalizeHintExpression(expr, name string) (string, error) {
	op, values, err := extractHintOperatorAndValues(expr, name)
	if err != nil {
		return "", err
	}
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = " " + urlQuote(v) + " "
	}
	return strings.TrimFunc(op+strings.Join(parts, op), unicode.IsSpace), nil
}

// urlQuote is Python's urllib.parse.quote with its default safe "/":
// letters, digits, "_.-~" and "/" stay, every other byte becomes %XX.
func urlQuote(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '.' || c == '-' || c == '~' || c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// Disk is a disk as hints see it: the inventory record plus every
// serial and WWN known for it (IPA master matches serial and wwn against
// both the lsblk and the udev value).
type Disk struct {
	inventory.Disk
	Serials []*string
	WWNs    []*string
}

// Disks wraps inventory disks, each with its one serial and WWN.
func Disks(disks []inventory.Disk) []Disk {
	out := make([]Disk, len(disks))
	for i, d := range disks {
		out[i] = Disk{Disk: d, Serials: []*string{d.Serial}, WWNs: []*string{d.WWN}}
	}
	return out
}

func (d Disk) stringAttr(name string) (scalar *string, list []*string) {
	switch name {
	case "name":
		return &d.Name, nil
	case "model":
		return d.Model, nil
	case "vendor":
		return d.Vendor, nil
	case "wwn_with_extension":
		return d.WWNWithExtension, nil
	case "wwn_vendor_extension":
		return d.WWNVendorExtension, nil
	case "hctl":
		return d.HCTL, nil
	case "by_path":
		return d.ByPath, nil
	case "tran":
		return d.Tran, nil
	case "serial":
		return nil, d.Serials
	case "wwn":
		return nil, d.WWNs
	}
	return nil, nil
}

// Matches reports whether d satisfies every hint. An error means a hint
// cannot be evaluated against this disk (IPA raises there too).
func (h *RootDeviceHints) Matches(d Disk) (bool, error) {
	if h.IsEmpty() {
		return true, nil
	}
	names := make([]string, 0, len(h.exprs))
	for n := range h.exprs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		ok, err := h.matchOne(d, name)
		if err != nil {
			return false, fmt.Errorf("root device hint %q on %s: %w", name, d.Name, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

func (h *RootDeviceHints) matchOne(d Disk, name string) (bool, error) {
	expr := h.exprs[name]
	switch name {
	case "rotational":
		return d.Rotational == expr.(bool), nil
	case "size":
		return specMatch(specValue{isNum: true, num: float64(d.Size) / (1 << 30)}, expr.(string))
	}
	spec := expr.(string)
	scalar, list := d.stringAttr(name)
	if list != nil || name == "serial" || name == "wwn" {
		// Any non-null value may match; all null (or none known) never does.
		for _, v := range list {
			if v == nil {
				continue
			}
			norm, err := normalizeHintExpression(*v, name)
			if err != nil {
				continue // an empty value in the list is skipped
			}
			if ok, err := specMatch(specValue{str: norm}, spec); err != nil {
				return false, err
			} else if ok {
				return true, nil
			}
		}
		return false, nil
	}
	value := "None" // Python's str(None): a null attribute matches only "none"
	if scalar != nil {
		value = *scalar
	}
	norm, err := normalizeHintExpression(value, name)
	if err != nil {
		return false, nil // empty attribute: IPA skips the device
	}
	return specMatch(specValue{str: norm}, spec)
}

// FindDisksByHints returns every disk, in order, that matches all hints.
func FindDisksByHints(disks []Disk, h *RootDeviceHints) ([]Disk, error) {
	var out []Disk
	for _, d := range disks {
		ok, err := h.Matches(d)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// SkipBlockDevices removes the disks matched by any entry of the node's
// properties.skip_block_devices (each entry a hint dict; entries naming a
// software RAID volume_name are not about disks and are ignored). It
// returns the remaining disks and the names skipped.
func SkipBlockDevices(disks []Disk, skip []map[string]any) ([]Disk, []string, error) {
	skipped := map[string]bool{}
	for i, entry := range skip {
		if _, ok := entry["volume_name"]; ok {
			continue
		}
		h, err := ParseRootDeviceHints(entry)
		if err != nil {
			return nil, nil, fmt.Errorf("skip_block_devices[%d]: %w", i, err)
		}
		if h.IsEmpty() {
			continue // IPA: no hints, nothing to match (find_devices yields nothing)
		}
		found, err := FindDisksByHints(disks, h)
		if err != nil {
			return nil, nil, fmt.Errorf("skip_block_devices[%d]: %w", i, err)
		}
		for _, d := range found {
			skipped[d.Name] = true
		}
	}
	var kept []Disk
	var names []string
	for _, d := range disks {
		if skipped[d.Name] {
			names = append(names, d.Name)
			continue
		}
		kept = append(kept, d)
	}
	return kept, names, nil
}

// ErrNoRootDisk is wrapped by ChooseRootDisk when no disk qualifies.
var ErrNoRootDisk = errors.New("no suitable root device")

// ChooseRootDisk is IPA's get_os_install_device over a disk list: without
// hints the smallest disk of at least 4 GiB (ties by name), else the first
// disk in order that matches every hint. The error lists the disks seen.
func ChooseRootDisk(disks []Disk, h *RootDeviceHints) (Disk, error) {
	if h.IsEmpty() {
		sorted := slices.Clone(disks)
		sort.SliceStable(sorted, func(i, j int) bool {
			if sorted[i].Size != sorted[j].Size {
				return sorted[i].Size < sorted[j].Size
			}
			return sorted[i].Name < sorted[j].Name
		})
		for _, d := range sorted {
			if d.Size >= MinRootDiskSize {
				return d, nil
			}
		}
		return Disk{}, fmt.Errorf("%w: root device hints were not provided and no disk is at least %d bytes; disks seen: %s",
			ErrNoRootDisk, int64(MinRootDiskSize), describeDisks(disks))
	}
	for _, d := range disks {
		ok, err := h.Matches(d)
		if err != nil {
			return Disk{}, fmt.Errorf("%w: root device hints %s cannot be evaluated: %v; disks seen: %s",
				ErrNoRootDisk, h, err, describeDisks(disks))
		}
		if ok {
			return d, nil
		}
	}
	return Disk{}, fmt.Errorf("%w: no disk matches the root device hints %s; disks seen: %s",
		ErrNoRootDisk, h, describeDisks(disks))
}

func describeDisks(disks []Disk) string {
	if len(disks) == 0 {
		return "none"
	}
	parts := make([]string, len(disks))
	for i, d := range disks {
		s := fmt.Sprintf("%s (size %d = %.2f GiB, rotational %t", d.Name, d.Size, float64(d.Size)/(1<<30), d.Rotational)
		for _, a := range []struct {
			k string
			v *string
		}{{"model", d.Model}, {"vendor", d.Vendor}, {"serial", d.Serial}, {"wwn", d.WWN}, {"hctl", d.HCTL}, {"by_path", d.ByPath}, {"tran", d.Tran}} {
			if a.v != nil && *a.v != "" {
				s += fmt.Sprintf(", %s %q", a.k, *a.v)
			}
		}
		parts[i] = s + ")"
	}
	return strings.Join(parts, "; ")
}
