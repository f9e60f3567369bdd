package hints

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
)

// Vectors from IPA's tests/unit/test_device_hints.py.
func TestParseRootDeviceHintsIPAVectors(t *testing.T) {
	cases := []struct {
		name string
		in   map[string]any
		want map[string]any
	}{
		{"without operators", map[string]any{
			"wwn": "123456", "model": "FOO model", "size": 12345,
			"serial": "foo-serial", "vendor": "foo VENDOR with space",
			"name": "/dev/sda", "wwn_with_extension": "123456111",
			"wwn_vendor_extension": "111", "rotational": true,
			"hctl": "1:0:0:0", "by_path": "/dev/disk/by-path/1:0:0:0"},
			map[string]any{
				"wwn": "s== 123456", "model": "s== foo%20model",
				"size": "== 12345", "serial": "s== foo-serial",
				"vendor": "s== foo%20vendor%20with%20space",
				"name":   "s== /dev/sda", "wwn_with_extension": "s== 123456111",
				"wwn_vendor_extension": "s== 111", "rotational": true,
				"hctl":    "s== 1%3A0%3A0%3A0",
				"by_path": "s== /dev/disk/by-path/1%3A0%3A0%3A0"}},
		{"with operators", map[string]any{
			"wwn": "s== 123456", "model": "s== foo MODEL", "size": ">= 12345",
			"serial": "s!= foo-serial", "vendor": "s== foo VENDOR with space",
			"name":                 "<or> /dev/sda <or> /dev/sdb",
			"wwn_with_extension":   "s!= 123456111",
			"wwn_vendor_extension": "s== 111", "rotational": true,
			"hctl": "s== 1:0:0:0", "by_path": "s== /dev/disk/by-path/1:0:0:0"},
			map[string]any{
				"wwn": "s== 123456", "model": "s== foo%20model", "size": ">= 12345",
				"serial": "s!= foo-serial", "vendor": "s== foo%20vendor%20with%20space",
				"name":                 "<or> /dev/sda <or> /dev/sdb",
				"wwn_with_extension":   "s!= 123456111",
				"wwn_vendor_extension": "s== 111", "rotational": true,
				"hctl": "s== 1%3A0%3A0%3A0", "by_path": "s== /dev/disk/by-path/1%3A0%3A0%3A0"}},
		{"string compare name", map[string]any{"name": "s== /dev/sdb"}, map[string]any{"name": "s== /dev/sdb"}},
		{"no hints", map[string]any{}, map[string]any{}},
		{"size int", map[string]any{"size": 12345}, map[string]any{"size": "== 12345"}},
		{"size float64 from JSON", map[string]any{"size": float64(12345)}, map[string]any{"size": "== 12345"}},
		{"size string", map[string]any{"size": "12345"}, map[string]any{"size": "== 12345"}},
		{"size json.Number", map[string]any{"size": json.Number("12345")}, map[string]any{"size": "== 12345"}},
		{"int or", map[string]any{"size": "<or> 123 <or> 456 <or> 789"}, map[string]any{"size": "<or> 123 <or> 456 <or> 789"}},
		{"string or space", map[string]any{"model": "<or> foo <or> foo bar <or> bar"}, map[string]any{"model": "<or> foo <or> foo%20bar <or> bar"}},
		{"in", map[string]any{"model": "<in> foo <in> foo bar <in> bar"}, map[string]any{"model": "<in> foo <in> foo%20bar <in> bar"}},
		{"op space", map[string]any{"model": "s== test string with space"}, map[string]any{"model": "s== test%20string%20with%20space"}},
		{"op no space", map[string]any{"model": "s!= SpongeBob"}, map[string]any{"model": "s!= spongebob"}},
		{"no op space", map[string]any{"model": "no operators"}, map[string]any{"model": "s== no%20operators"}},
		{"no op no space", map[string]any{"model": "NoSpace"}, map[string]any{"model": "s== nospace"}},
		{"tran", map[string]any{"tran": "NVMe"}, map[string]any{"tran": "s== nvme"}},
	}
	for _, b := range []any{true, "true", "on", "y", "yes", "1", 1.0} {
		cases = append(cases, struct {
			name string
			in   map[string]any
			want map[string]any
		}{"rotational true", map[string]any{"rotational": b}, map[string]any{"rotational": true}})
	}
	for _, b := range []any{false, "false", "off", "n", "no", "0"} {
		cases = append(cases, struct {
			name string
			in   map[string]any
			want map[string]any
		}{"rotational false", map[string]any{"rotational": b}, map[string]any{"rotational": false}})
	}
	for _, c := range cases {
		h, err := ParseRootDeviceHints(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := h.Normalized(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseRootDeviceHintsInvalid(t *testing.T) {
	cases := []map[string]any{
		{"size": "not-int"}, {"size": -123}, {"size": 0}, {"size": "<or> 123 <or> non-int <or> 789"},
		{"size": "10.5"}, {"size": true}, {"size": ""}, {"size": "<range-in> [ 10 20 ]"},
		{"rotational": "not-bool"}, {"rotational": nil},
		{"wwn": 123}, {"wwn_with_extension": 123}, {"wwn_vendor_extension": 123},
		{"model": 123}, {"serial": 123}, {"vendor": 123}, {"name": 123}, {"hctl": 123},
		{"by_path": 123}, {"model": nil}, {"model": ""}, {"model": "   "},
		{"non-existent": "foo"}, {"model": "=="},
	}
	for _, c := range cases {
		if _, err := ParseRootDeviceHints(c); err == nil {
			t.Errorf("%v: no error", c)
		}
	}
	_, err := ParseRootDeviceHints(map[string]any{"colour": "red"})
	if err == nil || !strings.Contains(err.Error(), `"colour"`) || !strings.Contains(err.Error(), "by_path") {
		t.Errorf("unknown hint error does not name it and the valid hints: %v", err)
	}
}

func TestExtractHintOperatorAndValues(t *testing.T) {
	for _, c := range []struct {
		in     string
		op     string
		values []string
	}{
		{">= 123", ">=", []string{"123"}},
		{"<or> 123 <or> 456 <or> 789", "<or>", []string{"123", "456", "789"}},
		{"<or> foo <or> foo bar <or> bar", "<or>", []string{"foo", "foo bar", "bar"}},
		{"123", "", []string{"123"}},
		{"<or> model 5 <or> foomodel <or> small model <or>", "<or>", []string{"model 5", "foomodel", "small model"}},
	} {
		op, values, err := extractHintOperatorAndValues(c.in, "x")
		if err != nil || op != c.op || !reflect.DeepEqual(values, c.values) {
			t.Errorf("%q: got %q %q %v, want %q %q", c.in, op, values, err, c.op, c.values)
		}
	}
	if _, _, err := extractHintOperatorAndValues("", "size"); err == nil {
		t.Error("empty expression accepted")
	}
}

func sp(s string) *string { return &s }

// The device set of IPA's MatchRootDeviceTestCase.
func ipaDevices() []Disk {
	return []Disk{
		{Disk: inventory.Disk{Name: "/dev/sda", Size: 64424509440, Model: sp("ok model")},
			Serials: []*string{sp("fakeserial")}, WWNs: []*string{sp("wwn_1")}},
		{Disk: inventory.Disk{Name: "/dev/sdb", Size: 128849018880, Model: sp("big model"), Rotational: true},
			Serials: []*string{sp("veryfakeserial"), sp("alsoveryfakeserial")}, WWNs: []*string{sp("wwn_2"), sp("wwn_2_ext")}},
		{Disk: inventory.Disk{Name: "/dev/sdc", Size: 10737418240, Model: sp("small model")},
			Serials: []*string{sp("veryveryfakeserial")}, WWNs: []*string{sp("wwn_3")}},
	}
}

func TestMatchRootDeviceHintsIPAVectors(t *testing.T) {
	for _, c := range []struct {
		hints map[string]any
		want  []string
	}{
		{map[string]any{"size": ">= 70"}, []string{"/dev/sdb"}},
		{map[string]any{"rotational": false}, []string{"/dev/sda", "/dev/sdc"}},
		{map[string]any{"size": ">=100", "rotational": true}, []string{"/dev/sdb"}},
		{map[string]any{"size": ">= 50", "model": "s==big model", "serial": "s==veryfakeserial"}, []string{"/dev/sdb"}},
		{map[string]any{"size": "<= 20", "model": "<or> model 5 <or> foomodel <or> small model <or>", "serial": "s== veryveryfakeserial"}, []string{"/dev/sdc"}},
		{map[string]any{"rotational": false, "model": "<in> small"}, []string{"/dev/sdc"}},
		{map[string]any{"wwn": "wwn_2_ext"}, []string{"/dev/sdb"}},
		{map[string]any{"size": "120", "model": "big model", "serial": "veryfakeserial"}, []string{"/dev/sdb"}},
		{map[string]any{"size": ">=50", "model": "s==foo"}, nil},
		{map[string]any{"size": ">= 10"}, []string{"/dev/sda", "/dev/sdb", "/dev/sdc"}},
		{map[string]any{"size": ">= 100500"}, nil},
		{map[string]any{"name": "s== /dev/sda"}, []string{"/dev/sda"}},
		{map[string]any{"serial": "s== fakeserial"}, []string{"/dev/sda"}},
		{map[string]any{"serial": "s== alsoveryfakeserial"}, []string{"/dev/sdb"}},
		{map[string]any{"wwn": "s== wwn_1"}, []string{"/dev/sda"}},
		{map[string]any{"wwn": "s== wwn_2"}, []string{"/dev/sdb"}},
		// Beyond IPA's own vectors: case, quoting, numeric operators.
		{map[string]any{"model": "BIG MODEL"}, []string{"/dev/sdb"}},
		{map[string]any{"name": "<or> /dev/sdc <or> /dev/sda"}, []string{"/dev/sda", "/dev/sdc"}},
		{map[string]any{"size": "< 60"}, []string{"/dev/sdc"}},
		{map[string]any{"size": "= 60"}, []string{"/dev/sda", "/dev/sdb"}},
		{map[string]any{"size": "!= 60"}, []string{"/dev/sdb", "/dev/sdc"}},
		{map[string]any{"size": 60}, []string{"/dev/sda"}},
		{map[string]any{"model": "s> c"}, []string{"/dev/sda", "/dev/sdc"}},
		{map[string]any{"vendor": "none"}, []string{"/dev/sda", "/dev/sdb", "/dev/sdc"}},
		// A float size never equals a string: <or> on size matches nothing in IPA.
		{map[string]any{"size": "<or> 60 <or> 120"}, nil},
	} {
		h, err := ParseRootDeviceHints(c.hints)
		if err != nil {
			t.Errorf("%v: %v", c.hints, err)
			continue
		}
		found, err := FindDisksByHints(ipaDevices(), h)
		if err != nil {
			t.Errorf("%v: %v", c.hints, err)
			continue
		}
		var names []string
		for _, d := range found {
			names = append(names, d.Name)
		}
		if !reflect.DeepEqual(names, c.want) {
			t.Errorf("%v: got %v, want %v", c.hints, names, c.want)
		}
	}
}

func TestMatchEdgeCases(t *testing.T) {
	empty := []Disk{{Disk: inventory.Disk{Name: "/dev/sda", Model: sp(" ")}}}
	h, _ := ParseRootDeviceHints(map[string]any{"model": "foo"})
	if got, err := FindDisksByHints(empty, h); err != nil || len(got) != 0 {
		t.Errorf("empty model attribute matched: %v %v", got, err)
	}
	// A 10 GiB + 1 byte disk is not == 10.
	d := Disks([]inventory.Disk{{Name: "/dev/x", Size: 10<<30 + 1}})
	h, _ = ParseRootDeviceHints(map[string]any{"size": 10})
	if ok, _ := h.Matches(d[0]); ok {
		t.Error("10 GiB + 1 byte matched size == 10")
	}
	// Null serial list never matches, not even "none".
	h, _ = ParseRootDeviceHints(map[string]any{"serial": "none"})
	if ok, _ := h.Matches(d[0]); ok {
		t.Error("null serial matched none")
	}
	// <in> on size is an error in IPA (float is not iterable).
	h, _ = ParseRootDeviceHints(map[string]any{"size": "<in> 10"})
	if _, err := h.Matches(d[0]); err == nil {
		t.Error("<in> on size: no error")
	}
	// Numeric operator on a non-numeric string attribute is an error.
	h, _ = ParseRootDeviceHints(map[string]any{"model": "> 5"})
	if _, err := h.Matches(Disks([]inventory.Disk{{Name: "/dev/x", Model: sp("abc")}})[0]); err == nil {
		t.Error("> on a text model: no error")
	}
	// ...and works when the attribute is a number.
	if ok, err := h.Matches(Disks([]inventory.Disk{{Name: "/dev/x", Model: sp("10")}})[0]); !ok || err != nil {
		t.Errorf("> 5 on model 10: %v %v", ok, err)
	}
}

func TestChooseRootDisk(t *testing.T) {
	disks := Disks([]inventory.Disk{
		{Name: "/dev/sdc", Size: 8 << 30},
		{Name: "/dev/sdb", Size: 8 << 30},
		{Name: "/dev/sda", Size: 2 << 30},
		{Name: "/dev/sdd", Size: 100 << 30},
	})
	d, err := ChooseRootDisk(disks, nil)
	if err != nil || d.Name != "/dev/sdb" {
		t.Errorf("default choice: %v %v, want /dev/sdb (smallest >= 4 GiB, ties by name)", d.Name, err)
	}
	h, _ := ParseRootDeviceHints(map[string]any{"size": "> 50"})
	if d, err := ChooseRootDisk(disks, h); err != nil || d.Name != "/dev/sdd" {
		t.Errorf("hinted choice: %v %v", d.Name, err)
	}
	h, _ = ParseRootDeviceHints(map[string]any{"serial": "nope"})
	_, err = ChooseRootDisk(disks, h)
	if !errors.Is(err, ErrNoRootDisk) || !strings.Contains(err.Error(), "/dev/sdd (size 107374182400") || !strings.Contains(err.Error(), `"serial":"nope"`) {
		t.Errorf("no-match error does not list hints and disks: %v", err)
	}
	_, err = ChooseRootDisk(Disks([]inventory.Disk{{Name: "/dev/tiny", Size: 1 << 30}}), nil)
	if !errors.Is(err, ErrNoRootDisk) || !strings.Contains(err.Error(), "/dev/tiny") {
		t.Errorf("too-small error: %v", err)
	}
	if _, err := ChooseRootDisk(nil, nil); !errors.Is(err, ErrNoRootDisk) || !strings.Contains(err.Error(), "disks seen: none") {
		t.Errorf("no disks: %v", err)
	}
}

func TestSkipBlockDevices(t *testing.T) {
	disks := ipaDevices()
	kept, skipped, err := SkipBlockDevices(disks, []map[string]any{
		{"name": "/dev/sda"}, {"volume_name": "md0"}, {"wwn": "wwn_2_ext"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0].Name != "/dev/sdc" || !reflect.DeepEqual(skipped, []string{"/dev/sda", "/dev/sdb"}) {
		t.Errorf("kept %v skipped %v", kept, skipped)
	}
	if _, _, err := SkipBlockDevices(disks, []map[string]any{{"bogus": 1}}); err == nil {
		t.Error("invalid skip entry accepted")
	}
}

func TestURLQuote(t *testing.T) {
	for in, want := range map[string]string{
		"a b":        "a%20b",
		"1:0:0:0":    "1%3A0%3A0%3A0",
		"/dev/sda":   "/dev/sda",
		"a_b.c-d~e":  "a_b.c-d~e",
		"ü":          "%C3%BC",
		"[x]":        "%5Bx%5D",
		"50%":        "50%25",
		"foo+bar&=?": "foo%2Bbar%26%3D%3F",
	} {
		if got := urlQuote(in); got != want {
			t.Errorf("urlQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSpecMatch(t *testing.T) {
	str := func(s string) specValue { return specValue{str: s} }
	num := func(f float64) specValue { return specValue{isNum: true, num: f} }
	for _, c := range []struct {
		v    specValue
		spec string
		want bool
		err  bool
	}{
		{num(10), "= 10", true, false},
		{num(11), "= 10", true, false},
		{num(9), "= 10", false, false},
		{num(10), ">=10", true, false},
		{num(10), "<range-in> [ 10 20 ]", false, true},
		{str("15"), "<range-in> [ 10 20 ]", true, false},
		{str("20"), "<range-in> ( 10 20 )", false, false},
		{str("0x10"), "<range-in> [ 10 20 ]", true, false},
		{str("1_5"), "<range-in> [ 10 20 ]", true, false},
		{str("x"), "<range-in> [ 10 20 ]", false, true},
		{str("15"), "<range-in> [ 20 10 ]", false, true},
		{str("abc"), "<all-in> a", false, true},
		{str("abc"), "s== abc", true, false},
		{str("abc"), "abc", true, false},
		{str("abc"), "abc def", true, false}, // the parse stops at the first atom
		{str("1e1"), "== 10", true, false},
		{str(" 10 "), "== 10", true, false},
		{str("0x10"), "== 16", false, true},
		{str("inf"), "> 1e308", true, false},
		{num(5), "s== 5", false, false},
		{num(5), "s!= 5", true, false},
		{num(5), "s< 5", false, true},
	} {
		got, err := specMatch(c.v, c.spec)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("specMatch(%v, %q) = %v, %v; want %v, error %v", c.v, c.spec, got, err, c.want, c.err)
		}
	}
}
