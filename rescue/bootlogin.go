package rescue

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/ironic-go/ironic-agent/internal/shacrypt"
)

// The kernel parameters of the debug login, as diskimage-builder's
// dynamic-login element (on in IPA's published images) reads them.
const (
	// ParamSSHKey holds authorized_keys lines for root's SSH logins.
	ParamSSHKey = "sshkey"
	// ParamRootPassword holds root's password as a crypt(3) hash, or as
	// the base64 of one.
	ParamRootPassword = "rootpwd"
	// DebugName names the debug login in its log messages and banner.
	DebugName = "debug login"
	// DebugUser is the user of the debug login.
	DebugUser = "root"
)

// AuthorizedKeysFile is root's authorized_keys in the ramdisk, which an
// overlay (cmd/mkoverlay -file root/.ssh/authorized_keys=...) or a ramdisk
// build adds: the debug login takes its keys beside sshkey='s, and starts
// for them alone.
const AuthorizedKeysFile = "/root/.ssh/authorized_keys"

// ParseAuthorizedKeys reads the lines of an authorized_keys file as the
// lines of an sshkey= value: keys without options, comments and empty
// lines skipped; any bad line is an error and no key is taken.
func ParseAuthorizedKeys(b []byte) ([]ssh.PublicKey, error) {
	return parseKeys(string(b), true)
}

// AddKeys adds keys not there yet, in order.
func (b *BootLogin) AddKeys(keys []ssh.PublicKey) {
	for _, k := range keys {
		if !containsKey(b.Keys, k) {
			b.Keys = append(b.Keys, k)
		}
	}
}

// BootLogin is what the kernel command line asks the debug login for.
type BootLogin struct {
	// Keys are the public keys of sshkey=, in order, without duplicates.
	Keys []ssh.PublicKey
	// Password is rootpwd='s hash; nil: none given, or a bad one.
	Password *shacrypt.Hash
}

// Empty reports whether the login opens nothing.
func (b BootLogin) Empty() bool { return len(b.Keys) == 0 && b.Password == nil }

// BootLoginAsked reports whether cmdline names sshkey= or rootpwd= at
// all, good or bad, so the init knows to start the debug login, which
// then parses and reports.
func BootLoginAsked(cmdline string) bool {
	for _, p := range []string{ParamSSHKey, ParamRootPassword} {
		if len(paramValues(cmdline, p)) > 0 {
			return true
		}
	}
	return false
}

// ParseBootLogin reads sshkey= and rootpwd= from a kernel command line
// (/proc/cmdline as it is, quotes included) as dynamic-login does:
//
//   - sshkey="..." is everything up to the next double quote; its lines
//     are authorized_keys lines. Several keys come as several lines, as
//     several keys one after another on one line (the command line has no
//     newlines), or as several sshkey= parameters (dynamic-login takes
//     the first only: here none is dropped).
//   - rootpwd="..." or rootpwd=... (up to a blank) is a crypt(3) hash,
//     base64-encoded when it does not start with "$" (dynamic-login's
//     `openssl passwd -6 | base64 -w 0`, which keeps "$" off the command
//     line).
//
// A bad value opens nothing of its kind: one bad key and SSH stays shut,
// a hash this agent cannot check (only SHA-crypt, $5$ and $6$) and the
// consoles get no login. Each problem is an error naming the parameter,
// what is wrong and why.
func ParseBootLogin(cmdline string) (BootLogin, []error) {
	var b BootLogin
	var errs []error
	var keys []ssh.PublicKey
	keyErr := false
	for i, v := range paramValues(cmdline, ParamSSHKey) {
		ks, err := parseKeys(v.value, v.quoted)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s= (occurrence %d): %w: no SSH login", ParamSSHKey, i+1, err))
			keyErr = true
			continue
		}
		for _, k := range ks {
			if !containsKey(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if !keyErr {
		b.Keys = keys
	}
	pws := paramValues(cmdline, ParamRootPassword)
	switch {
	case len(pws) > 1:
		errs = append(errs, fmt.Errorf("%s= is given %d times: which password is meant is unclear; no console login", ParamRootPassword, len(pws)))
	case len(pws) == 1:
		h, err := parseRootPassword(pws[0].value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=: %w; no console login", ParamRootPassword, err))
		} else {
			b.Password = h
		}
	}
	return b, errs
}

type paramValue struct {
	value  string
	quoted bool
}

// paramValues finds every name= at the start of a word of cmdline and
// returns its values: up to the closing quote after name=", else up to
// the next blank. An unclosed quote runs to the end of the line, which
// the kernel's own parser does too; the caller's parse says what is wrong.
func paramValues(cmdline, name string) []paramValue {
	var out []paramValue
	prefix := name + "="
	for i := 0; i < len(cmdline); {
		j := strings.Index(cmdline[i:], prefix)
		if j < 0 {
			break
		}
		start := i + j
		i = start + len(prefix)
		if start > 0 && !isBlank(cmdline[start-1]) {
			continue // part of another word (xsshkey=, "a sshkey=")
		}
		rest := cmdline[i:]
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				out = append(out, paramValue{value: rest[1:], quoted: false})
				break
			}
			out = append(out, paramValue{value: rest[1 : 1+end], quoted: true})
			i += end + 2
			continue
		}
		end := strings.IndexFunc(rest, func(r rune) bool { return r < 0x80 && isBlank(byte(r)) })
		if end < 0 {
			end = len(rest)
		}
		out = append(out, paramValue{value: rest[:end], quoted: false})
		i += end
	}
	return out
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// keyTypes are the key types a line may hold (OpenSSH's, without the
// DSA keys it dropped).
var keyTypes = []string{
	ssh.KeyAlgoED25519, ssh.KeyAlgoRSA, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoSKED25519, ssh.KeyAlgoSKECDSA256,
}

// parseKeys reads the authorized_keys lines of one sshkey= value.
func parseKeys(value string, quoted bool) ([]ssh.PublicKey, error) {
	var keys []ssh.PublicKey
	for n, line := range strings.Split(value, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if !isKeyType(fields[0]) {
			if strings.Contains(line, "=") && len(fields) > 1 && isKeyType(fields[1]) {
				return nil, fmt.Errorf("line %d: authorized_keys options (%q) are not supported: a debug login has no restrictions to give", n+1, fields[0])
			}
			return nil, fmt.Errorf("line %d: %q is no SSH key type (want one of %s)", n+1, fields[0], strings.Join(keyTypes, ", "))
		}
		if len(fields) == 1 {
			if !quoted {
				return nil, fmt.Errorf("line %d: %q has no key after its type: the value has blanks, so it must be quoted (sshkey=\"%s AAAA...\")", n+1, fields[0], fields[0])
			}
			return nil, fmt.Errorf("line %d: %q has no key after its type", n+1, fields[0])
		}
		// Several keys on one line: a key type followed by a key of that
		// type starts the next one (a comment would hardly hold one).
		start := 0
		for i := 2; i <= len(fields); i++ {
			if i < len(fields) && !(isKeyType(fields[i]) && i+1 < len(fields) && keyOfType(fields[i], fields[i+1])) {
				continue
			}
			k, err := parseKey(fields[start], fields[start+1])
			if err != nil {
				return nil, fmt.Errorf("line %d, key %d: %w", n+1, len(keys)+1, err)
			}
			keys = append(keys, k)
			start = i
			i++ // the key's blob
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in the value")
	}
	return keys, nil
}

func isKeyType(s string) bool {
	for _, t := range keyTypes {
		if s == t {
			return true
		}
	}
	return false
}

// keyOfType reports whether blob is the base64 of a key of type typ.
func keyOfType(typ, blob string) bool {
	k, err := parseKey(typ, blob)
	return err == nil && k.Type() == typ
}

func parseKey(typ, blob string) (ssh.PublicKey, error) {
	raw, err := base64.StdEncoding.DecodeString(blob)
	if err != nil {
		return nil, fmt.Errorf("%s key: not base64: %v", typ, err)
	}
	k, err := ssh.ParsePublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("%s key: %v", typ, err)
	}
	if k.Type() != typ {
		return nil, fmt.Errorf("the line says %s but the key is %s", typ, k.Type())
	}
	return k, nil
}

func containsKey(keys []ssh.PublicKey, k ssh.PublicKey) bool {
	m := string(k.Marshal())
	for _, o := range keys {
		if string(o.Marshal()) == m {
			return true
		}
	}
	return false
}

// parseRootPassword is rootpwd='s value: a SHA-crypt hash, or its base64.
func parseRootPassword(v string) (*shacrypt.Hash, error) {
	if v == "" {
		return nil, errors.New("empty value")
	}
	s := v
	if !strings.HasPrefix(v, "$") {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("neither a crypt(3) hash (it does not start with $) nor base64 of one (%v): make one with `openssl passwd -6 -stdin | base64 -w 0`", err)
		}
		s = strings.TrimRight(string(b), "\n")
	}
	if !strings.HasPrefix(s, "$5$") && !strings.HasPrefix(s, "$6$") {
		return nil, fmt.Errorf("a %s hash: only SHA-crypt ($5$, $6$) can be checked here; make one with `openssl passwd -6`", hashKind(s))
	}
	h, err := shacrypt.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("not a SHA-crypt hash: %v", err)
	}
	return h, nil
}

// hashKind names a crypt(3) hash's method from its prefix, for the error.
func hashKind(s string) string {
	for _, k := range []struct{ prefix, name string }{
		{"$y$", "yescrypt ($y$)"}, {"$gy$", "gost-yescrypt ($gy$)"}, {"$7$", "scrypt ($7$)"},
		{"$2a$", "bcrypt ($2a$)"}, {"$2b$", "bcrypt ($2b$)"}, {"$2y$", "bcrypt ($2y$)"},
		{"$1$", "MD5-crypt ($1$)"}, {"$sha1$", "SHA1-crypt ($sha1$)"}, {"$md5", "Sun MD5 ($md5)"},
	} {
		if strings.HasPrefix(s, k.prefix) {
			return k.name
		}
	}
	if !strings.HasPrefix(s, "$") {
		return "DES or unknown (no $id$ prefix)"
	}
	id, _, _ := strings.Cut(s[1:], "$")
	return fmt.Sprintf("unknown ($%.10s$)", id)
}
