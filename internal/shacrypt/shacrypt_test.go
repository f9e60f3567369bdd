package shacrypt

import (
	"bytes"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"os/exec"
	"strings"
	"testing"
)

// golden were written by glibc 2.36's crypt (Python 3.11's crypt module on
// Debian 12) and, for the last two, OpenSSL 3.0's `openssl passwd`.
var golden = []struct{ password, hash string }{
	{"Hello world!", "$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5"},
	{"Hello world!", "$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1"},
	{"Hello world!", "$5$rounds=10000$saltstringsaltst$3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA"},
	{"a very much longer text to encrypt.  This one even stretches over morethan one line.", "$6$rounds=1000$toolongsaltstrin$uUoPCVs4MbmkLqPR9Zjq9d2xIEsKhIxxOMolJjDvb/MrASr6BCNhSKjZ1p/Mb2UxYCMwvCIkXErgwL61HTZ.R."},
	{"", "$6$$/chiBau24cE26QQVW3IfIe68Xu5.JQ4E8Ie7lcRLwqxO5cxGuBhqF2HmTL.zWJ9zjChg3yJYFXeGBQ2y3Ba1d1"},
	{"", "$5$x$yHbtfs4Y8t6X1xcJemNX.4JQRfUTafA2qQenWGLBee2"},
	{"we have a short salt string but not a short password", "$6$rounds=1400$anotherlongsalts$AP.vbZcNbWD30OfPAcUJe702LINHtb7RqILoLW9vJ/DHPMJyr6a.5rQHcOzBXuDOEzAqm8/9xW6EF/z3vOBQp0"},
	{"we have a short salt string but not a short password", "$5$rounds=77777$short$JiO1O3ZpDAxGJeaDIuqCoEFysAe1mZNJRs3pw0KQRd/"},
	{strings.Repeat("pässwörd with ütf-8 ", 5), "$6$Qx.f/3z9$jUoHtsd6nrbGijt2FfkXedfhDGsrC5bX2UesckgHTBjl4yZBsrbnzY1MpGoWBAzEAALqooZ8MHkEve/YlInwf/"},
	{"secret", "$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG."},
	{"secret", "$5$abcdefgh$gruCpC7VkOTspMQTTSAR8mtlO9Upms.fwqE5y16JVM."},
}

func TestGolden(t *testing.T) {
	for _, g := range golden {
		h, err := Parse(g.hash)
		if err != nil {
			t.Fatalf("Parse(%q): %v", g.hash, err)
		}
		if got := h.String(); got != g.hash {
			t.Errorf("String() = %q, want %q", got, g.hash)
		}
		if !h.Verify([]byte(g.password)) {
			t.Errorf("%q does not verify against %q", g.password, g.hash)
		}
		if h.Verify([]byte(g.password + "x")) {
			t.Errorf("%q+x verifies against %q", g.password, g.hash)
		}
	}
}

func TestNew(t *testing.T) {
	for _, alg := range []Algorithm{SHA256, SHA512} {
		h, err := New(alg, []byte("p4ss"), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(h.String())
		if err != nil {
			t.Fatalf("Parse(New) %q: %v", h, err)
		}
		if !again.Verify([]byte("p4ss")) || again.Verify([]byte("p4s")) || len(again.Salt) != MaxSaltLen {
			t.Errorf("%v: %q", alg, h)
		}
	}
	if _, err := New(SHA256, nil, bytes.NewReader(nil)); err == nil {
		t.Error("New with an empty random source succeeded")
	}
}

func TestParseRefuses(t *testing.T) {
	sum86 := strings.Repeat("a", 86)
	for _, s := range []string{
		"", "$1$salt$hash", "$y$j9T$salt$hash", "$2b$10$abc", "plaintext",
		"$6$salt", // no hash
		"$6$salt$" + sum86[:85],
		"$6$salt$" + sum86 + "a",
		"$5$salt$" + sum86[:42] + "!",
		"$6$rounds=999$salt$" + sum86,
		"$6$rounds=1000000000$salt$" + sum86,
		"$6$rounds=+5000$salt$" + sum86,
		"$6$rounds=$salt$" + sum86,
		"$6$rounds=5000", // no '$' after the number
		"$6$0123456789abcdefX$" + sum86,
		"$6$sa:lt$" + sum86,
	} {
		if h, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", s, h)
		}
	}
}

// TestAgreesWithOpenSSL hashes random passwords with random salts through
// `openssl passwd -5/-6` (Debian's openssl) and checks each verifies here.
func TestAgreesWithOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("SKIPPED: needs openssl (Debian package openssl) as the oracle")
	}
	r := mrand.New(mrand.NewPCG(1, 2))
	const printable = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 !#%&()*+,-./;<=>?@[]^_{|}~"
	word := func(n int, from string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = from[r.IntN(len(from))]
		}
		return string(b)
	}
	for i := range 40 {
		alg := []Algorithm{SHA256, SHA512}[i%2]
		pw := word(r.IntN(140), printable)
		salt := word(1+r.IntN(MaxSaltLen), alphabet)
		cmd := exec.Command("openssl", "passwd", fmt.Sprintf("-%d", int(alg)), "-salt", salt, "-stdin")
		cmd.Stdin = strings.NewReader(pw + "\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("openssl passwd: %v", err)
		}
		s := strings.TrimSpace(string(out))
		h, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(openssl's %q): %v", s, err)
		}
		if !h.Verify([]byte(pw)) {
			t.Errorf("openssl's %q does not verify password %q", s, pw)
		}
	}
}

// TestAgreesWithPythonCrypt checks hashes with rounds= (which openssl
// cannot write) against glibc's crypt through Python's crypt module,
// where the Python has it (removed in 3.13).
func TestAgreesWithPythonCrypt(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIPPED: needs python3 with the crypt module as the oracle")
	}
	script := `import sys, warnings
warnings.simplefilter("ignore")
import crypt
for line in sys.stdin.read().splitlines():
    salt, pw = line.split(" ", 1)
    print(crypt.crypt(pw, salt))`
	var in strings.Builder
	var pws []string
	for i, rounds := range []int{1000, 1001, 4999, 5000, 5001, 12345} {
		pw := strings.Repeat("pw", i*7) + fmt.Sprint(rounds)
		pws = append(pws, pw, pw)
		fmt.Fprintf(&in, "$5$rounds=%d$salt%d %s\n$6$rounds=%d$salt%d %s\n", rounds, i, pw, rounds, i, pw)
	}
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("SKIPPED: python3's crypt module: %v", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(pws) {
		t.Fatalf("python3 wrote %d hashes, want %d: %s", len(lines), len(pws), out)
	}
	for i, s := range lines {
		h, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(glibc's %q): %v", s, err)
		}
		if !h.Verify([]byte(pws[i])) {
			t.Errorf("glibc's %q does not verify %q", s, pws[i])
		}
	}
}

// FuzzParse: no panic on any string, and whatever parses prints back as
// itself and verifies without panicking.
func FuzzParse(f *testing.F) {
	for _, g := range golden {
		f.Add(g.hash, g.password)
	}
	f.Add("$6$rounds=1000$$"+strings.Repeat("/", 86), "")
	f.Add("$5$rounds=5000", "x")
	f.Fuzz(func(t *testing.T, s, pw string) {
		h, err := Parse(s)
		if err != nil {
			return
		}
		if h.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, h.String())
		}
		if h.Rounds > 20000 {
			return // correct but slow; the golden tests cover rounds
		}
		h.Verify([]byte(pw))
	})
}
