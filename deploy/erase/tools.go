package erase

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// nvmeIDCtrl is the part of `nvme id-ctrl -o json` the erase needs.
type nvmeIDCtrl struct {
	OACS    *int `json:"oacs"`
	FNA     *int `json:"fna"`
	SaniCap *int `json:"sanicap"`
}

func parseNVMeIDCtrl(out []byte) (nvmeIDCtrl, error) {
	var id nvmeIDCtrl
	if len(bytes.TrimSpace(out)) == 0 {
		return id, errors.New("nvme-cli returned no information")
	}
	if err := json.Unmarshal(out, &id); err != nil {
		return id, fmt.Errorf("nvme id-ctrl output is not the expected JSON: %w", err)
	}
	if id.OACS == nil || id.FNA == nil {
		return id, errors.New("nvme id-ctrl output lacks oacs or fna")
	}
	return id, nil
}

// NVMe id-ctrl bits (NVMe base specification).
const (
	nvmeOACSFormat       = 1 << 1 // Format NVM supported
	nvmeFNAAllNamespaces = 1 << 0 // format applies to all namespaces
	nvmeFNASecureAllNS   = 1 << 1 // secure erase applies to all namespaces
	nvmeFNACrypto        = 1 << 2 // cryptographic erase supported
)

// nvmeFormatMode is IPA's choice: crypto erase (ses 2) when fna says so,
// else user-data erase (ses 1); no format support is an error.
func nvmeFormatMode(id nvmeIDCtrl) (int, error) {
	if *id.OACS&nvmeOACSFormat == 0 {
		return 0, errors.New("nvme-cli did not return any supported format modes (oacs bit 1 clear)")
	}
	if *id.FNA&nvmeFNACrypto != 0 {
		return 2, nil
	}
	return 1, nil
}
