package initramfs

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

func build(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Dir("etc", 0o755))
	must(w.CharDev("dev/console", 0o600, 5, 1))
	must(w.Bytes("usr/bin/tool", 0o755, []byte("#!binary\x00\x01")))
	must(w.Symlink("init", "usr/bin/tool"))
	must(w.Bytes("lib/modules/6.1/kernel/a.ko", 0o644, []byte("abc")))
	must(w.Close())
	return buf.Bytes()
}

// TestListedByCpio reads the archive back with GNU cpio, the reference
// reader of the format the kernel unpacks.
func TestListedByCpio(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("SKIPPED: needs cpio (Debian package cpio, in test.sh)")
	}
	data := build(t)
	cmd := exec.Command("cpio", "-itv", "--quiet")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -itv: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{
		"drwxr-xr-x", " etc\n",
		"crw-------", "5,   1", " dev/console\n",
		"-rwxr-xr-x", " usr/bin/tool\n",
		"lrwxrwxrwx", " init -> usr/bin/tool\n",
		" lib/modules/6.1/kernel/a.ko\n", " lib/modules/6.1/kernel\n", " dev\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("cpio listing lacks %q:\n%s", want, got)
		}
	}
	// Parents come before their children: the kernel creates entries in
	// archive order.
	if strings.Index(got, " lib/modules\n") > strings.Index(got, " lib/modules/6.1/kernel/a.ko\n") {
		t.Errorf("directory after its file:\n%s", got)
	}
}

func TestLayout(t *testing.T) {
	data := build(t)
	if len(data)%4 != 0 {
		t.Errorf("archive length %d is not 4-byte aligned", len(data))
	}
	if !bytes.HasPrefix(data, []byte("070701")) {
		t.Fatalf("no newc magic: %q", data[:6])
	}
	if !bytes.Contains(data, []byte("TRAILER!!!\x00")) {
		t.Errorf("no trailer")
	}
	// The first entry is "etc": header, name, NUL, padding to 4.
	hdr := data[:110]
	if got := string(hdr[14:22]); got != "000041ed" {
		t.Errorf("mode of etc = %s, want 000041ed", got)
	}
	if _, err := hex.DecodeString(string(hdr[6:110])); err != nil {
		t.Errorf("header fields are not hex: %v", err)
	}
	if data[110+4] != 0 || string(data[110:113]) != "etc" {
		t.Errorf("name of first entry: %q", data[110:116])
	}
}

func TestBadInput(t *testing.T) {
	w := NewWriter(&bytes.Buffer{})
	if err := w.Bytes("", 0o644, nil); err == nil {
		t.Error("empty name accepted")
	}
	if err := w.Bytes("TRAILER!!!", 0o644, nil); err == nil {
		t.Error("trailer name accepted")
	}
	if err := w.Symlink("x", ""); err == nil {
		t.Error("empty symlink target accepted")
	}
	if err := w.File("short", 0o644, 10, strings.NewReader("abc")); err == nil || !strings.Contains(err.Error(), "short read") {
		t.Errorf("short file: %v", err)
	}
	// A failed write poisons the writer.
	if err := w.Close(); err == nil {
		t.Error("Close after a failed write succeeded")
	}
}

// TestReadNames: the names of an archive the Writer wrote, in order.
func TestReadNames(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.Bytes("etc/a.conf", 0o644, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := w.Symlink("bin/sh", "busybox"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := ReadNames(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, " ") != "etc etc/a.conf bin bin/sh" {
		t.Errorf("names %q", names)
	}
	if _, err := ReadNames(bytes.NewReader(buf.Bytes()[:200])); err == nil {
		t.Errorf("a cut archive must be an error")
	}
}

// FuzzReadNames: the base initramfs mkoverlay reads is outside bytes.
func FuzzReadNames(f *testing.F) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	_ = w.Bytes("etc/a.conf", 0o644, []byte("abc"))
	_ = w.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("070701"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ReadNames(bytes.NewReader(b))
	})
}

// The release is reproducible only if the archive is: the same entries
// give the same bytes, and no header carries an owner, a date or a
// device of the build host.
func TestReproducible(t *testing.T) {
	a, b := build(t), build(t)
	if !bytes.Equal(a, b) {
		t.Fatal("two archives of the same entries differ")
	}
	for off := 0; off+110 <= len(a); {
		hdr := string(a[off : off+110])
		if hdr[:6] != "070701" {
			t.Fatalf("no header at %d", off)
		}
		field := func(i int) string { return hdr[6+8*i : 14+8*i] }
		// uid, gid, mtime, the device the file was on, check.
		for _, i := range []int{2, 3, 5, 7, 8, 12} {
			if field(i) != "00000000" {
				t.Errorf("entry at %d: header field %d = %s, want 0", off, i, field(i))
			}
		}
		var size, namesize int
		fmt.Sscanf(field(6), "%x", &size)
		fmt.Sscanf(field(11), "%x", &namesize)
		name := string(a[off+110 : off+110+namesize-1])
		off = align4(align4(off+110+namesize) + size)
		if name == "TRAILER!!!" {
			break
		}
	}
}

func align4(n int) int { return (n + 3) &^ 3 }
