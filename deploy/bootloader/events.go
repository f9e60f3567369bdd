// Log events of this package that tests wait for on the console: the e2e
// VM tests match these messages (with internal/testbed/logtext.Msg), so
// they refer to the constants, and a reworded message breaks the build,
// not a VM test. Change a message's text only together with its tests.

package bootloader

const (
	// EventRelocatingESP is logged when the EFI system partition moves to the ESP mirror of a software RAID.
	EventRelocatingESP = "relocating the EFI system partition to the ESP mirror"
	// EventInstallingGRUB2 is logged when GRUB2 is being installed on a device.
	EventInstallingGRUB2 = "installing GRUB2"
)
