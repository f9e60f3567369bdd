// Package netid runs udev's net_id builtin (`udevadm test-builtin net_id`)
// on a sysfs tree, the oracle of package netnames' names: forky's udevadm
// (systemd 262, IPA 13's) from the test bed's root filesystem, or the
// host's.
package netid

import (
	"bufio"
	"bytes"
	"context"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// Env is udevadm's environment for scheme ("" for its default):
// NET_NAMING_SCHEME wins over the kernel command line, and
// SYSTEMD_DEVICE_VERIFY_SYSFS=0 lets sd-device read a tree that is not
// sysfs (systemd's own tests set it for theirs).
func Env(scheme string) []string {
	env := []string{"SYSTEMD_DEVICE_VERIFY_SYSFS=0"}
	if scheme != "" {
		env = append(env, "NET_NAMING_SCHEME="+scheme)
	}
	return env
}

// Props reads udevadm test-builtin's ID_NET_* lines.
func Props(out []byte) map[string]string {
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "ID_NET_") {
			props[k] = v
		}
	}
	return props
}

// InRoot runs net_id with the udevadm of the Debian root filesystem root
// (ironic.EnsureRootFS) on interface iface of the sysfs tree sys ("" for
// the machine's own), under scheme, and returns its properties.
func InRoot(ctx context.Context, root, sys, iface, scheme string) (map[string]string, error) {
	out, err := ironic.OutputWithSys(ctx, root, sys, Env(scheme), "udevadm", "test-builtin", "net_id", "/sys/class/net/"+iface)
	if err != nil {
		return nil, err
	}
	return Props(out), nil
}
