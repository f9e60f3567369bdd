// Log events of this package that tests wait for on the console: the e2e
// VM tests match these messages (with internal/testbed/logtext.Msg), so
// they refer to the constants, and a reworded message breaks the build,
// not a VM test. Change a message's text only together with its tests.

package erase

const (
	// EventDeviceEraseFinished is logged when a device erase ended.
	EventDeviceEraseFinished = "device erase finished"
	// EventATASecurityState is logged when a device's ATA security state was read.
	EventATASecurityState = "ATA security state"
)
