package rescue

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironic-go/ironic-agent/internal/shacrypt"
)

// Two fixed keys (ssh-keygen's authorized_keys lines) and a SHA-512 crypt
// hash of "debug" (openssl passwd -6 -salt saltsalt debug).
const (
	keyA    = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEhFryPjMhCN7RhZCnD1paatI7f/MzQ4ED0dwPRymHLj operator@desk"
	keyB    = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN6KOFSHoNxzV0bHKnhz1cRJeUUCZfP4wTsd+ccGkdLl"
	rsaKey  = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDe7IuuNQKhtDzYcn0BAOgz+CFX/8mgafHzHBP3GUOO+f/VyzxXLianV8Co167OJrYnvyQb1HiECARbphm5uGGrV3CSl6DydT8PeE/AubN9IICOGSP74qy8haugvDwR8/T7ui9eNROc9gv2v4P24I48BQGv6Q0KeCUUWKZWYllNsQ== rsa"
	hashSix = "$6$saltsalt$HezqP5e51Op6PjlorkX3PZC2yApIvT0AyOgpEaKmlpsiQ1x.4LBSH7F8lOkUvDeu691xt.ysEpIrGAUgJAPnm1"
)

func TestParseBootLogin(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(hashSix + "\n"))
	for _, tc := range []struct {
		name, cmdline string
		keys          int
		password      bool
		errs          []string // substrings, one an error
	}{
		{"none", "console=ttyS0 BOOTIF=01-52-54-00-12-34-56", 0, false, nil},
		{"key", `console=ttyS0 sshkey="` + keyA + `" quiet`, 1, false, nil},
		{"key first", `sshkey="` + keyA + `"`, 1, false, nil},
		{"two lines", "sshkey=\"" + keyA + "\n" + keyB + "\"", 2, false, nil},
		{"two on a line", `sshkey="` + keyA + " " + keyB + " " + rsaKey + `"`, 3, false, nil},
		{"two parameters", `sshkey="` + keyA + `" x=1 sshkey="` + keyB + `"`, 2, false, nil},
		{"duplicate", `sshkey="` + keyA + `" sshkey="` + keyA + `"`, 1, false, nil},
		{"hash", `rootpwd="` + hashSix + `"`, 0, true, nil},
		{"hash unquoted", `a rootpwd=` + hashSix + ` b`, 0, true, nil},
		{"base64 hash", `rootpwd="` + b64 + `"`, 0, true, nil},
		{"both", `rootpwd=` + b64 + ` sshkey="` + keyA + `"`, 1, true, nil},
		{"not a word start", `xsshkey="` + keyA + `" myrootpwd=` + hashSix, 0, false, nil},
		{"unquoted key", `sshkey=` + keyA, 0, false, []string{"must be quoted"}},
		{"bad blob", `sshkey="ssh-ed25519 AAAA!!!"`, 0, false, []string{"not base64"}},
		{"wrong type", `sshkey="ssh-rsa ` + strings.Fields(keyA)[1] + `"`, 0, false, []string{"the line says ssh-rsa but the key is ssh-ed25519"}},
		{"no type", `sshkey="hello world"`, 0, false, []string{`"hello" is no SSH key type`}},
		{"options", `sshkey="no-pty,x=y ` + keyA + `"`, 0, false, []string{"options"}},
		{"empty key", `sshkey=""`, 0, false, []string{"no key in the value"}},
		{"one bad shuts SSH", `sshkey="` + keyA + `" sshkey="ssh-ed25519 AAAA"`, 0, false, []string{"occurrence 2"}},
		{"bad key keeps the console", `sshkey="nope" rootpwd=` + hashSix, 0, true, []string{"no SSH login"}},
		{"yescrypt", `rootpwd="$y$j9T$abc$def" sshkey="` + keyA + `"`, 1, false, []string{"yescrypt ($y$) hash: only SHA-crypt"}},
		{"md5", `rootpwd=$1$salt$hash`, 0, false, []string{"MD5-crypt"}},
		{"des", `rootpwd=` + base64.StdEncoding.EncodeToString([]byte("abJnggxhB/yWI")), 0, false, []string{"DES"}},
		{"not base64", `rootpwd=hunter2!`, 0, false, []string{"nor base64"}},
		{"twice", `rootpwd=` + hashSix + ` rootpwd=` + b64, 0, false, []string{"2 times"}},
		{"bad sha", `rootpwd=$6$rounds=x$salt$hash`, 0, false, []string{"not a SHA-crypt hash"}},
		{"empty", `rootpwd=`, 0, false, []string{"empty value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, errs := ParseBootLogin(tc.cmdline)
			if len(b.Keys) != tc.keys || (b.Password != nil) != tc.password {
				t.Errorf("%d keys, password %v; want %d, %v (errors %v)", len(b.Keys), b.Password != nil, tc.keys, tc.password, errs)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("errors %q; want %d holding %q", errs, len(tc.errs), tc.errs)
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tc.errs[i]) {
					t.Errorf("error %q; want it to hold %q", e, tc.errs[i])
				}
			}
			asked := strings.Contains(" "+tc.cmdline, " sshkey=") || strings.Contains(" "+tc.cmdline, " rootpwd=")
			if BootLoginAsked(tc.cmdline) != asked {
				t.Errorf("BootLoginAsked = %v; want %v", !asked, asked)
			}
		})
	}
	b, _ := ParseBootLogin(`rootpwd="` + hashSix + `"`)
	if !b.Password.Verify([]byte("debug")) {
		t.Error("rootpwd's hash does not verify its password")
	}
	b, _ = ParseBootLogin(`sshkey="` + keyA + " " + keyB + `"`)
	if got := string(ssh.MarshalAuthorizedKey(b.Keys[1])); !strings.HasPrefix(got, keyB) {
		t.Errorf("second key %q; want %q", got, keyB)
	}
}

// FuzzParseBootLogin: no panic on any command line; what parses is
// consistent (keys only with no error about sshkey, a password only with
// none about rootpwd), and BootLoginAsked is true whenever anything parsed.
func FuzzParseBootLogin(f *testing.F) {
	f.Add(`console=ttyS0 sshkey="` + keyA + `" rootpwd=` + hashSix)
	f.Add(`sshkey="` + keyA + " " + rsaKey + "\n" + keyB + `"`)
	f.Add(`rootpwd="` + base64.StdEncoding.EncodeToString([]byte(hashSix)) + `"`)
	f.Add(`sshkey="ssh-ed25519`)
	f.Add(`rootpwd=$y$j9T$a$b sshkey=""`)
	f.Fuzz(func(t *testing.T, cmdline string) {
		b, errs := ParseBootLogin(cmdline)
		for _, e := range errs {
			if e.Error() == "" {
				t.Fatal("an empty error")
			}
			if strings.HasPrefix(e.Error(), ParamSSHKey+"=") && len(b.Keys) > 0 {
				t.Fatalf("keys %d despite %v", len(b.Keys), e)
			}
			if strings.HasPrefix(e.Error(), ParamRootPassword+"=") && b.Password != nil {
				t.Fatalf("a password despite %v", e)
			}
		}
		if (!b.Empty() || len(errs) > 0) && !BootLoginAsked(cmdline) {
			t.Fatalf("parsed %+v, %v but BootLoginAsked is false", b, errs)
		}
		if b.Password != nil && b.Password.Rounds <= 20000 {
			b.Password.Verify([]byte("x"))
		}
	})
}

// TestServeKeysOnly: a debug-login Serve (keys, and a password for the
// consoles only) takes the authorized key over SSH, refuses another key
// and refuses the password.
func TestServeKeysOnly(t *testing.T) {
	_, good, _ := ed25519.GenerateKey(rand.Reader)
	_, bad, _ := ed25519.GenerateKey(rand.Reader)
	goodSigner, _ := ssh.NewSignerFromKey(good)
	badSigner, _ := ssh.NewSignerFromKey(bad)
	h, err := shacrypt.New(shacrypt.SHA512, []byte(testPassword), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOn(t, Config{Name: DebugName, User: DebugUser, Password: h, ConsolePasswordOnly: true,
		AuthorizedKeys: []ssh.PublicKey{goodSigner.PublicKey()}})
	dialWith := func(user string, auth ssh.AuthMethod) (*ssh.Client, error) {
		return ssh.Dial("tcp", addr, &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{auth},
			HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
	}
	c, err := dialWith("root", ssh.PublicKeys(goodSigner))
	if err != nil {
		t.Fatalf("the authorized key: %v", err)
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.CombinedOutput("echo KEY-$((6*7)) $USER")
	c.Close()
	if err != nil || strings.TrimSpace(string(out)) != "KEY-42 root" {
		t.Errorf("command: %q, %v", out, err)
	}
	for _, tc := range []struct {
		what, user string
		auth       ssh.AuthMethod
	}{
		{"another key", "root", ssh.PublicKeys(badSigner)},
		{"the key for another user", "rescue", ssh.PublicKeys(goodSigner)},
		{"the console's password", "root", ssh.Password(testPassword)},
	} {
		if c, err := dialWith(tc.user, tc.auth); err == nil {
			c.Close()
			t.Errorf("%s logged in", tc.what)
		}
	}
}

// TestParseAuthorizedKeys: an authorized_keys file's keys, comments and
// empty lines skipped, added after sshkey='s without duplicates; a bad
// line takes none and says which.
func TestParseAuthorizedKeys(t *testing.T) {
	keys, err := ParseAuthorizedKeys([]byte("# site keys\n" + keyA + "\n\n" + rsaKey + "\n"))
	if err != nil || len(keys) != 2 || keys[1].Type() != ssh.KeyAlgoRSA {
		t.Fatalf("keys %v, error %v", keys, err)
	}
	b, errs := ParseBootLogin(`sshkey="` + keyA + `"`)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	b.AddKeys(keys)
	if len(b.Keys) != 2 {
		t.Errorf("sshkey= and the file: %d keys, want 2 (keyA once)", len(b.Keys))
	}
	for in, want := range map[string]string{
		keyA + "\nssh-ed25519\n":     "line 2",
		`command="x" ` + keyB + "\n": "authorized_keys options",
		"# nothing\n":                "no key",
	} {
		if keys, err := ParseAuthorizedKeys([]byte(in)); err == nil || !strings.Contains(err.Error(), want) || keys != nil {
			t.Errorf("%q: %v %v, want an error saying %q", in, keys, err, want)
		}
	}
}
