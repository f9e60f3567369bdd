package ramdisk

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/debian"
	"github.com/klauspost/compress/zstd"
)

// Kernel is an extracted Debian kernel package.
type Kernel struct {
	Flavour    string // the KernelFlavour's name
	Arch       string // its architecture (Arches; "" in a Kernel made by hand: DefaultArch)
	Package    string // e.g. linux-image-6.1.0-48-amd64
	Version    string // e.g. 6.1.0-48-amd64 (uname -r)
	Vmlinuz    string // the bzImage
	ModulesDir string // lib/modules/<Version>
	// Config is the kernel's build configuration (boot/config-<Version>).
	Config string
	// Debs are the Debian packages it came from: the image package, and
	// for a split one its binary and modules packages.
	Debs []debian.Package
}

// DecompressedSuffix returns the module file suffix the kernel
// decompresses itself at finit_module (MODULE_INIT_COMPRESSED_FILE):
// ".ko.xz", ".ko.zst" or ".ko.gz" for a kernel built with
// CONFIG_MODULE_DECOMPRESS and that compression, else "" (the build then
// decompresses the modules; Debian 12's are not compressed at all).
func (k *Kernel) DecompressedSuffix() (string, error) {
	b, err := os.ReadFile(k.Config)
	if err != nil {
		return "", fmt.Errorf("ramdisk: kernel configuration: %w", err)
	}
	return decompressedSuffix(string(b)), nil
}

func decompressedSuffix(config string) string {
	set := map[string]bool{}
	for line := range strings.SplitSeq(config, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && v == "y" {
			set[k] = true
		}
	}
	if !set["CONFIG_MODULE_DECOMPRESS"] {
		return ""
	}
	for opt, suffix := range map[string]string{"CONFIG_MODULE_COMPRESS_XZ": ".ko.xz", "CONFIG_MODULE_COMPRESS_ZSTD": ".ko.zst", "CONFIG_MODULE_COMPRESS_GZIP": ".ko.gz"} {
		if set[opt] {
			return suffix
		}
	}
	return ""
}

// resolveKernelPackage returns the versioned kernel package the
// linux-image-<arch> meta package (its highest version in ix) depends on:
// the flavour's current kernel for arch.
func resolveKernelPackage(ix *debian.Index, flavour string, arch Arch) (string, error) {
	meta, err := ix.Get(arch.kernelMetaPackage())
	if err != nil {
		return "", fmt.Errorf("ramdisk: kernel flavour %s: %w", flavour, err)
	}
	for _, d := range debian.ParseDepends(meta.Depends) {
		if strings.HasPrefix(d, "linux-image-") && len(d) > len("linux-image-") && d[len("linux-image-")] >= '0' && d[len("linux-image-")] <= '9' {
			return d, nil
		}
	}
	return "", fmt.Errorf("ramdisk: %s %s of flavour %s names no linux-image-<version> package in its Depends (%q)", meta.Name, meta.Version, flavour, meta.Depends)
}

// FetchKernel downloads pkg (or, when pkg is "", the package flavour f's
// linux-image-<f.Arch> depends on), the highest version of it across f's
// suites, with the Debian archive client (verified against the
// archive's signature), and extracts it into
// cacheDir/kernel/<version>-<digest of the package>. Both steps are
// skipped when already done, so CI downloads the package once per
// machine.
func FetchKernel(ctx context.Context, cacheDir string, f KernelFlavour, pkg string) (*Kernel, error) {
	arch, err := LookupArch(f.Arch)
	if err != nil {
		return nil, err
	}
	c, ix, err := flavourIndex(ctx, cacheDir, f)
	if err != nil {
		return nil, err
	}
	if pkg == "" {
		if pkg, err = resolveKernelPackage(ix, f.Name, arch); err != nil {
			return nil, err
		}
	}
	img, err := ix.Get(pkg)
	if err != nil {
		return nil, fmt.Errorf("ramdisk: kernel flavour %s: %w", f.Name, err)
	}
	ver := strings.TrimSuffix(strings.TrimPrefix(pkg, "linux-image-"), "-unsigned")
	k := &Kernel{Flavour: f.Name, Arch: arch.Name, Package: pkg, Version: ver, Debs: []debian.Package{img}}
	// Debian's kernels from 6.17 on split the image package: the bzImage,
	// the modules, and the configuration with modules.order and
	// modules.builtin are in linux-binary-<version>,
	// linux-modules-<version> and linux-base-<version>, which it depends on.
	for _, part := range splitKernelParts(img.Depends, ver) {
		p, err := ix.Get(part)
		if err != nil {
			return nil, fmt.Errorf("ramdisk: kernel %s: %w", pkg, err)
		}
		k.Debs = append(k.Debs, p)
	}
	dest := filepath.Join(cacheDir, "kernel", ver+"-"+img.SHA256[:16])
	k.Vmlinuz = filepath.Join(dest, "vmlinuz")
	k.ModulesDir = filepath.Join(dest, "lib/modules", ver)
	k.Config = filepath.Join(dest, "config")
	if fileExists(k.Vmlinuz) && fileExists(k.Config) && fileExists(filepath.Join(k.ModulesDir, "modules.order")) {
		return k, nil
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	unlock, err := cachedir.Lock(ctx, dest+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if fileExists(k.Vmlinuz) && fileExists(k.Config) && fileExists(filepath.Join(k.ModulesDir, "modules.order")) {
		return k, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dest), filepath.Base(dest)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	x := filepath.Join(tmp, "x")
	deb := img.URL
	for _, p := range k.Debs {
		path, err := c.Download(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("ramdisk: download the kernel: %w", err)
		}
		if err := debian.Extract(path, x); err != nil {
			return nil, fmt.Errorf("ramdisk: extract the kernel: %w", err)
		}
	}
	// The split packages put the bzImage beside the modules.
	vmlinuz := filepath.Join(x, "boot", "vmlinuz-"+ver)
	if !fileExists(vmlinuz) {
		vmlinuz = filepath.Join(x, "usr/lib/modules", ver, "vmlinuz")
	}
	if err := os.Rename(vmlinuz, filepath.Join(tmp, "vmlinuz")); err != nil {
		return nil, fmt.Errorf("ramdisk: %s has no boot/vmlinuz-%s: %w", deb, ver, err)
	}
	// The split packages keep the configuration beside the modules
	// (linux-base-<version>). The first split kernels shipped none: the
	// build then cannot tell whether the kernel decompresses modules, and
	// decompresses them (an empty file says so, see DecompressedSuffix).
	config := filepath.Join(x, "boot", "config-"+ver)
	if split := filepath.Join(x, "usr/lib/modules", ver, "config"); !fileExists(config) && fileExists(split) {
		config = split
	}
	if !fileExists(config) {
		if err := os.MkdirAll(filepath.Dir(config), 0o755); err != nil {
			return nil, fmt.Errorf("ramdisk: %w", err)
		}
		if err := os.WriteFile(config, nil, 0o644); err != nil {
			return nil, fmt.Errorf("ramdisk: %w", err)
		}
	}
	if err := os.Rename(config, filepath.Join(tmp, "config")); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	// bookworm ships /lib/modules, later releases /usr/lib/modules.
	mods := filepath.Join(x, "lib/modules", ver)
	if !fileExists(mods) {
		mods = filepath.Join(x, "usr/lib/modules", ver)
	}
	if err := os.MkdirAll(filepath.Join(tmp, "lib/modules"), 0o755); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	if err := os.Rename(mods, filepath.Join(tmp, "lib/modules", ver)); err != nil {
		return nil, fmt.Errorf("ramdisk: %s has no modules for %s: %w", deb, ver, err)
	}
	if err := os.RemoveAll(x); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	if err := os.RemoveAll(dest); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	if !fileExists(filepath.Join(k.ModulesDir, "modules.order")) {
		return nil, fmt.Errorf("ramdisk: %s has no modules.order", k.ModulesDir)
	}
	return k, nil
}

// splitKernelParts returns the linux-binary-<ver>, linux-modules-<ver>
// and linux-base-<ver> packages a split kernel image package depends on
// (its Depends field).
func splitKernelParts(depends, ver string) []string {
	var out []string
	for d := range strings.SplitSeq(depends, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(d), " ")
		if name == "linux-binary-"+ver || name == "linux-modules-"+ver || name == "linux-base-"+ver {
			out = append(out, name)
		}
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// PVHName is the uncompressed kernel kept beside the bzImage in the
// download cache (see PVH).
const PVHName = "vmlinux"

// PVH returns an uncompressed vmlinux of the bzImage at vmlinuz, made once
// and kept beside it, for QEMU to boot through the kernel's PVH entry point
// (-kernel with an ELF file; Debian's kernels have CONFIG_PVH). Under
// emulation this skips the bzImage's own decompressor, which spends about
// 5 s of TCG time unpacking Debian's XZ kernel before the first kernel
// message (about 0.1 s on hardware). Only the VM tests use it: a server
// boots the bzImage, as Ironic hands it out. Concurrent callers each write
// a temporary file and rename it; the content is the same.
func PVH(ctx context.Context, vmlinuz string) (string, error) {
	out := filepath.Join(filepath.Dir(vmlinuz), PVHName)
	if err := checkPVH(out); err == nil {
		return out, nil
	}
	f, err := os.CreateTemp(filepath.Dir(vmlinuz), PVHName+".tmp-")
	if err != nil {
		return "", fmt.Errorf("ramdisk: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := ExtractVmlinux(ctx, vmlinuz, f); err != nil {
		return "", err
	}
	if err := f.Chmod(0o644); err != nil {
		return "", fmt.Errorf("ramdisk: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("ramdisk: %w", err)
	}
	if err := checkPVH(f.Name()); err != nil {
		return "", fmt.Errorf("ramdisk: %s: %w", vmlinuz, err)
	}
	if err := os.Rename(f.Name(), out); err != nil {
		return "", fmt.Errorf("ramdisk: %w", err)
	}
	return out, nil
}

// ExtractVmlinux writes the ELF kernel inside an x86 bzImage to w: the
// payload the setup header points at (payload_offset, payload_length,
// boot protocol 2.08+), decompressed in Go: gzip, zstd, or XZ (Debian's
// choice, with the x86 BCJ filter: decodeKernelXZ).
func ExtractVmlinux(ctx context.Context, bzImage string, w io.Writer) error {
	data, err := os.ReadFile(bzImage)
	if err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	payload, size, err := bzPayload(data)
	if err != nil {
		return fmt.Errorf("ramdisk: %s: %w", bzImage, err)
	}
	cw := &countWriter{w: w}
	switch {
	case bytes.HasPrefix(payload, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(bytes.NewReader(payload))
		if err == nil {
			_, err = io.Copy(cw, zr)
		}
		if err != nil {
			return fmt.Errorf("ramdisk: %s: gzip payload: %w", bzImage, err)
		}
	case bytes.HasPrefix(payload, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(bytes.NewReader(payload), zstd.WithDecoderConcurrency(1))
		if err == nil {
			_, err = io.Copy(cw, zr)
			zr.Close()
		}
		if err != nil {
			return fmt.Errorf("ramdisk: %s: zstd payload: %w", bzImage, err)
		}
	case bytes.HasPrefix(payload, []byte("\xfd7zXZ\x00")):
		out, err := decodeKernelXZ(payload)
		if err == nil {
			_, err = cw.Write(out)
		}
		if err != nil {
			return fmt.Errorf("ramdisk: %s: xz payload: %w", bzImage, err)
		}
	default:
		return fmt.Errorf("ramdisk: %s: payload compressed with something other than gzip, zstd or xz (magic % x)", bzImage, payload[:min(6, len(payload))])
	}
	if cw.n != int64(size) {
		return fmt.Errorf("ramdisk: %s: payload decompressed to %d bytes, the image says %d", bzImage, cw.n, size)
	}
	return nil
}

// bzPayload returns the compressed kernel of a bzImage, without the
// 4-byte little-endian decompressed size the build appends to it, and that
// size.
func bzPayload(data []byte) ([]byte, uint32, error) {
	if len(data) < 0x250 || string(data[0x202:0x206]) != "HdrS" {
		return nil, 0, errors.New("not an x86 bzImage (no HdrS setup header)")
	}
	le := binary.LittleEndian
	if v := le.Uint16(data[0x206:]); v < 0x208 {
		return nil, 0, fmt.Errorf("boot protocol %#x has no payload fields (2.08 or later)", v)
	}
	setup := int(data[0x1f1])
	if setup == 0 {
		setup = 4
	}
	start := (setup+1)*512 + int(le.Uint32(data[0x248:]))
	n := int(le.Uint32(data[0x24c:]))
	if n < 8 || start < 0 || start+n > len(data) || start+n < start {
		return nil, 0, fmt.Errorf("payload at %d+%d lies outside the %d-byte file", start, n, len(data))
	}
	p := data[start : start+n]
	return p[:n-4], le.Uint32(p[n-4:]), nil
}

// checkPVH says whether path is an ELF kernel with the PVH entry note
// (XEN_ELFNOTE_PHYS32_ENTRY), which QEMU needs to boot it.
func checkPVH(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes, err := io.ReadAll(io.LimitReader(p.Open(), 1<<20))
		if err != nil {
			return err
		}
		for len(notes) >= 12 {
			le := binary.LittleEndian
			nameSz, descSz, typ := le.Uint32(notes), le.Uint32(notes[4:]), le.Uint32(notes[8:])
			off := 12 + int((nameSz+3)&^3)
			next := off + int((descSz+3)&^3)
			if next > len(notes) || off < 12 {
				break
			}
			if typ == xenElfnotePhys32Entry && nameSz >= 3 && string(notes[12:15]) == "Xen" {
				return nil
			}
			notes = notes[next:]
		}
	}
	return errors.New("no PVH entry note (kernel built without CONFIG_PVH)")
}

// xenElfnotePhys32Entry is XEN_ELFNOTE_PHYS32_ENTRY, the PVH entry point.
const xenElfnotePhys32Entry = 18
