// Log events of this package that tests wait for on the console: the e2e
// VM tests match these messages (with internal/testbed/logtext.Msg), so
// they refer to the constants, and a reworded message breaks the build,
// not a VM test. Change a message's text only together with its tests.

package bmc

const (
	// EventBMCFound is logged when a BMC answered Get Device ID, with its
	// identity.
	EventBMCFound = "BMC found"
)
