package release

import (
	"crypto/sha1"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
)

// SBOMInput is what the bill of materials describes: one ramdisk build.
type SBOMInput struct {
	Name    string // the document's name: the release's base name
	Version string
	Commit  string
	Created time.Time // the commit's time, so a rebuild writes the same
	// Namespace is the document's unique URI; the caller derives it from
	// the release's content.
	Namespace string
	Agent     string // the agent binary (its Go modules are read from it)
	Kernel    *ramdisk.Kernel
	Firmware  []ramdisk.FirmwarePackage
	Programs  *ramdisk.ProgramSet
	Report    ramdisk.Report // what the initramfs holds
	// ESP is the release's ESP image ("": none), BootChain the Debian
	// packages its shim and GRUB come from (addBootChain).
	ESP       string
	BootChain []ramdisk.FirmwarePackage
}

// debPackage is one Debian package taken into the ramdisk.
type debPackage struct {
	name, version, arch, sha256, role string
}

// SBOM renders the SPDX 2.3 JSON bill of materials: the release package,
// which contains every Debian package taken into the ramdisk (the
// kernel's, the firmware packages that gave files, the programs' and
// their libraries', with their versions and the .deb's digest), every
// firmware file (its digests, its package, its licence as the package's
// copyright file states it) and depends on every Go module of the agent
// binary and its Go toolchain.
func SBOM(in SBOMInput) ([]byte, error) {
	ids := spdxIDs{}
	doc := &spdxDoc{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              in.Name,
		DocumentNamespace: in.Namespace,
		CreationInfo: spdxCreation{
			Created:  in.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: ironic-agent-mkrelease-" + in.Version},
			Comment:  "The creation time is the commit's, so that a rebuild of the same commit is identical.",
		},
	}
	ids["SPDXRef-DOCUMENT"] = true
	root := ids.id("Package", "ironic-agent")
	doc.DocumentDescribes = []string{root}
	doc.Packages = append(doc.Packages, spdxPackage{
		Name: "ironic-agent", SPDXID: root, VersionInfo: in.Version,
		DownloadLocation: "git+https://github.com/ironic-go/ironic-agent@" + strings.TrimSuffix(in.Commit, "-dirty"),
		LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
		PrimaryPurpose: "OPERATING_SYSTEM",
		Comment:        "The agent's ramdisk (kernel and initramfs) built from commit " + in.Commit + ".",
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", root})

	debs, err := debPackages(in)
	if err != nil {
		return nil, err
	}
	pkgID := map[string]string{}
	for _, d := range debs {
		v := d.version
		if v == "" {
			return nil, fmt.Errorf("release: package %s: no version recorded for it", d.name)
		}
		id := ids.id("Package-deb", d.name)
		pkgID[d.name] = id
		doc.Packages = append(doc.Packages, spdxPackage{
			Name: d.name, SPDXID: id, VersionInfo: v, Supplier: "Organization: Debian",
			DownloadLocation: noAssertion,
			Checksums:        []spdxChecksum{{"SHA256", d.sha256}},
			LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
			Comment:      d.role + "; licences per file in its usr/share/doc/" + d.name + "/copyright",
			ExternalRefs: []spdxRef{{"PACKAGE-MANAGER", "purl", "pkg:deb/debian/" + d.name + "@" + purlEscape(v) + "?arch=" + d.arch}},
		})
		doc.Relationships = append(doc.Relationships, spdxRelationship{root, "CONTAINS", id})
	}

	if err := addFirmwareFiles(doc, ids, in, pkgID); err != nil {
		return nil, err
	}
	if err := addBootChain(doc, ids, root, in); err != nil {
		return nil, err
	}
	if err := addGoModules(doc, ids, root, in.Agent); err != nil {
		return nil, err
	}
	return doc.marshal()
}

// debPackages lists the Debian packages the ramdisk took files from, in
// a fixed order: the kernel's, then the firmware packages in the order of
// firmware-packages.txt, then the programs' packages by name.
func debPackages(in SBOMInput) ([]debPackage, error) {
	var out []debPackage
	seen := map[string]bool{}
	if in.Kernel != nil {
		for _, d := range in.Kernel.Debs {
			out = append(out, debPackage{d.Name, d.Version, d.Architecture, d.SHA256, "kernel " + in.Kernel.Version + " (flavour " + in.Kernel.Flavour + ")"})
			seen[d.Name] = true
		}
	}
	used := map[string]bool{}
	for _, f := range in.Report.Firmware {
		used[f.Package] = true
	}
	for _, p := range in.Firmware {
		if used[p.Name] && !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, debPackage{p.Name, p.Version, debArch(p.Deb, p.URL), p.SHA256, "firmware files"})
		}
	}
	if in.Programs != nil {
		usedP := map[string]bool{}
		for _, f := range in.Report.Programs {
			usedP[f.Package] = true
		}
		pkgs := slices.Clone(in.Programs.Packages)
		slices.SortFunc(pkgs, func(a, b ramdisk.FirmwarePackage) int { return strings.Compare(a.Name, b.Name) })
		for _, p := range pkgs {
			if usedP[p.Name] && !seen[p.Name] {
				seen[p.Name] = true
				out = append(out, debPackage{p.Name, p.Version, debArch(p.Deb, p.URL), p.SHA256, "programs and libraries"})
			}
		}
	}
	return out, nil
}

// addFirmwareFiles adds every firmware file of the initramfs, contained
// in its package, with the licence the package's copyright file states
// for it (NOASSERTION when the file is not machine-readable or no Files
// paragraph covers it).
func addFirmwareFiles(doc *spdxDoc, ids spdxIDs, in SBOMInput, pkgID map[string]string) error {
	byName := map[string]ramdisk.FirmwarePackage{}
	for _, p := range in.Firmware {
		byName[p.Name] = p
	}
	rights := map[string]*copyright{}
	extracted := map[string]bool{}
	for _, f := range in.Report.Firmware {
		p, ok := byName[f.Package]
		if !ok {
			return fmt.Errorf("release: firmware %s: its package %s is not among the firmware packages", f.Name, f.Package)
		}
		host, ok := p.File(f.Name)
		if !ok {
			return fmt.Errorf("release: firmware %s: not in package %s (%s)", f.Name, p.Name, p.Dir)
		}
		s256, err := cachedir.FileSHA256(host)
		if err != nil {
			return err
		}
		s1, err := fileSum(host, sha1.New())
		if err != nil {
			return err
		}
		c, ok := rights[p.Name]
		if !ok {
			c = nil
			if b, err := os.ReadFile(filepath.Join(p.Dir, "usr/share/doc", p.Name, "copyright")); err == nil {
				c, _ = parseCopyright(string(b))
			}
			rights[p.Name] = c
		}
		file := spdxFile{
			FileName: "./lib/firmware/" + f.Name, SPDXID: ids.id("File", "firmware-"+f.Name),
			Checksums:        []spdxChecksum{{"SHA1", s1}, {"SHA256", s256}},
			LicenseConcluded: noAssertion, LicenseInfoInFiles: []string{noAssertion}, CopyrightText: noAssertion,
			LicenseComments: "Package " + p.Name + "'s copyright file is not machine-readable or does not cover the file.",
		}
		// The source tree names a file shipped compressed without .xz.
		if c != nil {
			if lic, files, ok := c.license(strings.TrimSuffix(f.Name, ".xz")); ok && lic != "" {
				expr, lids := spdxExpression(p.Name, lic)
				file.LicenseConcluded, file.LicenseInfoInFiles = expr, lids
				file.LicenseComments = "As package " + p.Name + "'s copyright file states: License: " + lic + " (Files: " + files + ")."
				for i, id := range lids {
					if !strings.HasPrefix(id, "LicenseRef-") || extracted[id] {
						continue
					}
					extracted[id] = true
					name := strings.TrimSpace(licenseOp.Split(lic, -1)[i])
					text := c.texts[name]
					if strings.TrimSpace(text) == "" {
						text = "The licence named " + name + " in /usr/share/doc/" + p.Name + "/copyright of the Debian package " + p.Name + "."
					}
					doc.ExtractedLicenses = append(doc.ExtractedLicenses, spdxExtracted{
						LicenseID: id, Name: name, Text: strings.TrimSpace(text),
						Comment: "From the Debian package " + p.Name + "'s copyright file.",
					})
				}
			}
		}
		doc.Files = append(doc.Files, file)
		doc.Relationships = append(doc.Relationships, spdxRelationship{pkgID[p.Name], "CONTAINS", file.SPDXID})
	}
	return nil
}

// addGoModules adds the agent binary's Go toolchain, main module and
// every module it was linked with, as its build information records
// them.
func addGoModules(doc *spdxDoc, ids spdxIDs, root, agent string) error {
	bi, err := buildinfo.ReadFile(agent)
	if err != nil {
		return fmt.Errorf("release: Go build information of %s: %w", agent, err)
	}
	add := func(path, version, sum, comment string) {
		id := ids.id("Package-go", path)
		p := spdxPackage{
			Name: path, SPDXID: id, VersionInfo: version, DownloadLocation: noAssertion,
			LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
			Comment:      comment,
			ExternalRefs: []spdxRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + version}},
		}
		if sum != "" {
			p.Comment = strings.TrimSpace(p.Comment + " go.sum hash " + sum)
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{root, "DEPENDS_ON", id})
	}
	add("stdlib", bi.GoVersion, "", "The Go toolchain and standard library the agent was built with.")
	main := bi.Main.Version
	if main == "" || main == "(devel)" {
		main = "(devel)"
	}
	add(bi.Main.Path, main, "", "The agent's own module (the binary /usr/bin/ironic-agent, /init).")
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		add(m.Path, m.Version, m.Sum, "")
	}
	return nil
}

func fileSum(p string, h interface {
	io.Writer
	Sum([]byte) []byte
}) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("release: %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// debArch is the architecture of a package from the archive file name
// its URL ends in, <name>_<version>_<arch>.deb (the cached file is named
// by its digest).
func debArch(deb, url string) string {
	name := path.Base(url)
	if name == "." || name == "/" || !strings.HasSuffix(name, ".deb") {
		name = filepath.Base(deb)
	}
	parts := strings.Split(strings.TrimSuffix(name, ".deb"), "_")
	return parts[len(parts)-1]
}

// purlEscape percent-encodes the characters of a Debian version a purl
// version may not hold as such (':' of an epoch, '+').
func purlEscape(v string) string {
	return strings.NewReplacer(":", "%3A", "+", "%2B").Replace(v)
}
