package main

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestInventoryLinksNoUnusedFilesystems keeps packages whose
// initialisation every command pays at start, and which no command
// needs, out of the binary: go-diskfs' top-level and disk packages link
// every filesystem it knows (ext4's checksum tables, squashfs with xz),
// while deploy/partition and deploy/image need only its partition and
// backend packages.
func TestInventoryLinksNoUnusedFilesystems(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the binary's packages with")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, p := range []string{
		"github.com/diskfs/go-diskfs",
		"github.com/diskfs/go-diskfs/disk",
		"github.com/diskfs/go-diskfs/filesystem/ext4",
		"github.com/diskfs/go-diskfs/filesystem/squashfs",
		"github.com/ulikunitz/xz",
	} {
		if slices.Contains(deps, p) {
			t.Errorf("ironic-agent links %s; import the go-diskfs subpackages that are used instead", p)
		}
	}
}
