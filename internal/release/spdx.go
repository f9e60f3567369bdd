package release

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The SPDX 2.3 JSON document (https://spdx.github.io/spdx-spec/v2.3/),
// only the fields this bill of materials fills.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	DocumentDescribes []string           `json:"documentDescribes"`
	Packages          []spdxPackage      `json:"packages"`
	Files             []spdxFile         `json:"files,omitempty"`
	Relationships     []spdxRelationship `json:"relationships"`
	ExtractedLicenses []spdxExtracted    `json:"hasExtractedLicensingInfos,omitempty"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
	Comment  string   `json:"comment,omitempty"`
}

type spdxPackage struct {
	Name             string         `json:"name"`
	SPDXID           string         `json:"SPDXID"`
	VersionInfo      string         `json:"versionInfo,omitempty"`
	Supplier         string         `json:"supplier,omitempty"`
	DownloadLocation string         `json:"downloadLocation"`
	FilesAnalyzed    bool           `json:"filesAnalyzed"`
	Checksums        []spdxChecksum `json:"checksums,omitempty"`
	LicenseConcluded string         `json:"licenseConcluded"`
	LicenseDeclared  string         `json:"licenseDeclared"`
	CopyrightText    string         `json:"copyrightText"`
	Comment          string         `json:"comment,omitempty"`
	PrimaryPurpose   string         `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs     []spdxRef      `json:"externalRefs,omitempty"`
}

type spdxFile struct {
	FileName           string         `json:"fileName"`
	SPDXID             string         `json:"SPDXID"`
	Checksums          []spdxChecksum `json:"checksums"`
	LicenseConcluded   string         `json:"licenseConcluded"`
	LicenseInfoInFiles []string       `json:"licenseInfoInFiles"`
	LicenseComments    string         `json:"licenseComments,omitempty"`
	CopyrightText      string         `json:"copyrightText"`
	Comment            string         `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

type spdxExtracted struct {
	LicenseID string `json:"licenseId"`
	Name      string `json:"name"`
	Text      string `json:"extractedText"`
	Comment   string `json:"comment,omitempty"`
}

const noAssertion = "NOASSERTION"

// marshal writes the document as indented JSON with a final newline;
// encoding/json keeps the struct's field order, and every list is built
// in a fixed order, so the same inputs give the same bytes.
func (d *spdxDoc) marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("release: SPDX document: %w", err)
	}
	return b.Bytes(), nil
}

// spdxIDs hands out SPDX identifiers (SPDXRef-<kind>-<name>, letters,
// digits, '.' and '-' only), unique within a document.
type spdxIDs map[string]bool

var notIDChars = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func (ids spdxIDs) id(kind, name string) string {
	base := "SPDXRef-" + kind + "-" + strings.Trim(notIDChars.ReplaceAllString(name, "-"), "-")
	id := base
	for n := 2; ids[id]; n++ {
		id = fmt.Sprintf("%s-%d", base, n)
	}
	ids[id] = true
	return id
}
