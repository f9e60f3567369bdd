package release

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/debian"
)

const testCopyright = `Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: linux-firmware

Files: *
Copyright: someone
License: non-free
 Redistribution of the binary
 .
 is allowed.

Files: bnx2/*
Copyright: Broadcom
License: GPL-2 or MPL-1.1

Files: bnx2/bnx2-rv2p-*.fw
# the last match wins
License: binary-redist-Broadcom

License: binary-redist-Broadcom
 Permission to redistribute.
`

func TestCopyright(t *testing.T) {
	c, err := parseCopyright(testCopyright)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"bnx2/bnx2-mips-09-6.2.1b.fw": "GPL-2 or MPL-1.1",
		"bnx2/bnx2-rv2p-09-6.0.17.fw": "binary-redist-Broadcom",
		"other/x.bin":                 "non-free",
	} {
		if got, _, ok := c.license(name); !ok || got != want {
			t.Errorf("license(%s) = %q, %v; want %q", name, got, ok, want)
		}
	}
	if got := c.texts["non-free"]; got != "Redistribution of the binary\n\nis allowed." {
		t.Errorf("text of non-free = %q", got)
	}
	if _, err := parseCopyright("This package was debianized by...\n"); err == nil {
		t.Error("a copyright file that is not DEP-5 parsed")
	}
	expr, ids := spdxExpression("firmware-bnx2", "GPL-2 or MPL-1.1")
	if expr != "GPL-2.0-only OR MPL-1.1" || len(ids) != 2 {
		t.Errorf("expression %q %q", expr, ids)
	}
	if expr, _ := spdxExpression("firmware-bnx2", "binary-redist-Broadcom"); expr != "LicenseRef-firmware-bnx2-binary-redist-Broadcom" {
		t.Errorf("expression %q", expr)
	}
}

func FuzzCopyright(f *testing.F) {
	f.Add(testCopyright)
	f.Add("Format: copyright-format\n\nFiles: a\\*b ?\nLicense: x and y\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := parseCopyright(text)
		if err != nil {
			return
		}
		if lic, _, ok := c.license("bnx2/x.fw"); ok {
			expr, ids := spdxExpression("p", lic)
			if len(ids) == 0 && expr != "" {
				t.Errorf("expression %q without identifiers", expr)
			}
		}
	})
}

// fakeDeb makes an extracted package with a firmware file and a
// copyright file, and its .deb (named as apt-get download names it).
func fakeDeb(t *testing.T, dir, name, version string) ramdisk.FirmwarePackage {
	t.Helper()
	deb := filepath.Join(dir, name+"_"+strings.ReplaceAll(version, ":", "%3a")+"_all.deb")
	writeFile(t, deb, "deb "+name)
	p := ramdisk.FirmwarePackage{Name: name, Version: version, Deb: deb, SHA256: strings.Repeat("ab", 32), Dir: filepath.Join(dir, name),
		URL: "http://mirror.example/debian/pool/main/x/" + filepath.Base(deb)}
	writeFile(t, filepath.Join(p.Dir, "usr/share/doc", name, "copyright"), testCopyright)
	writeFile(t, filepath.Join(p.Dir, "lib/firmware/bnx2/bnx2-rv2p-09-6.0.17.fw.xz"), "fw")
	writeFile(t, filepath.Join(p.Dir, "lib/firmware/bnx2/bnx2-mips-09-6.2.1b.fw"), "fw2")
	return p
}

// The bill of materials is valid SPDX 2.3 as far as its structure goes
// (every identifier referenced exists, every LicenseRef is declared),
// lists what the build took in, and is the same for the same inputs.
func TestSBOM(t *testing.T) {
	dir := t.TempDir()
	fw := fakeDeb(t, dir, "firmware-bnx2", "20250410-2")
	unused := fakeDeb(t, dir, "firmware-unused", "1")
	prog := fakeDeb(t, dir, "busybox-static", "1:1.35.0-4")
	shim := fakeDeb(t, dir, "shim-signed", "1.47+16.1-1")
	esp := filepath.Join(dir, ESPName("0.2.0", "amd64"))
	writeFile(t, esp, "FAT")
	agent, err := os.Executable() // a Go binary with build information
	if err != nil {
		t.Fatal(err)
	}
	in := SBOMInput{
		Name: "ironic-agent-0.2.0-amd64", Version: "0.2.0", Commit: strings.Repeat("c", 40),
		Created: time.Unix(1700000000, 0), Namespace: "https://example.com/spdx/x", Agent: agent,
		Kernel: &ramdisk.Kernel{Flavour: "trixie", Package: "linux-image-6.12.1-amd64", Version: "6.12.1-amd64",
			Debs: []debian.Package{{Name: "linux-image-6.12.1-amd64", Version: "6.12.1-1", Architecture: "amd64", SHA256: strings.Repeat("cd", 32)}}},
		Firmware: []ramdisk.FirmwarePackage{fw, unused},
		Programs: &ramdisk.ProgramSet{Packages: []ramdisk.FirmwarePackage{prog}},
		Report: ramdisk.Report{
			Firmware: []ramdisk.FirmwareFile{{Name: "bnx2/bnx2-rv2p-09-6.0.17.fw.xz", Package: "firmware-bnx2"}, {Name: "bnx2/bnx2-mips-09-6.2.1b.fw", Package: "firmware-bnx2"}},
			Programs: []ramdisk.ProgramFile{{Path: "bin/busybox", Package: "busybox-static"}},
		},
		ESP: esp, BootChain: []ramdisk.FirmwarePackage{shim},
	}
	a, err := SBOM(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := SBOM(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two documents of the same inputs differ")
	}
	var doc spdxDoc
	if err := json.Unmarshal(a, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.CreationInfo.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("header: %s %s %s", doc.SPDXVersion, doc.DataLicense, doc.CreationInfo.Created)
	}
	// SPDX 2.3's JSON schema enumerates primaryPackagePurpose; a value
	// outside it fails validators (OPERATING-SYSTEM, with a hyphen, did).
	purposes := map[string]bool{"OTHER": true, "INSTALL": true, "ARCHIVE": true, "FIRMWARE": true, "APPLICATION": true,
		"FRAMEWORK": true, "LIBRARY": true, "CONTAINER": true, "SOURCE": true, "DEVICE": true, "OPERATING_SYSTEM": true, "FILE": true}
	for _, p := range doc.Packages {
		if p.PrimaryPurpose != "" && !purposes[p.PrimaryPurpose] {
			t.Errorf("package %s: primaryPackagePurpose %q is not one of SPDX 2.3's", p.Name, p.PrimaryPurpose)
		}
	}
	ids := map[string]bool{"SPDXRef-DOCUMENT": true}
	idRE := regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)
	versions := map[string]string{}
	for _, p := range doc.Packages {
		if !idRE.MatchString(p.SPDXID) || ids[p.SPDXID] {
			t.Errorf("package %s: identifier %q bad or repeated", p.Name, p.SPDXID)
		}
		ids[p.SPDXID] = true
		versions[p.Name] = p.VersionInfo
	}
	for name, want := range map[string]string{
		"linux-image-6.12.1-amd64": "6.12.1-1", "firmware-bnx2": "20250410-2", "busybox-static": "1:1.35.0-4", "ironic-agent": "0.2.0",
		"shim-signed": "1.47+16.1-1",
	} {
		if versions[name] != want {
			t.Errorf("package %s: version %q, want %q", name, versions[name], want)
		}
	}
	if _, ok := versions["firmware-unused"]; ok {
		t.Error("a firmware package that gave no file is listed")
	}
	if versions["stdlib"] == "" || len(versions) < 6 {
		t.Errorf("no Go toolchain or modules: %v", versions)
	}
	declared := map[string]bool{}
	for _, e := range doc.ExtractedLicenses {
		declared[e.LicenseID] = true
		if e.Text == "" {
			t.Errorf("%s has no text", e.LicenseID)
		}
	}
	lic := map[string]string{}
	for _, f := range doc.Files {
		ids[f.SPDXID] = true
		lic[f.FileName] = f.LicenseConcluded
		for _, l := range f.LicenseInfoInFiles {
			if strings.HasPrefix(l, "LicenseRef-") && !declared[l] {
				t.Errorf("%s: %s not declared", f.FileName, l)
			}
		}
	}
	if got := lic["./lib/firmware/bnx2/bnx2-rv2p-09-6.0.17.fw.xz"]; got != "LicenseRef-firmware-bnx2-binary-redist-Broadcom" {
		t.Errorf("licence of the compressed file: %q", got)
	}
	if _, ok := lic["./ironic-agent-0.2.0-amd64.esp"]; !ok {
		t.Error("the ESP image is not among the files")
	}
	if got := lic["./lib/firmware/bnx2/bnx2-mips-09-6.2.1b.fw"]; got != "GPL-2.0-only OR MPL-1.1" {
		t.Errorf("licence: %q", got)
	}
	for _, r := range doc.Relationships {
		if !ids[r.Element] || !ids[r.Related] {
			t.Errorf("relationship %+v names an unknown element", r)
		}
	}
}
