package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// fipsRequested says whether the kernel command line asks for FIPS mode
// (fips=1, as Metal3's ironic-image adds when its host runs in it).
func fipsRequested(kernel map[string]string) bool {
	return strings.TrimSpace(kernel["fips"]) == "1"
}

// reexecFIPS runs this process again, same arguments, with Go's FIPS
// 140-3 mode on (GODEBUG fips140=on), which only a process's start can
// choose. The init starts the agent so already; this covers any other
// start.
func reexecFIPS() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("fips=1: cannot restart in FIPS mode: %w", err)
	}
	env := os.Environ()
	debug := "fips140=on"
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if v != "" {
				debug = v + "," + debug
			}
			env = append(env[:i], env[i+1:]...)
			break
		}
	}
	env = append(env, "GODEBUG="+debug)
	if err := syscall.Exec(exe, os.Args, env); err != nil {
		return fmt.Errorf("fips=1: cannot restart %s in FIPS mode: %w", exe, err)
	}
	return nil
}

// kernelFIPS is the kernel's own FIPS mode (/proc/sys/crypto/fips_enabled),
// "unknown" when it cannot be read.
func kernelFIPS() string {
	b, err := os.ReadFile("/proc/sys/crypto/fips_enabled")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
