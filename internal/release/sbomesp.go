package release

import (
	"crypto/sha1"
	"path/filepath"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
)

// addBootChain adds the release's ESP image (SBOMInput.ESP) as a file of
// the release, with its digests, and the Debian packages of its signed
// boot chain (SBOMInput.BootChain), which the release contains and the
// image is generated from. Nothing without an ESP.
func addBootChain(doc *spdxDoc, ids spdxIDs, root string, in SBOMInput) error {
	if in.ESP == "" {
		return nil
	}
	s256, err := cachedir.FileSHA256(in.ESP)
	if err != nil {
		return err
	}
	s1, err := fileSum(in.ESP, sha1.New())
	if err != nil {
		return err
	}
	name := filepath.Base(in.ESP)
	file := spdxFile{
		FileName: "./" + name, SPDXID: ids.id("File", name),
		Checksums:        []spdxChecksum{{"SHA1", s1}, {"SHA256", s256}},
		LicenseConcluded: noAssertion, LicenseInfoInFiles: []string{noAssertion}, CopyrightText: noAssertion,
		Comment: "The EFI System Partition image for Ironic's [conductor]bootloader and the ISO's UEFI boot: " +
			ramdisk.ESPShimPath + " is Debian's shim (signed by Microsoft's UEFI CA), " + ramdisk.ESPGrubPath +
			" Debian's GRUB (signed with Debian's key), " + ramdisk.GrubConfigPath + " the configuration that GRUB reads.",
	}
	doc.Files = append(doc.Files, file)
	doc.Relationships = append(doc.Relationships, spdxRelationship{root, "CONTAINS", file.SPDXID})
	for _, p := range in.BootChain {
		id := ids.id("Package-deb", p.Name)
		doc.Packages = append(doc.Packages, spdxPackage{
			Name: p.Name, SPDXID: id, VersionInfo: p.Version, Supplier: "Organization: Debian",
			DownloadLocation: noAssertion,
			Checksums:        []spdxChecksum{{"SHA256", p.SHA256}},
			LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
			Comment:      "Secure Boot chain of " + name + "; licences per file in its usr/share/doc/" + p.Name + "/copyright",
			ExternalRefs: []spdxRef{{"PACKAGE-MANAGER", "purl", "pkg:deb/debian/" + p.Name + "@" + purlEscape(p.Version) + "?arch=" + debArch(p.Deb, p.URL)}},
		})
		doc.Relationships = append(doc.Relationships, spdxRelationship{root, "CONTAINS", id},
			spdxRelationship{file.SPDXID, "GENERATED_FROM", id})
	}
	return nil
}
