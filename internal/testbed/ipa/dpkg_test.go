package ipa

import (
	"slices"
	"strings"
	"testing"
)

const sampleStatus = `Package: base-files
Status: install ok installed
Essential: yes
Priority: required
Depends: libc6 (>= 2.36)

Package: libc6
Status: install ok installed
Priority: optional
Multi-Arch: same

Package: ironic-python-agent
Status: install ok installed
Depends: python3:any, libguestfs-tools, qemu-utils | qemu-img,
 stress-ng (>= 0.1)

Package: python3.14
Status: install ok installed
Provides: python3

Package: libguestfs-tools
Status: install ok installed
Depends: libguestfs0, perl

Package: libguestfs0
Status: install ok installed
Depends: qemu-system-x86

Package: qemu-system-x86
Status: install ok installed

Package: qemu-utils
Status: install ok installed
Depends: libc6

Package: perl
Status: install ok installed

Package: stress-ng
Status: deinstall ok config-files

Package: removed-but-listed
Status: deinstall ok config-files
`

func TestUnneeded(t *testing.T) {
	pkgs, err := parseDpkgStatus(strings.NewReader(sampleStatus))
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 9 {
		t.Fatalf("%d installed packages, want 9: %+v", len(pkgs), pkgs)
	}
	ipa := pkgs[slices.IndexFunc(pkgs, func(p dpkgPackage) bool { return p.Name == "ironic-python-agent" })]
	want := [][]string{{"python3"}, {"libguestfs-tools"}, {"qemu-utils", "qemu-img"}, {"stress-ng"}}
	if !slices.EqualFunc(ipa.Depends, want, slices.Equal) {
		t.Errorf("Depends = %v, want %v", ipa.Depends, want)
	}
	got := unneeded(pkgs, []string{"ironic-python-agent"}, []string{"libguestfs-tools", "stress-ng"})
	if w := []string{"libguestfs-tools", "libguestfs0", "perl", "qemu-system-x86"}; !slices.Equal(got, w) {
		t.Errorf("unneeded = %v, want %v", got, w)
	}
}

func FuzzParseDpkgStatus(f *testing.F) {
	f.Add(sampleStatus)
	f.Add("Package: a\nStatus: install ok installed\nDepends: b |, , (c)\n")
	f.Add(" continuation\n\nPackage:\n")
	f.Fuzz(func(t *testing.T, s string) {
		pkgs, err := parseDpkgStatus(strings.NewReader(s))
		if err != nil {
			return
		}
		_ = unneeded(pkgs, []string{"a"}, []string{"b"})
		for _, p := range pkgs {
			for _, alts := range p.Depends {
				if len(alts) == 0 {
					t.Fatalf("empty alternative list in %+v", p)
				}
			}
		}
	})
}
