package logging

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOrDiscard(t *testing.T) {
	OrDiscard(nil).Error("dropped") // must not panic
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	if OrDiscard(l) != l {
		t.Fatal("a given logger is not returned as is")
	}
}

func TestOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var o Once
	if !o.Warn(log, "a", "first") {
		t.Error("the first warning of a key was not logged")
	}
	if o.Warn(log, "a", "again") {
		t.Error("a second warning of the same key was logged")
	}
	if !o.Warn(log, "b", "other") {
		t.Error("the first warning of another key was not logged")
	}
	if got := strings.Count(buf.String(), "level=WARN"); got != 2 {
		t.Errorf("%d warnings logged, want 2:\n%s", got, buf.String())
	}
}

func TestBootMAC(t *testing.T) {
	dir := t.TempDir()
	nic := func(name, typ, carrier, addr string) {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"type": typ, "carrier": carrier, "address": addr} {
			if err := os.WriteFile(filepath.Join(d, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := BootMAC("", dir); got != "none" {
		t.Errorf("no NICs: %q; want none", got)
	}
	nic("lo", "772", "1", "00:00:00:00:00:00")
	nic("eth0", "1", "0", "52:54:00:00:00:01")
	nic("eth1", "1", "1", "52:54:00:00:00:02")
	nic("eth2", "1", "1", "52:54:00:00:00:03")
	if got := BootMAC("", dir); got != "52:54:00:00:00:02" {
		t.Errorf("first NIC with a link: %q; want eth1's", got)
	}
	if got := BootMAC("52:54:00:00:00:03", dir); got != "52:54:00:00:00:03" {
		t.Errorf("BOOTIF: %q; want it", got)
	}
}
