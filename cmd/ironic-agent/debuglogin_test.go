package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebugLoginNothingToServe: without sshkey=, rootpwd= and an
// authorized_keys file the debug login serves nothing; a bad file is
// refused naming it and the line, and opens nothing either.
func TestDebugLoginNothingToServe(t *testing.T) {
	dir := t.TempDir()
	cmdline := filepath.Join(dir, "cmdline")
	bad := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(cmdline, []byte("BOOT_IMAGE=/vmlinuz ipa-debug=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("ssh-ed25519\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for keys, want := range map[string][]string{
		filepath.Join(dir, "missing"): {"nothing to serve"},
		bad:                           {"parameter refused", bad + ": line 1", "no SSH login from it", "nothing to serve"},
	} {
		var stderr bytes.Buffer
		if code := runMain(context.Background(), []string{"debug-login", "--kernel-cmdline", cmdline, "--authorized-keys", keys}, &bytes.Buffer{}, &stderr); code != 0 {
			t.Errorf("%s: exit %d: %s", keys, code, stderr.String())
		}
		for _, w := range want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: the log lacks %q:\n%s", keys, w, stderr.String())
			}
		}
	}
}
