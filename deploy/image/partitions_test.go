package image

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/ipaerror"
)

func TestValidatePartitioning(t *testing.T) {
	dir := t.TempDir()
	mbr := make([]byte, 1<<20)
	mbr[446+4] = 0x83
	binary.LittleEndian.PutUint32(mbr[446+8:], 2048)
	binary.LittleEndian.PutUint32(mbr[446+12:], 4096)
	mbr[510], mbr[511] = 0x55, 0xaa
	good := filepath.Join(dir, "good")
	os.WriteFile(good, mbr, 0o600)
	if err := ValidatePartitioning(good); err != nil {
		t.Errorf("MBR with one partition: %v", err)
	}
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, testImage(1<<20, 60), 0o600)
	var e *ipaerror.Error
	if err := ValidatePartitioning(junk); !errors.As(err, &e) || e.Type != "DeploymentError" {
		t.Errorf("junk: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, make([]byte, 1<<20), 0o600)
	if err := ValidatePartitioning(empty); err == nil || !strings.Contains(err.Error(), "No partitions found on the device "+empty) && !strings.Contains(err.Error(), "Unable to find a valid partition table") {
		t.Errorf("empty: %v", err)
	}
}
