// Command mkoverlay builds an overlay for a released ramdisk: a second
// initramfs archive that adds files to it without rebuilding it
// (internal/ramdisk/overlay). Boot it after the ramdisk's own, either as
// a second initrd or concatenated:
//
//	go run ./cmd/mkoverlay -base ironic-agent.initramfs -out site.initramfs \
//	    -file etc/ironic-python-agent.d/site.conf=./site.conf \
//	    -dir ./site-tree -program /opt/acme/bin/flashfw -module ./acme_nic.ko \
//	    -firmware acme/nic.bin=./nic.bin
//	cat ironic-agent.initramfs site.initramfs > ironic-agent-site.initramfs
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/overlay"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkoverlay:", err)
		os.Exit(1)
	}
}

type list []string

func (l *list) String() string     { return fmt.Sprint(*l) }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func run(args []string) error {
	fs := flag.NewFlagSet("mkoverlay", flag.ContinueOnError)
	var spec overlay.Spec
	out := fs.String("out", "", "the overlay archive to write (gzip'd newc cpio)")
	fs.StringVar(&spec.Base, "base", "", "the ramdisk's initramfs the overlay extends (needed for -module and -program)")
	fs.Var((*list)(&spec.Files), "file", "`DEST=SRC`: the host file SRC at DEST in the ramdisk (repeatable)")
	fs.Var((*list)(&spec.Dirs), "dir", "a host `DIR` whose tree is copied to the ramdisk's root (repeatable)")
	fs.Var((*list)(&spec.Programs), "program", "a host program `SRC[=DEST]` (default DEST usr/local/bin/<name>) with the libraries the ramdisk lacks (repeatable)")
	fs.Var((*list)(&spec.Modules), "module", "a kernel module `FILE` built for the ramdisk's kernel, loaded at boot like the ramdisk's own (repeatable)")
	fs.Var((*list)(&spec.Firmware), "firmware", "`NAME=SRC`: a firmware file at lib/firmware/NAME (repeatable)")
	fs.BoolVar(&spec.AllowUnsignedModules, "allow-unsigned-modules", false, "pack kernel modules without a signature, for machines that boot without Secure Boot (a kernel in lockdown refuses them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *out == "" {
		return fmt.Errorf("-out is required")
	}
	var buf bytes.Buffer
	entries, err := overlay.Build(spec, &buf)
	if err != nil {
		return err
	}
	// Complete or absent: a temporary file renamed into place.
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".mkoverlay-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return err
	}
	for _, e := range entries {
		fmt.Printf("/%-60s %9d  %s\n", e.Path, e.Size, e.From)
	}
	fmt.Printf("%s: %d files, %d bytes\n", *out, len(entries), buf.Len())
	return nil
}
