package erase

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// ErasePstore is the erase_pstore clean step: it deletes everything below
// the pstore mount (the kernel's crash records, which may hold the last
// tenant's data) and returns what it removed. No pstore mount is not an
// error. root is where /proc is read ("" = "/"); the mount point found
// there is used as is.
func ErasePstore(ctx context.Context, root string) ([]string, error) {
	if root == "" {
		root = "/"
	}
	dir, err := pstoreMount(filepath.Join(root, "proc/mounts"))
	if err != nil || dir == "" {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list pstore %s: %w", dir, err)
	}
	var removed []string
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		p := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			return removed, fmt.Errorf("remove pstore entry %s: %w", p, err)
		}
		removed = append(removed, p)
	}
	return removed, nil
}

// pstoreMount finds the line "pstore <dir> pstore ..." in a mounts file.
func pstoreMount(mounts string) (string, error) {
	f, err := os.Open(mounts)
	if err != nil {
		return "", fmt.Errorf("find pstore mount: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && fields[0] == "pstore" && fields[2] == "pstore" {
			return blockdev.UnescapeMount(fields[1]), nil
		}
	}
	return "", sc.Err()
}
