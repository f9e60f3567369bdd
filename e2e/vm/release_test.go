package vm

import (
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/internal/testbed/releasedir"
)

// releaseVersion is the version the served release directory carries:
// the release's own names, not the build's stamp.
const releaseVersion = "0.2.0"

// servedRelease is a release directory laid out as `make release` writes
// it, from the test bed's ramdisk, served on the provisioning network.
type servedRelease struct {
	*releasedir.Release
	base string // its URL, with a trailing slash
}

// serveRelease lays out the release of the ramdisk rd in a directory of
// the test's and serves it at http://pxeHTTP/releases/ironic-agent/<version>/.
func serveRelease(t *testing.T, bed *pxeBed, rd *qemu.Ramdisk) *servedRelease {
	t.Helper()
	r, err := releasedir.Write(t.TempDir(), releaseVersion, "amd64", rd.Kernel, rd.Initrd, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &servedRelease{Release: r, base: bed.serveDir("releases/ironic-agent/"+releaseVersion, r.Dir)}
}

// url is the URL of the release's file rel.
func (r *servedRelease) url(rel string) string { return r.base + rel }

// checkStaged checks that Ironic fetched the release's file rel with GET
// (as driver_info's label, deploy_kernel...) and that what the machine
// then got from Ironic's HTTP root as /NODE/label has the digest the
// release's rel.sha256 gives, read as OpenStack-Ansible's get_url reads it.
func (r *servedRelease) checkStaged(t *testing.T, bed *pxeBed, node, label, rel string) {
	t.Helper()
	u := r.url(rel)
	_, urlPath, _ := strings.Cut(strings.TrimPrefix(u, "http://"), "/")
	if !slices.Contains(bed.served("/"+urlPath), "GET /"+urlPath) {
		t.Errorf("Ironic did not fetch its %s %s: requests %s", label, u, strings.Join(bed.served(path.Dir("/"+urlPath)), ", "))
	}
	sums, err := os.ReadFile(r.Path(rel + ".sha256"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := releasedir.AnsibleGetURLDigest(sums, u)
	if err != nil {
		t.Fatalf("%s.sha256: %v", rel, err)
	}
	if got := bed.stagedDigest("/" + node + "/" + label); got != want {
		t.Errorf("the machine got %s with SHA-256 %q from Ironic's HTTP root, want %s's %s", label, got, rel, want)
	}
}
