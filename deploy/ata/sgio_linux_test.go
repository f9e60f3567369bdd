package ata

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sgIOHdr must be laid out as the kernel's struct sg_io_hdr: the offsets
// of <scsi/sg.h> on a 64-bit machine.
func TestSGIOHdrLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("SKIPPED: the offsets checked are those of a 64-bit kernel")
	}
	var h sgIOHdr
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"dxfer_len", unsafe.Offsetof(h.dxferLen), 12},
		{"dxferp", unsafe.Offsetof(h.dxferp), 16},
		{"sbp", unsafe.Offsetof(h.sbp), 32},
		{"timeout", unsafe.Offsetof(h.timeout), 40},
		{"usr_ptr", unsafe.Offsetof(h.usrPtr), 56},
		{"status", unsafe.Offsetof(h.status), 64},
		{"sb_len_wr", unsafe.Offsetof(h.sbLenWr), 67},
		{"host_status", unsafe.Offsetof(h.hostStatus), 68},
		{"driver_status", unsafe.Offsetof(h.driverStatus), 70},
		{"info", unsafe.Offsetof(h.info), 80},
		{"sizeof", unsafe.Sizeof(h), 88},
	} {
		if c.got != c.want {
			t.Errorf("%s at %d, want %d", c.name, c.got, c.want)
		}
	}
}

// A file is no SCSI device: SG_IO fails with ENOTTY, which the erase
// takes for "no ATA security", and IDENTIFY says which command failed.
func TestSGIOOnAFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Drive{Path: p, Passer: SGIO{}}.Identify(context.Background())
	if !errors.Is(err, unix.ENOTTY) {
		t.Fatalf("IDENTIFY on a file: %v, want ENOTTY", err)
	}
	if _, err := (SGIO{}).Pass(context.Background(), filepath.Join(t.TempDir(), "missing"), &Request{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing device: %v", err)
	}
	if got := timeoutMillis(0); got != 15000 {
		t.Errorf("default timeout %d ms", got)
	}
	if got := timeoutMillis(1 << 62); got != 1<<32-1 {
		t.Errorf("long timeout %d ms, want the largest SG_IO takes", got)
	}
}
