package bootloader

import (
	"os"
	"path/filepath"
	"testing"
)

// IPA's _configure_grub for an md install device with dracut: each
// array's rd.md.uuid= goes at the end of GRUB_CMDLINE_LINUX.
func TestAddMDUUIDs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "grub")
	in := "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"console=ttyS0 quiet\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"\"\n"
	if err := os.WriteFile(p, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := addMDUUIDs(p, []string{"aa:bb", "cc:dd"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	want := "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"console=ttyS0 quiet rd.md.uuid=aa:bb rd.md.uuid=cc:dd\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"\"\n"
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
}
