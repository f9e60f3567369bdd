package ramdisk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
)

// moduleSigMagic ends a module that carries its signature: the kernel's
// build (scripts/sign-file) appends the PKCS#7 signature, a
// struct module_signature, and this. Compression comes after signing, so
// a compressed module has it inside.
const moduleSigMagic = "~Module signature appended~\n"

// moduleSigInfoLen is struct module_signature: algo, hash, id_type,
// signer_len, key_id_len, three bytes of padding, the big-endian length
// of the signature.
const moduleSigInfoLen = 12

// pkeyIDPKCS7 is module_signature.id_type of a PKCS#7 signature, the only
// kind the kernel verifies.
const pkeyIDPKCS7 = 2

// ModuleSignature checks that data, a plain (decompressed) module, ends
// with an appended PKCS#7 signature the kernel can parse; it does not
// verify it against a key (the kernel does, at load). The error says
// what is wrong.
func ModuleSignature(data []byte) error {
	if !bytes.HasSuffix(data, []byte(moduleSigMagic)) {
		return fmt.Errorf("no appended signature (no %q trailer): stripped, or re-packed after signing", strings.TrimSuffix(moduleSigMagic, "\n"))
	}
	rest := data[:len(data)-len(moduleSigMagic)]
	if len(rest) < moduleSigInfoLen {
		return fmt.Errorf("signature trailer without its header")
	}
	info := rest[len(rest)-moduleSigInfoLen:]
	if info[2] != pkeyIDPKCS7 {
		return fmt.Errorf("signature of type %d, want PKCS#7 (%d)", info[2], pkeyIDPKCS7)
	}
	n := binary.BigEndian.Uint32(info[8:])
	body := rest[:len(rest)-moduleSigInfoLen]
	if n == 0 || uint64(n) >= uint64(len(body)) {
		return fmt.Errorf("signature of %d bytes in a module of %d", n, len(body))
	}
	if sig := body[len(body)-int(n):]; sig[0] != 0x30 {
		return fmt.Errorf("signature is not DER (starts with %#x)", sig[0])
	}
	return nil
}

// ModuleFileSignature is ModuleSignature of the module file at path,
// decompressed first when it is .ko.xz, .ko.zst or .ko.gz (the signature
// is appended before compression). The ramdisk's build and overlays
// (internal/ramdisk/overlay) check their modules with it.
func ModuleFileSignature(path string) error {
	data, err := kmod.ReadModule(path)
	if err != nil {
		return err
	}
	return ModuleSignature(data)
}

// signsModules says whether the kernel's modules must carry signatures:
// its configuration has CONFIG_MODULE_SIG=y, or it has none to read (the
// split packages of Debian's kernels from 6.17 on ship none; Debian signs
// every kernel's modules). A kernel without a configuration path (a test's
// stand-in tree) is not checked.
func (k *Kernel) signsModules() (bool, error) {
	if k.Config == "" {
		return false, nil
	}
	b, err := os.ReadFile(k.Config)
	if err != nil {
		return false, fmt.Errorf("ramdisk: kernel configuration: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return true, nil
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.TrimSpace(line) == "CONFIG_MODULE_SIG=y" {
			return true, nil
		}
	}
	return false, nil
}

// signedMemo is the file in a kernel's modules directory listing the
// modules found signed, each with the size and modification time it had:
// decompressing every XZ module to reach its trailer takes seconds, and
// the extracted tree does not change. A module rewritten since (stripped,
// re-packed) has another size or time and is checked again.
const signedMemo = ".ironic-agent-signed"

// checkModuleSignatures fails naming the first module of mods that
// carries no signature when the kernel signs its modules: under UEFI
// Secure Boot the kernel locks itself down and refuses an unsigned
// module, which would leave the hardware it drives unusable at boot, far
// from the build that broke it.
func checkModuleSignatures(k *Kernel, mods []kmod.Module) error {
	signs, err := k.signsModules()
	if err != nil || !signs {
		return err
	}
	memoPath := filepath.Join(k.ModulesDir, signedMemo)
	memo := map[string]bool{}
	if b, err := os.ReadFile(memoPath); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			memo[line] = true
		}
	}
	added := false
	for _, m := range mods {
		p := filepath.Join(k.ModulesDir, m.Path)
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("ramdisk: %w", err)
		}
		key := fmt.Sprintf("%s\t%d\t%d", m.Path, st.Size(), st.ModTime().UnixNano())
		if memo[key] {
			continue
		}
		if err := ModuleFileSignature(p); err != nil {
			return fmt.Errorf("ramdisk: module %s (%s): %w; under Secure Boot the kernel refuses it: take the module as %s ships it", m.Name, p, err, k.Package)
		}
		memo[key], added = true, true
	}
	if !added {
		return nil
	}
	// Parallel builds each write a whole file and rename it: the last
	// one's list is as good as any.
	var b strings.Builder
	for _, key := range slices.Sorted(maps.Keys(memo)) {
		if key != "" {
			b.WriteString(key + "\n")
		}
	}
	tmp, err := os.CreateTemp(k.ModulesDir, signedMemo+".tmp-")
	if err != nil {
		return nil // the check passed; only its memo is not kept
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(b.String()); err == nil && tmp.Close() == nil {
		_ = os.Chmod(tmp.Name(), 0o644)
		_ = os.Rename(tmp.Name(), memoPath)
	}
	tmp.Close()
	return nil
}
