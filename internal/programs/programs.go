// Package programs is the registry of every external program the agent
// may execute from its ramdisk: the name it runs, the Debian package that
// ships it, the feature that needs it and what that feature does without
// it. blockdev.ExecRunner refuses a name that is not here, and the ramdisk
// build (internal/ramdisk) carries each one with its shared libraries, so
// the list is the single answer to "what does the agent run".
//
// Two other kinds of programs are not in it, since the ramdisk does not
// carry them: GRUB's tools (grub-install, grub-mkconfig, efibootmgr, ...),
// which deploy/bootloader runs inside the deployed image's chroot, from the
// image; and the operator's step executables of agent/hwmgr's steps
// directory, which the operator supplies.
package programs

import (
	"fmt"
	"slices"
)

// Program is one program the agent may execute from the ramdisk.
type Program struct {
	// Name is how the agent runs it, looked up in PATH (the ramdisk's
	// init gives the agent /usr/sbin:/usr/bin:/sbin:/bin).
	Name string
	// Package is the Debian package that ships it, which the ramdisk
	// build downloads to carry it.
	Package string
	// Feature is what needs it.
	Feature string
	// Without says what the feature does when the program is missing.
	Without string
	// Check is a harmless invocation that proves the program starts (its
	// loader and libraries resolve) and exits 0: the arguments after Name.
	Check []string
	// Aliases are other names the ramdisk gives the program, as symbolic
	// links beside it: names that operators' files (a step's #!/bin/sh)
	// expect, not names the agent runs.
	Aliases []string
}

// registry is the list, in the order the size report shows it. It is a
// function, not a package variable, so no caller can change it.
func registry() []Program {
	const (
		eph    = "partition images: the ephemeral partition (ephemeral_format)"
		raid   = "software RAID: create_configuration, delete_configuration, apply_configuration and the start-up assembly of md arrays"
		refuse = "the step fails naming the program"
	)
	return []Program{
		{Name: "mkfs.ext4", Package: "e2fsprogs", Feature: eph + ", Ironic's default ext4", Without: refuse, Check: []string{"-V"}},
		{Name: "mkfs.ext3", Package: "e2fsprogs", Feature: eph, Without: refuse, Check: []string{"-V"}},
		{Name: "mkfs.ext2", Package: "e2fsprogs", Feature: eph, Without: refuse, Check: []string{"-V"}},
		{Name: "mkfs.xfs", Package: "xfsprogs", Feature: eph, Without: refuse, Check: []string{"-V"}},
		{Name: "mdadm", Package: "mdadm", Feature: raid, Without: refuse + "; at start-up, arrays are not assembled (a warning)", Check: []string{"--version"}},
		// Static: one file, no libraries; its applets are linked at rescue
		// and at a debug login.
		{Name: "busybox", Package: "busybox-static", Feature: "rescue and debug login: the shell (and its applets) of the rescue user's and root's SSH and console logins; /bin/sh of the operator's executable steps",
			Without: "rescue and debug logins are impossible (an error on the console); the machine stays up; a step's #!/bin/sh script fails to start", Check: []string{"true"},
			Aliases: []string{"sh"}},
	}
}

// All returns every registered program (a fresh copy).
func All() []Program { return registry() }

// Lookup returns the program registered as name.
func Lookup(name string) (Program, bool) {
	for _, p := range registry() {
		if p.Name == name {
			return p, true
		}
	}
	return Program{}, false
}

// Packages returns the Debian packages of the registered programs, each
// once, in registry order.
func Packages() []string {
	var out []string
	for _, p := range registry() {
		if !slices.Contains(out, p.Package) {
			out = append(out, p.Package)
		}
	}
	return out
}

// UnregisteredError is a program name the registry does not list.
type UnregisteredError struct{ Name string }

func (e *UnregisteredError) Error() string {
	return fmt.Sprintf("program %q is not in the agent's program registry (internal/programs): the agent runs no program it does not list", e.Name)
}

// MissingError is a registered program that is not installed: not in this
// ramdisk (or, outside one, not on PATH).
type MissingError struct {
	Program Program
	Err     error // what the PATH lookup said
}

func (e *MissingError) Error() string {
	p := e.Program
	return fmt.Sprintf("program %s (Debian package %s) is not in this ramdisk or on PATH; %s needs it", p.Name, p.Package, p.Feature)
}

func (e *MissingError) Unwrap() error { return e.Err }

// RamdiskPath is the PATH of the ramdisk's processes: the agent, the
// steps it runs, the debug and rescue shells. /usr/local's directories,
// where an overlay puts an operator's programs (cmd/mkoverlay -program),
// come last, so the ramdisk's own programs are the ones the agent runs.
const RamdiskPath = "/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/sbin:/usr/local/bin"
