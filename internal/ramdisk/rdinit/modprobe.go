package rdinit

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ModprobeName is the name the kernel and programs run the agent binary
// under to load a module (the ramdisk's /usr/bin/modprobe links to it;
// the init points /proc/sys/kernel/modprobe there). The kernel asks for a
// module when something needs it: a mount of a file system ("fs-xfs"),
// a device-mapper table of a target ("dm-crypt"), an md array of a level
// ("md-level-1"). Modules the manifest marks ondemand are loaded only
// so, or by the init's own code, never at boot.
const ModprobeName = "modprobe"

// ModprobePath is where the initramfs has the link and where the init
// points the kernel's usermode helper.
const ModprobePath = "/usr/bin/" + ModprobeName

// modprobeRequest is a parsed modprobe command line: the kernel runs
// "modprobe -q -- NAME"; mdadm and others "modprobe NAME".
type modprobeRequest struct {
	name  string
	quiet bool
}

// parseModprobeArgs reads the modprobe options the kernel and programs
// use. Anything else (removal, parameters, other options) is refused by
// name rather than ignored: this is not kmod's modprobe.
func parseModprobeArgs(args []string) (modprobeRequest, error) {
	var r modprobeRequest
	var names []string
	opts := true
	for _, a := range args {
		switch {
		case opts && a == "--":
			opts = false
		case opts && (a == "-q" || a == "--quiet"):
			r.quiet = true
		case opts && (a == "-b" || a == "--use-blacklist"):
			// Nothing is blacklisted in the ramdisk.
		case opts && strings.HasPrefix(a, "-"):
			return r, fmt.Errorf("modprobe: option %s not supported: this modprobe loads a module of the initramfs by name or alias (modprobe [-q] [--] NAME)", a)
		default:
			names = append(names, a)
		}
	}
	switch {
	case len(names) == 0:
		return r, errors.New("modprobe: no module named (modprobe [-q] [--] NAME)")
	case len(names) > 1:
		return r, fmt.Errorf("modprobe: %s: module parameters or more than one module (%s) not supported (modprobe [-q] [--] NAME)", names[0], strings.Join(names[1:], " "))
	}
	r.name = names[0]
	return r, nil
}

// modulesForRequest returns the entries that name answers, as modprobe
// resolves it: the module of that name ("-" and "_" alike), else every
// module one of whose aliases matches it (the shell-glob matching of
// modules.alias: "fs-xfs", "md-level-1", "crypto-crc32c").
func modulesForRequest(entries []modEntry, name string) []modEntry {
	norm := strings.ReplaceAll(name, "-", "_")
	for _, e := range entries {
		if e.name == norm {
			return []modEntry{e}
		}
	}
	var out []modEntry
	for _, e := range entries {
		for _, a := range e.aliases {
			if ok, err := path.Match(a, name); err == nil && ok {
				out = append(out, e)
				break
			}
		}
	}
	return out
}
