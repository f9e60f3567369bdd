package netnames

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/netid"
)

// udevadmRun runs `udevadm test-builtin net_id` on iface of the sysfs tree
// sys ("" for the machine's) under scheme and returns its properties.
type udevadmRun func(t *testing.T, sys, iface, scheme string) map[string]string

// hostUdevadm is the host's udevadm (Debian bookworm: systemd 252), in a
// private mount namespace with the tree bound over /sys there only.
func hostUdevadm(t *testing.T) udevadmRun {
	t.Helper()
	bin, err := exec.LookPath("udevadm")
	if err != nil {
		t.Skip("SKIPPED: no udevadm on this host")
	}
	return func(t *testing.T, sys, iface, scheme string) map[string]string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		argv := []string{bin, "test-builtin", "net_id", "/sys/class/net/" + iface}
		var cmd *exec.Cmd
		if sys == "" {
			cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
		} else {
			cmd = exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "--",
				"sh", "-ec", `mount --bind "$1" /sys; shift; exec "$@"`, "sh", sys}, argv...)...)
		}
		cmd.Env = append(os.Environ(), netid.Env(scheme)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("udevadm on %s of %s: %v: %s", iface, sys, err, stderr.Bytes())
		}
		return netid.Props(out)
	}
}

// forkyUdevadm is the udevadm of IPA 13's Debian release (forky: systemd
// 262), from the test bed's forky root filesystem (built and cached by
// internal/testbed/ironic), chrooted in a private mount namespace.
func forkyUdevadm(t *testing.T) udevadmRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cache, err := cachedir.Dir()
	if err != nil {
		t.Fatal(err)
	}
	rfs, err := ironic.EnsureRootFS(ctx, ironic.Series2026_1, cache)
	if err != nil {
		t.Fatal(err)
	}
	return func(t *testing.T, sys, iface, scheme string) map[string]string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		props, err := netid.InRoot(ctx, rfs.Dir, sys, iface, scheme)
		if err != nil {
			t.Fatal(err)
		}
		return props
	}
}

// compare checks Compute against udevadm's properties.
func compare(t *testing.T, run udevadmRun, sys, iface, scheme string) {
	t.Helper()
	props := run(t, sys, iface, scheme)
	root := sys
	if root == "" {
		root = "/sys"
	}
	s, err := ParseScheme(scheme)
	if err != nil {
		t.Fatal(err)
	}
	id, err := Compute(root, iface, s)
	if err != nil {
		t.Fatal(err)
	}
	got := [...]string{id.Scheme, id.Onboard, id.Slot, id.Path, id.MAC}
	want := [...]string{props["ID_NET_NAMING_SCHEME"], props["ID_NET_NAME_ONBOARD"], props["ID_NET_NAME_SLOT"], props["ID_NET_NAME_PATH"], props["ID_NET_NAME_MAC"]}
	if got != want {
		t.Errorf("%s of %s under %s: scheme, onboard, slot, path, mac = %q; udevadm: %q", iface, root, scheme, got, want)
	}
}

// oracleSchemes are the schemes each udevadm is asked for: its own
// default and the ones whose features the cases tell apart.
var oracleSchemes = map[string][]string{
	"host":  {"v252", "v251", "v247", "v239", "v238"},
	"forky": {DefaultScheme, "v255", "v251", "v247", "v239", "v238"},
}

// TestUdevadmAgrees gives every case's tree, the fixture trees with NICs
// and this machine's own NICs to udevadm's net_id, the host's and forky's,
// and compares the names with Compute's.
func TestUdevadmAgrees(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: udevadm reads a made-up /sys only in a mount namespace of its own, which needs root")
	}
	for _, o := range []struct {
		name string
		run  func(*testing.T) udevadmRun
	}{{"host", hostUdevadm}, {"forky", forkyUdevadm}} {
		t.Run(o.name, func(t *testing.T) {
			run := o.run(t)
			for _, c := range netCases {
				if c.hwdb {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					tr := newTree(t)
					c.build(tr)
					for _, s := range oracleSchemes[o.name] {
						compare(t, run, tr.root, c.iface, s)
					}
				})
			}
			fixtures, _ := filepath.Glob("../../../fixtures/*/root/sys/class/net/*")
			for _, f := range fixtures {
				iface := filepath.Base(f)
				sys := filepath.Dir(filepath.Dir(filepath.Dir(f)))
				abs, err := filepath.Abs(sys)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(f, "uevent")); err != nil {
					// The captures record no uevent (nor ifindex, iflink,
					// dev_port) of a NIC: sd-device cannot open one, and
					// nothing here can name it.
					continue
				}
				t.Run(strings.TrimPrefix(f, "../../../fixtures/"), func(t *testing.T) {
					compare(t, run, abs, iface, oracleSchemes[o.name][0])
				})
			}
			ents, err := os.ReadDir("/sys/class/net")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				t.Run("live/"+e.Name(), func(t *testing.T) {
					compare(t, run, "", e.Name(), oracleSchemes[o.name][0])
				})
			}
		})
	}
}
