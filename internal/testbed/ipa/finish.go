package ipa

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// agentUnit starts IPA as diskimage-builder's ironic-python-agent-ramdisk
// element does (after the network is online, restarted when it exits);
// its output also goes to the console, where the harness reads it.
const agentUnit = `[Unit]
Description=Ironic Python Agent
After=network-online.target
Wants=network-online.target

[Service]
ExecStartPre=-/usr/sbin/modprobe vfat
ExecStart=/usr/bin/ironic-python-agent
Restart=always
RestartSec=30s
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
`

// files are written into the root filesystem by finish.
var files = map[string]string{
	"etc/systemd/system/ironic-python-agent.service": agentUnit,
	// DHCP on every Ethernet NIC (diskimage-builder: dhcp-all-interfaces).
	"etc/systemd/network/50-ipa-dhcp.network": "[Match]\nType=ether\n\n[Network]\nDHCP=ipv4\n",
	// Online once one NIC is: a NIC facing only an LLDP switch never gets
	// an address, and IPA itself waits for the route to Ironic.
	"etc/systemd/system/systemd-networkd-wait-online.service.d/any.conf": "[Service]\nExecStart=\nExecStart=/usr/lib/systemd/systemd-networkd-wait-online --any --timeout=120\n",
	"etc/fstab":    "",
	"etc/hostname": "localhost\n",
}

// masked are units that do nothing useful in a ramdisk and cost boot time.
var masked = []string{
	"apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "e2scrub_all.timer", "e2scrub_reap.service",
	"fstrim.timer", "mdmonitor.service", "mdcheck_start.timer", "mdcheck_continue.timer", "mdmonitor-oneshot.timer",
	"smartmontools.service", "systemd-timesyncd.service", "getty@tty1.service",
}

// prunedModules are the module trees below kernel/ no machine of the
// harness uses (and a server running IPA rarely does); the rest stays, so
// IPA sees what forky's kernel gives it. drivers/net/usb (the BMC's USB
// NIC, cdc_ether) and drivers/hid (the BMC's USB keyboard) stay: the
// server-shaped machine (qemu.ServerMachine) has both.
var prunedModules = []string{
	"sound", "drivers/gpu", "drivers/media", "drivers/net/wireless", "net/wireless", "net/mac80211",
	"drivers/bluetooth", "net/bluetooth", "drivers/staging", "drivers/iio", "drivers/isdn", "drivers/infiniband",
	"drivers/net/can", "net/can", "drivers/input/touchscreen", "drivers/input/joystick", "drivers/comedi",
	"drivers/mtd", "drivers/video/fbdev", "drivers/usb/gadget", "drivers/usb/serial", "drivers/memstick", "drivers/mmc", "drivers/platform/chrome", "drivers/thunderbolt",
	"drivers/atm", "net/atm", "fs/ocfs2", "fs/gfs2", "fs/btrfs", "fs/nfs", "fs/nfsd", "fs/smb", "fs/ceph",
	"fs/afs", "drivers/net/ethernet/mellanox", "drivers/net/ethernet/chelsio", "drivers/net/ethernet/qlogic",
	"drivers/net/ethernet/cavium", "drivers/scsi/lpfc", "drivers/scsi/qla2xxx", "drivers/scsi/bfa",
}

// finishKey is what finish does, for the root filesystem's key.
func finishKey() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&b, "%s\n%s\n", k, files[k])
	}
	fmt.Fprintf(&b, "%v\n%v\nenable ironic-python-agent systemd-networkd\n", masked, prunedModules)
	return b.String()
}

// finish makes the installed tree a ramdisk: the unit and the network
// configuration, the masks, the smaller module tree and its index.
func finish(ctx context.Context, dir string) error {
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("ipa: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("ipa: %w", err)
		}
	}
	kdirs, _ := filepath.Glob(filepath.Join(dir, "usr/lib/modules/*"))
	if len(kdirs) != 1 {
		return fmt.Errorf("ipa: %s: want one kernel's modules, found %d", dir, len(kdirs))
	}
	for _, m := range prunedModules {
		if err := os.RemoveAll(filepath.Join(kdirs[0], "kernel", m)); err != nil {
			return fmt.Errorf("ipa: %w", err)
		}
	}
	script := strings.Join([]string{
		"set -e",
		"systemctl enable ironic-python-agent.service systemd-networkd.service",
		"systemctl mask " + strings.Join(masked, " "),
		"depmod -a " + filepath.Base(kdirs[0]),
		// A root without a password on the console, for a person debugging
		// a boot (the VM's console is the harness's pipe, nothing else).
		"passwd -d root",
	}, "\n")
	return ironic.RunInRoot(ctx, dir, "sh", "-c", script)
}
