// Package lockdown reads the kernel's lockdown mode and the firmware's
// Secure Boot state, and names lockdown as the cause when the kernel
// refuses the agent an interface it restricts. Debian's kernel locks
// itself down (integrity mode) when the firmware booted it with Secure
// Boot on: unsigned modules, /dev/mem and /dev/port, I/O ports, MSR
// writes, debugfs files that write or take ioctls, kexec of unsigned
// kernels and more are then refused with EPERM, and the kernel logs
// "Lockdown: <program>: <what> is restricted" (kernel_lockdown(7)).
package lockdown

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Paths the kernel exposes the states at.
const (
	// ModePath is securityfs's lockdown file: the modes, the one in
	// force in brackets ("none [integrity] confidentiality").
	ModePath = "/sys/kernel/security/lockdown"
	// EFIVarsDir is efivarfs, holding the firmware's SecureBoot variable.
	EFIVarsDir = "/sys/firmware/efi/efivars"
)

// The lockdown modes.
const (
	None            = "none"
	Integrity       = "integrity"
	Confidentiality = "confidentiality"
)

// secureBootVar is the global variable (EFI_GLOBAL_VARIABLE) saying
// whether the firmware enforces Secure Boot: 1 on, 0 off.
const secureBootVar = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

// Mode returns the lockdown mode in force, as the file at path (ModePath)
// says. A kernel without the lockdown LSM, or without securityfs mounted,
// has no file: fs.ErrNotExist.
func Mode(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("lockdown: %w", err)
	}
	m, err := ParseMode(string(b))
	if err != nil {
		return "", fmt.Errorf("lockdown: %s: %w", path, err)
	}
	return m, nil
}

// ParseMode returns the bracketed mode of the lockdown file's content.
func ParseMode(s string) (string, error) {
	for f := range strings.FieldsSeq(s) {
		if m, ok := strings.CutPrefix(f, "["); ok {
			if m, ok = strings.CutSuffix(m, "]"); ok && m != "" {
				return m, nil
			}
		}
	}
	return "", fmt.Errorf("no mode in brackets in %q", strings.TrimSpace(s))
}

// SecureBoot returns whether the firmware booted with Secure Boot
// enforced: the SecureBoot variable in efivarfs dir (EFIVarsDir), its
// four attribute bytes then one value byte. No variable (a BIOS boot, or
// efivarfs not mounted): fs.ErrNotExist.
func SecureBoot(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, secureBootVar))
	if err != nil {
		return false, fmt.Errorf("lockdown: Secure Boot state: %w", err)
	}
	if len(b) != 5 || b[4] > 1 {
		return false, fmt.Errorf("lockdown: Secure Boot state: %s holds % x, want four attribute bytes and 0 or 1", filepath.Join(dir, secureBootVar), b)
	}
	return b[4] == 1, nil
}

// State is what the agent says of the boot's security at start.
type State struct {
	SecureBoot string // "enabled", "disabled", or "unknown (why)"
	Lockdown   string // a mode, or "unknown (why)"
}

// Read returns the State of this boot from the lockdown file and efivarfs.
func Read(modePath, efivars string) State {
	var s State
	switch on, err := SecureBoot(efivars); {
	case errors.Is(err, fs.ErrNotExist):
		s.SecureBoot = "unknown (no UEFI variables: a BIOS boot)"
	case err != nil:
		s.SecureBoot = "unknown (" + err.Error() + ")"
	case on:
		s.SecureBoot = "enabled"
	default:
		s.SecureBoot = "disabled"
	}
	switch m, err := Mode(modePath); {
	case errors.Is(err, fs.ErrNotExist):
		s.Lockdown = "unknown (no " + modePath + ")"
	case err != nil:
		s.Lockdown = "unknown (" + err.Error() + ")"
	default:
		s.Lockdown = m
	}
	return s
}

// Error is a refusal the kernel's lockdown explains.
type Error struct {
	Interface string // what the agent used: "debugfs write /sys/kernel/debug/..."
	Mode      string
	Err       error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s refused by the kernel's lockdown (%s mode, which Debian's kernel enters when booted with UEFI Secure Boot; see kernel_lockdown(7)): %v", e.Interface, e.Mode, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Explain returns err wrapped in an Error naming iface when it is EPERM
// and the kernel is locked down (mode from the file at modePath), else
// err unchanged: an EPERM without lockdown has another cause.
func Explain(err error, iface, modePath string) error {
	if err == nil || !errors.Is(err, syscall.EPERM) {
		return err
	}
	m, merr := Mode(modePath)
	if merr != nil || m == None {
		return err
	}
	return &Error{Interface: iface, Mode: m, Err: err}
}
