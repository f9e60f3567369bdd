package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteImageCommand(t *testing.T) {
	dir := t.TempDir()
	img := bytes.Repeat([]byte("ironic-agent write-image test\n"), 100000)
	src, dst := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk")
	if err := os.WriteFile(src, img, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(img)
	digest := hex.EncodeToString(sum[:])

	var out, errOut bytes.Buffer
	code := runMain(context.Background(), []string{"write-image", "--quiet", "--checksum", "sha256:" + digest, src, dst}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "verified sha256 "+digest+" of 3000000 bytes (raw image") {
		t.Errorf("final line %q", out.String())
	}
	got, _ := os.ReadFile(dst)
	if !bytes.Equal(got[:len(img)], img) {
		t.Error("target differs from the image")
	}

	out.Reset()
	errOut.Reset()
	code = runMain(context.Background(), []string{"write-image", "--quiet", "--checksum", "sha256:" + strings.Repeat("0", 64), src, dst}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "Error verifying image checksum") {
		t.Errorf("wrong checksum: exit %d, stderr %q", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	code = runMain(context.Background(), []string{"write-image", src, dst, "--quiet"}, &out, &errOut)
	if code != 0 || !strings.HasPrefix(out.String(), "NOT verified (no checksum given), computed sha256 "+digest) {
		t.Errorf("no checksum: exit %d, stdout %q stderr %q", code, out.String(), errOut.String())
	}
	// Without --quiet the stage times follow the progress.
	out.Reset()
	errOut.Reset()
	code = runMain(context.Background(), []string{"write-image", "--checksum", "sha256:" + digest, src, dst}, &out, &errOut)
	if code != 0 || !strings.Contains(errOut.String(), "where the time went: receive ") {
		t.Errorf("stage times: exit %d, stderr %q", code, errOut.String())
	}
}
