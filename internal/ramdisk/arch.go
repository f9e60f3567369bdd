package ramdisk

import (
	"compress/gzip"
	"debug/elf"
	"fmt"
	"io"
	"strings"
)

// Arch is a CPU architecture a ramdisk is built for: Go and Debian call
// it by the same name, and it says where its Debian packages put things.
type Arch struct {
	// Name is the GOARCH the agent is built with and the Debian
	// architecture the kernel, firmware and programs come from.
	Name string
	// Multiarch is Debian's multiarch tuple: the library directories
	// lib/<Multiarch> and usr/lib/<Multiarch>.
	Multiarch string
	// Machine is the ELF machine of its binaries, which the build checks
	// the agent against.
	Machine elf.Machine
	// Uname is the kernel's name for it (uname -m), which Ironic keeps as
	// the node's cpu_arch.
	Uname string
	// EFIRemovable is the removable-media boot loader's name in
	// EFI/BOOT, as the UEFI specification gives it per architecture.
	EFIRemovable string
	// GzipKernel ships the kernel gzip-compressed: Debian's arm64
	// kernel is an uncompressed Image (36 MiB, for signing), which does
	// not decompress itself; GRUB, iPXE and QEMU unpack an Image.gz, as
	// other distributions ship it, and it is a third of the size.
	GzipKernel bool
	// KernelKind names the kernel's format in the size report.
	KernelKind string
}

// DefaultArch is the architecture built when none is named.
const DefaultArch = "amd64"

// Arches returns the architectures a ramdisk can be built for.
func Arches() []Arch {
	return []Arch{
		{Name: "amd64", Multiarch: "x86_64-linux-gnu", Machine: elf.EM_X86_64, Uname: "x86_64", EFIRemovable: "BOOTX64.EFI",
			KernelKind: "bzImage"},
		{Name: "arm64", Multiarch: "aarch64-linux-gnu", Machine: elf.EM_AARCH64, Uname: "aarch64", EFIRemovable: "BOOTAA64.EFI",
			GzipKernel: true, KernelKind: "Image.gz"},
	}
}

// LookupArch returns the architecture called name ("" for DefaultArch);
// any other name is refused, naming the ones there are.
func LookupArch(name string) (Arch, error) {
	if name == "" {
		name = DefaultArch
	}
	for _, a := range Arches() {
		if a.Name == name {
			return a, nil
		}
	}
	return Arch{}, fmt.Errorf("ramdisk: unknown architecture %q (want one of %s)", name, archNames())
}

// archNames lists the architectures for messages.
func archNames() string {
	var names []string
	for _, a := range Arches() {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}

// LibDirs are the directories glibc's loader searches without an
// ld.so.cache on Debian for a (the multiarch directories first).
func (a Arch) LibDirs() []string { return a.libDirs() }

func (a Arch) libDirs() []string {
	return []string{"lib/" + a.Multiarch, "usr/lib/" + a.Multiarch, "lib64", "usr/lib64", "lib", "usr/lib"}
}

// kernelMetaPackage is the package whose dependency names a release's
// current kernel for a.
func (a Arch) kernelMetaPackage() string { return "linux-image-" + a.Name }

// CheckELF refuses a binary at path built for another machine than a's.
func (a Arch) CheckELF(path string, f *elf.File) error { return a.checkELF(path, f) }

func (a Arch) checkELF(path string, f *elf.File) error {
	if f.Machine != a.Machine {
		return fmt.Errorf("ramdisk: %s is built for %s, not %s (%s): build it with GOARCH=%s", path, f.Machine, a.Name, a.Machine, a.Name)
	}
	return nil
}

// copyKernel writes the kernel at src to dst as a's ramdisk ships it:
// as Debian ships it, or gzip-compressed (GzipKernel) with no name or
// date in the header, so the same kernel gives the same bytes; e2e/ramdisk's
// TestArm64ISOInVM boots it through GRUB.
func (a Arch) copyKernel(src, dst string) error {
	if !a.GzipKernel {
		return copyFile(src, dst)
	}
	return copyThrough(src, dst, func(w io.Writer, r io.Reader) error {
		// BestSpeed: GRUB's gunzip (gzio) refuses the dynamic Huffman
		// tables compress/flate writes at its other levels ("failed in
		// building a Huffman code table" in Debian's arm64 kernel), and
		// GRUB is how Ironic and the ISO boot arm64 machines.
		zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if err != nil {
			return err
		}
		if _, err := io.Copy(zw, r); err != nil {
			return err
		}
		return zw.Close()
	})
}
