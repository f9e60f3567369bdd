package rdinit

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseModprobeArgs(t *testing.T) {
	for _, c := range []struct {
		args  []string
		name  string
		quiet bool
		err   string
	}{
		// The kernel's usermode helper: call_modprobe's argv.
		{args: []string{"-q", "--", "fs-xfs"}, name: "fs-xfs", quiet: true},
		{args: []string{"md_mod"}, name: "md_mod"},
		{args: []string{"-b", "dm-multipath"}, name: "dm-multipath"},
		{args: []string{"--", "-odd"}, name: "-odd"},
		{args: []string{"-r", "xfs"}, err: "option -r not supported"},
		{args: []string{"-q"}, err: "no module named"},
		{args: []string{"bonding", "mode=4"}, err: "module parameters"},
	} {
		r, err := parseModprobeArgs(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one saying %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || r.name != c.name || r.quiet != c.quiet {
			t.Errorf("%q: %+v, %v; want %q quiet=%v", c.args, r, err, c.name, c.quiet)
		}
	}
}

const aliasList = "/lib/modules/k/libcrc32c.ko.xz\t\t\n" +
	"/lib/modules/k/xfs.ko.xz\tlibcrc32c\tfs-xfs\tondemand\n" +
	"/lib/modules/k/md-mod.ko.xz\t\tblock-major-9-* devname:md0\n" +
	"/lib/modules/k/raid1.ko.xz\tmd_mod\tmd-personality-3 md-raid1 md-level-1\n" +
	"/lib/modules/k/dm-crypt.ko.xz\t\t\tondemand\n"

func TestModulesForRequest(t *testing.T) {
	entries := parseModuleList(aliasList)
	for req, want := range map[string][]string{
		"fs-xfs":          {"xfs"},
		"xfs":             {"xfs"},
		"md-level-1":      {"raid1"},
		"block-major-9-0": {"md_mod"},
		"dm-crypt":        {"dm_crypt"}, // by name, "-" as "_"
		"fs-zfs":          nil,
	} {
		var got []string
		for _, e := range modulesForRequest(entries, req) {
			got = append(got, e.name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", req, got, want)
		}
	}
}

func TestLoadModuleByAlias(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "modules")
	sys := filepath.Join(dir, "sys-module")
	os.MkdirAll(filepath.Join(sys, "libcrc32c"), 0o755) // in the kernel already
	os.WriteFile(list, []byte(aliasList), 0o644)
	// An overlay's list adds a module the kernel may ask for too.
	os.MkdirAll(filepath.Join(dir, "modules.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "modules.d", "site.list"), []byte("/lib/modules/k/extra/zfs.ko\t\tfs-zfs\n"), 0o644)
	var loaded []string
	load := func(p string) error { loaded = append(loaded, filepath.Base(p)); return nil }
	if err := loadModule(list, sys, "fs-xfs", load, nil); err != nil {
		t.Fatal(err)
	}
	// An ondemand module when asked for; its dependency in the kernel
	// already is not read again.
	if want := []string{"xfs.ko.xz"}; !slices.Equal(loaded, want) {
		t.Errorf("fs-xfs loaded %v, want %v", loaded, want)
	}
	loaded = nil
	if err := loadModule(list, sys, "md-level-1", load, nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"md-mod.ko.xz", "raid1.ko.xz"}; !slices.Equal(loaded, want) {
		t.Errorf("md-level-1 loaded %v, want %v", loaded, want)
	}
	loaded = nil
	if err := loadModule(list, sys, "fs-zfs", load, nil); err != nil || !slices.Equal(loaded, []string{"zfs.ko"}) {
		t.Errorf("fs-zfs from the overlay's list: loaded %v, %v", loaded, err)
	}
	err := loadModule(list, sys, "fs-reiserfs", load, nil)
	if !errors.Is(err, errNoModule) || !strings.Contains(err.Error(), "fs-reiserfs") {
		t.Errorf("no module answers: %v", err)
	}
}
