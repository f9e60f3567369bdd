package ramdisk

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/debian"
)

// TestFirmwareIndexSuites: a suite without the index is skipped; one
// whose index the mirror serves out of sync with its InRelease is left
// out and named when another suite's verified index is there, and fails
// the build when none is; any other error fails it.
func TestFirmwareIndexSuites(t *testing.T) {
	const listing = "usr/lib/firmware/bnx2/bnx2-mips-09-6.2.1b.fw non-free-firmware/kernel/firmware-bnx2\n"
	digest := &debian.DigestError{What: "suite trixie-backports index non-free-firmware/Contents-all.gz", URL: "http://mirror/x", Want: "aa", Got: "bb"}
	contents := map[string]func() ([]io.ReadCloser, error){
		"forky": func() ([]io.ReadCloser, error) {
			return []io.ReadCloser{io.NopCloser(strings.NewReader(listing))}, nil
		},
		"trixie-backports": func() ([]io.ReadCloser, error) { return nil, digest },
		"trixie-security": func() ([]io.ReadCloser, error) {
			return nil, errors.Join(errors.New("debian: no suite of trixie-security lists it"), debian.ErrNoContents)
		},
		"down": func() ([]io.ReadCloser, error) { return nil, errors.New("mirror unreachable") },
	}
	of := func(suite string) ([]io.ReadCloser, error) { return contents[suite]() }

	pkgDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(pkgDir, "lib/firmware/qed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkgDir, "lib/firmware/qed/qed_init_values.bin"), []byte("fw"), 0o644); err != nil {
		t.Fatal(err)
	}
	pkgs := []FirmwarePackage{{Name: "firmware-qlogic", Dir: pkgDir}}

	idx, unverified, err := firmwareIndex([]string{"trixie-backports", "forky", "trixie-security"}, of, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"bnx2/bnx2-mips-09-6.2.1b.fw": {"firmware-bnx2"}, "qed/qed_init_values.bin": {"firmware-qlogic"}}
	if !reflect.DeepEqual(idx, want) {
		t.Errorf("index %v, want %v", idx, want)
	}
	if len(unverified) != 1 || !strings.HasPrefix(unverified[0], "suite trixie-backports: ") || !strings.Contains(unverified[0], "out of sync") {
		t.Errorf("unverified %q, want trixie-backports with the mirror's error", unverified)
	}

	if _, _, err := firmwareIndex([]string{"trixie-backports", "trixie-security"}, of, nil); !errors.As(err, new(*debian.DigestError)) {
		t.Errorf("no verified index: %v, want the DigestError", err)
	}
	if _, _, err := firmwareIndex([]string{"trixie-security"}, of, nil); err == nil || !strings.Contains(err.Error(), "no suite of trixie-security publishes non-free-firmware/Contents-all") {
		t.Errorf("no index at all: %v", err)
	}
	if _, _, err := firmwareIndex([]string{"forky", "down"}, of, nil); err == nil || !strings.Contains(err.Error(), "mirror unreachable") {
		t.Errorf("unreachable suite: %v, want its error", err)
	}
}
