package lockdown

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]string{
		"[none] integrity confidentiality\n": None,
		"none [integrity] confidentiality\n": Integrity,
		"none integrity [confidentiality]":   Confidentiality,
	} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "none integrity", "[] x", "[none"} {
		if got, err := ParseMode(in); err == nil {
			t.Errorf("ParseMode(%q) = %q, want an error", in, got)
		}
	}
}

func FuzzParseMode(f *testing.F) {
	f.Add("none [integrity] confidentiality\n")
	f.Fuzz(func(t *testing.T, s string) {
		if m, err := ParseMode(s); err == nil && (m == "" || strings.ContainsAny(m, "[] \t\n")) {
			t.Errorf("ParseMode(%q) = %q", s, m)
		}
	})
}

// writeState makes a lockdown file and an efivarfs directory with the
// SecureBoot variable (value <0: none).
func writeState(t *testing.T, mode string, secureBoot int) (modePath, efivars string) {
	t.Helper()
	dir := t.TempDir()
	modePath, efivars = filepath.Join(dir, "lockdown"), filepath.Join(dir, "efivars")
	if err := os.MkdirAll(efivars, 0o755); err != nil {
		t.Fatal(err)
	}
	if mode != "" {
		if err := os.WriteFile(modePath, []byte(mode), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if secureBoot >= 0 {
		if err := os.WriteFile(filepath.Join(efivars, secureBootVar), []byte{6, 0, 0, 0, byte(secureBoot)}, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	return modePath, efivars
}

func TestRead(t *testing.T) {
	for _, c := range []struct {
		mode       string
		secureBoot int
		want       State
	}{
		{"none [integrity] confidentiality\n", 1, State{"enabled", Integrity}},
		{"[none] integrity confidentiality\n", 0, State{"disabled", None}},
		{"", -1, State{"unknown (no UEFI variables: a BIOS boot)", "unknown (no "}},
	} {
		mp, ev := writeState(t, c.mode, c.secureBoot)
		got := Read(mp, ev)
		if got.SecureBoot != c.want.SecureBoot || !strings.HasPrefix(got.Lockdown, c.want.Lockdown) {
			t.Errorf("Read of %q, SecureBoot %d = %+v, want %+v", c.mode, c.secureBoot, got, c.want)
		}
	}
	_, ev := writeState(t, "", -1)
	if err := os.WriteFile(filepath.Join(ev, secureBootVar), []byte{6, 0, 0, 0, 7}, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := SecureBoot(ev); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SecureBoot of value 7: %v, want an error", err)
	}
}

func TestExplain(t *testing.T) {
	perm := &fs.PathError{Op: "open", Path: "/sys/kernel/debug/i40e/0000:03:00.0/command", Err: syscall.EPERM}
	locked, _ := writeState(t, "none [integrity] confidentiality\n", 1)
	open, _ := writeState(t, "[none] integrity confidentiality\n", 0)
	err := Explain(perm, "debugfs write /sys/kernel/debug/i40e/0000:03:00.0/command", locked)
	var le *Error
	if !errors.As(err, &le) || le.Mode != Integrity || !errors.Is(err, syscall.EPERM) {
		t.Fatalf("Explain under lockdown: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "debugfs write /sys/kernel/debug/i40e") || !strings.Contains(msg, "refused by the kernel's lockdown (integrity mode") || !strings.Contains(msg, "Secure Boot") {
		t.Errorf("message: %s", msg)
	}
	// Another cause: unchanged.
	for _, c := range []struct {
		err  error
		mode string
	}{{perm, open}, {perm, filepath.Join(t.TempDir(), "none")}, {fs.ErrNotExist, locked}, {nil, locked}} {
		if got := Explain(c.err, "x", c.mode); got != c.err {
			t.Errorf("Explain(%v) with %s = %v, want it unchanged", c.err, c.mode, got)
		}
	}
}
