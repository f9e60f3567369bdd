package ramdisk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ESPName is the EFI System Partition image beside the kernel and the
// initramfs: what an operator gives Ironic's [conductor]bootloader, and
// what the ISO's UEFI El Torito entry boots.
const ESPName = "ironic-agent.esp"

// Where things are in the ESP, and where Debian's signed GRUB looks for
// its configuration. shim, started by the firmware as the removable
// media loader, starts grubx64.efi from its own directory; Debian's
// grubx64.efi.signed is built with the prefix /EFI/debian and no
// configuration of its own, so it reads /EFI/debian/grub.cfg on the
// device it was loaded from. Booted from a CD's El Torito image, that
// device is the whole CD (GRUB's (cd0)), not the ESP: the ISO 9660
// volume's own EFI/debian/grub.cfg is read.
const (
	ESPShimPath = "EFI/BOOT/BOOTX64.EFI"
	ESPGrubPath = "EFI/BOOT/grubx64.efi"
	// GrubConfigPath is the configuration Debian's signed GRUB reads,
	// relative to the root of the device it was loaded from: Ironic's
	// [DEFAULT]grub_config_path for this ESP.
	GrubConfigPath = "EFI/debian/grub.cfg"
)

// espGrubConfig is the ESP's own GrubConfigPath, read only when GRUB's
// device is the ESP itself (an ESP on a disk or a stick, or a firmware
// that hands GRUB the El Torito image as a device of its own): it hands
// over to the first CD that holds the configuration, at GrubConfigPath or
// at Ironic's default [DEFAULT]grub_config_path, and says what is wrong
// when none does.
const espGrubConfig = `# ironic-agent's ESP: Debian's signed shim and GRUB. GRUB reads
# /` + GrubConfigPath + ` on the device it was loaded from: on a CD, the CD's
# own file (make iso writes one; Ironic writes it at
# [DEFAULT]grub_config_path, which must be ` + GrubConfigPath + `).
# This copy is read when that device is the ESP itself.
for cd in cd0 cd1 cd2 cd3; do
	for cfg in /` + GrubConfigPath + ` /boot/grub/grub.cfg; do
		if [ -e ($cd)$cfg ]; then
			set root=$cd
			configfile ($cd)$cfg
		fi
	done
done
echo "ironic-agent ESP: no CD holds /` + GrubConfigPath + `; with Ironic, set [DEFAULT]grub_config_path = ` + GrubConfigPath + `"
sleep 30
`

// mtoolsNeeds names the host programs ESP runs and their package.
const mtoolsNeeds = "needs mformat, mmd and mcopy: Debian's mtools"

// ESP writes out, a FAT image of an EFI System Partition holding the
// signed boot chain bc (shim as the removable media loader, GRUB beside
// it) and the GRUB configuration that finds the boot medium's own. No
// kernel: the medium (the ISO Ironic or make iso builds) carries it.
// Every date in the image is epoch (zero: 1980-01-01, FAT's first day)
// and the volume serial a digest of the contents, so the same chain gives
// the same bytes. mtools writes the FAT: it needs no root and no loop
// device, and the ISO build already needs it.
func ESP(ctx context.Context, bc *BootChain, out string, epoch time.Time) error {
	if epoch.IsZero() {
		epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	stage, err := os.MkdirTemp("", "ironic-agent-esp-")
	if err != nil {
		return fmt.Errorf("ramdisk: ESP: %w", err)
	}
	defer os.RemoveAll(stage)
	files := []struct{ dst, src string }{{ESPShimPath, bc.Shim}, {ESPGrubPath, bc.Grub}, {GrubConfigPath, ""}}
	h := sha256.New()
	var total int64
	for i, f := range files {
		p := filepath.Join(stage, strconv.Itoa(i))
		if f.src == "" {
			err = os.WriteFile(p, []byte(espGrubConfig), 0o644)
		} else {
			err = copyFile(f.src, p)
		}
		if err != nil {
			return fmt.Errorf("ramdisk: ESP: %w", err)
		}
		// mcopy -m takes a file's date from the host file.
		if err := os.Chtimes(p, epoch, epoch); err != nil {
			return fmt.Errorf("ramdisk: ESP: %w", err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("ramdisk: ESP: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f.dst, len(b))
		h.Write(b)
		total += int64(len(b))
	}
	// The files, room for the FATs and directories, and 1 MiB to spare
	// (a vendor's larger GRUB), in whole MiB: 2048 sectors, which
	// mformat's 64 heads of 32 sectors divide.
	size := (total + 2<<20) &^ (1<<20 - 1)
	serial := binary.BigEndian.Uint32(h.Sum(nil))
	tmp := out + ".tmp"
	os.Remove(tmp)
	defer os.Remove(tmp)
	sec := strconv.FormatInt(epoch.Unix(), 10)
	mt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+sec, "TZ=UTC", "MTOOLS_SKIP_CHECK=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("ramdisk: ESP (%s): %s: %w: %s", mtoolsNeeds, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
	if err := mt("mformat", "-i", tmp, "-C", "-T", strconv.FormatInt(size/512, 10), "-h", "64", "-s", "32",
		"-v", "ESP", "-N", fmt.Sprintf("%08x", serial), "::"); err != nil {
		return err
	}
	if err := mt("mmd", "-i", tmp, "::EFI", "::EFI/BOOT", "::EFI/debian"); err != nil {
		return err
	}
	for i, f := range files {
		if err := mt("mcopy", "-i", tmp, "-m", filepath.Join(stage, strconv.Itoa(i)), "::"+f.dst); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("ramdisk: ESP: %w", err)
	}
	return nil
}
