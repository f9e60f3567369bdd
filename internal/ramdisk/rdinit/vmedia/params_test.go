package vmedia

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/config"
)

// ironicParameters is parameters.txt as Ironic 21.4's create_vfat_image
// writes it for a redfish-virtual-media boot with config_via_removable.
const ironicParameters = "ipa-api-url=http://10.99.0.1:6385\n" +
	"ipa-agent-token=Aw3Qh-t0k3n\n" +
	"BOOTIF=52:54:00:6d:33:01\n" +
	"ipa-debug=1\n" +
	"boot_method=vmedia"

func TestParseParameters(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		want     map[string]string
		problems []string
	}{
		{"ironic", ironicParameters, map[string]string{"ipa-api-url": "http://10.99.0.1:6385", "ipa-agent-token": "Aw3Qh-t0k3n",
			"BOOTIF": "52:54:00:6d:33:01", "ipa-debug": "1", "boot_method": "vmedia"}, nil},
		// IPA splits on any white space, at the first '=', later wins.
		{"white space", "a=1 b=x=y\r\n\tc= a=2\n", map[string]string{"a": "2", "b": "x=y", "c": ""}, nil},
		{"malformed", "ipa-debug=1\nnoequals\n=v\nk=\x01\n", map[string]string{"ipa-debug": "1"},
			[]string{`line 2: "noequals": no '='`, `line 3: "=v": empty key`, `line 4: "k=\x01": control character`}},
		{"not text", "k=\xff\xfe", map[string]string{}, []string{`line 1: "k=\xff\xfe": control character or invalid UTF-8`}},
		{"empty", "", map[string]string{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := ParseParameters([]byte(tc.in))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if len(problems) != len(tc.problems) {
				t.Fatalf("problems %v, want %d like %q", problems, len(tc.problems), tc.problems)
			}
			for i, p := range problems {
				if !strings.HasPrefix(p.String(), tc.problems[i]) {
					t.Errorf("problem %q, want it to start %q", p, tc.problems[i])
				}
			}
		})
	}
}

// TestAppendParameters checks the merge the agent reads: the kernel's line
// whole, then the medium's values, which win in the agent's parser.
func TestAppendParameters(t *testing.T) {
	got := AppendParameters("BOOT_IMAGE=/vmlinuz boot_method=vmedia ipa-debug=0 quiet\n", map[string]string{"ipa-debug": "1", "ipa-api-url": "http://i:6385"})
	if want := "BOOT_IMAGE=/vmlinuz boot_method=vmedia ipa-debug=0 quiet ipa-api-url=http://i:6385 ipa-debug=1\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if p := config.ParseCmdline(got); p["ipa-debug"] != "1" || p["ipa-api-url"] != "http://i:6385" || p["BOOT_IMAGE"] != "/vmlinuz" {
		t.Errorf("the agent reads %v", p)
	}
}

// FuzzParseParameters: any bytes parse without a panic; what is taken has
// a key without '=' or white space and a value without white space, and
// merged after any command line the agent's parser reads those values.
func FuzzParseParameters(f *testing.F) {
	f.Add([]byte(ironicParameters))
	f.Add([]byte("a=1 b=x=y\r\n\tc= a=2\nnoequals\n=v\n"))
	f.Add([]byte("k=\xff\xfe\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		params, problems := ParseParameters(b)
		for k, v := range params {
			if k == "" || strings.ContainsAny(k, "= \t\n\r") || strings.ContainsAny(v, " \t\n\r") {
				t.Fatalf("taken %q=%q", k, v)
			}
		}
		for _, p := range problems {
			if p.Line < 1 || p.Reason == "" {
				t.Fatalf("problem %+v", p)
			}
		}
		got := config.ParseCmdline(AppendParameters("BOOT_IMAGE=/vmlinuz boot_method=vmedia", params))
		want := map[string]string{"BOOT_IMAGE": "/vmlinuz", "boot_method": "vmedia"}
		maps.Copy(want, params)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("merged line reads %v, want %v", got, want)
		}
	})
}
