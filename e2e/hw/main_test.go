// Package hw holds the VM tests of the hardware-facing packages: the BMC
// device (bmc), LLDP on an emulated NIC (lldp), NVMe and ATA commands to
// QEMU's controllers (deploy/nvme, deploy/ata, deploy/erase), the disk
// inventory against udev's own programs (collector), and of the test bed
// itself: the deployed OS of internal/testbed/osimage, ipmi_sim over its
// LAN channel (internal/testbed/bmcsim) and IPA 13's ramdisk
// (internal/testbed/ipa). Each boots QEMU; they live under e2e/ so that
// `go test ./...` outside e2e/ boots nothing.
package hw

import (
	"os"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestMain makes the test binary QEMU's guestfwd relay when QEMU starts it
// as one (qemu.MaybeRelay); without it guest-to-host connections fail.
func TestMain(m *testing.M) {
	qemu.MaybeRelay()
	os.Exit(m.Run())
}
