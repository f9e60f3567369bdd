package rdinit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Modprobe loads the module args name (the kernel's usermode helper, or a
// program's modprobe call) with its dependencies from the initramfs's
// module lists (loadModule) and returns the exit status. A name no module
// answers is status 1, silent with -q as kmod's is; a load that fails is
// also written to the kernel log, where dmesg and the agent's log
// collection find it, since the kernel's helper has no output of its own.
func Modprobe(args []string, stderr io.Writer) int {
	r, err := parseModprobeArgs(args)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	err = loadModule(ModuleList, "/sys/module", r.name, finit, nil)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errNoModule):
		if !r.quiet {
			fmt.Fprintf(stderr, "modprobe: %v\n", err)
		}
		return 1
	}
	err = fmt.Errorf("modprobe %s: %w", r.name, err)
	fmt.Fprintln(stderr, err)
	if f, ferr := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); ferr == nil {
		// <3>: KERN_ERR.
		fmt.Fprintf(f, "<3>ironic-agent: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		f.Close()
	}
	return 1
}
