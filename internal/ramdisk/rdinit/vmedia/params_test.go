package vmedia

import (
	"crypto/ed25519"
	"crypto/rand"
	"maps"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/rescue"
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
		// The debug login's parameters hold blanks: quoted as on the
		// kernel's line, several keys in one value.
		{"quoted", `sshkey="ssh-ed25519 AAAAC3 op@desk ssh-rsa AAAAB3 b@desk" rootpwd="JDYkc2FsdA==" ipa-debug=1` + "\n" + `x="" y="v"`,
			map[string]string{"sshkey": "ssh-ed25519 AAAAC3 op@desk ssh-rsa AAAAB3 b@desk", "rootpwd": "JDYkc2FsdA==", "ipa-debug": "1", "x": "", "y": "v"}, nil},
		// IPA would cut these in two; they are said, not taken.
		{"bad quotes", "sshkey=\"ssh-ed25519 AAAA\nk=a\"b\"c \"q\"=v ok=1", map[string]string{"ok": "1"},
			[]string{`line 1: "sshkey=\"ssh-ed25519 AAAA": a double quote is not closed`, `line 2: "k=a\"b\"c": double quote inside a value`, `line 2: "\"q\"=v": double quote in the key`}},
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

// TestAppendParameters checks the merge the agent and the debug login
// read: the kernel's line without the keys the medium sets, then the
// medium's values, quoted where they hold blanks.
func TestAppendParameters(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " vmedia@desk"
	got := AppendParameters(`BOOT_IMAGE=/vmlinuz boot_method=vmedia ipa-debug=0 sshkey="ssh-rsa AAAAB3 kernel@desk" sshkey=x quiet`+"\n",
		map[string]string{"ipa-debug": "1", "ipa-api-url": "http://i:6385", "sshkey": key})
	if want := `BOOT_IMAGE=/vmlinuz boot_method=vmedia quiet ipa-api-url=http://i:6385 ipa-debug=1 sshkey="` + key + `"` + "\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if p := config.ParseCmdline(got); p["ipa-debug"] != "1" || p["ipa-api-url"] != "http://i:6385" || p["BOOT_IMAGE"] != "/vmlinuz" {
		t.Errorf("the agent reads %v", p)
	}
	login, errs := rescue.ParseBootLogin(got)
	if len(errs) != 0 || len(login.Keys) != 1 || login.Keys[0].Type() != "ssh-ed25519" {
		t.Errorf("the debug login reads %+v %v: want the medium's key only", login, errs)
	}
	if got := AppendParameters(`a=1 b="x y`, map[string]string{"a": "2"}); got != `a=2 b="x y`+"\n" {
		t.Errorf("an unclosed quote: %q", got)
	}
}

// FuzzParseParameters: any bytes parse without a panic; what is taken has
// a key without '=', white space or quotes and a value without quotes or
// line breaks, and merged after any command line the agent's parser reads
// those values.
func FuzzParseParameters(f *testing.F) {
	f.Add([]byte(ironicParameters))
	f.Add([]byte("a=1 b=x=y\r\n\tc= a=2\nnoequals\n=v\n"))
	f.Add([]byte("k=\xff\xfe\x00"))
	f.Add([]byte(`sshkey="ssh-ed25519 AAAA a@b" k="" q=""a"" "k"=v`))
	f.Fuzz(func(t *testing.T, b []byte) {
		params, problems := ParseParameters(b)
		for k, v := range params {
			if k == "" || strings.ContainsAny(k, "= \t\n\r\"") || strings.ContainsAny(v, "\t\n\r\"") {
				t.Fatalf("taken %q=%q", k, v)
			}
		}
		for _, p := range problems {
			if p.Line < 1 || p.Reason == "" {
				t.Fatalf("problem %+v", p)
			}
		}
		line := AppendParameters("BOOT_IMAGE=/vmlinuz boot_method=vmedia", params)
		got := config.ParseCmdline(line)
		want := map[string]string{"BOOT_IMAGE": "/vmlinuz", "boot_method": "vmedia"}
		maps.Copy(want, params)
		for k, v := range want {
			// The agent's parser splits at blanks, as IPA's does: a
			// value with blanks (the debug login's) is on the line in
			// quotes, for the parsers that read quotes.
			if strings.Contains(v, " ") {
				if !strings.Contains(line, " "+k+`="`+v+`"`) {
					t.Fatalf("%s=%q is not quoted whole on the merged line %q", k, v, line)
				}
			} else if g, ok := got[k]; !ok || g != v {
				t.Fatalf("merged line %q reads %s=%q, want %q", line, k, g, v)
			}
		}
	})
}
