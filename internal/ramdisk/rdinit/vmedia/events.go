// Log events of this package that tests wait for on the console (see
// internal/testbed/logtext): change a message only together with its tests.

package vmedia

const (
	// EventNotBooted is logged when the kernel command line has no
	// boot_method=vmedia: nothing is taken from virtual media.
	EventNotBooted = "not booted from virtual media: no configuration or parameters taken from it"
	// EventConfigCopied is logged when a directory of the boot medium
	// was copied into /etc.
	EventConfigCopied = "virtual media configuration copied"
	// EventParameters is logged when parameters.txt was read and merged.
	EventParameters = "virtual media parameters merged"
	// EventNoParameters is logged when no device with parameters.txt was
	// found (the parameters are on the kernel command line alone).
	EventNoParameters = "no virtual media parameters device"
)
