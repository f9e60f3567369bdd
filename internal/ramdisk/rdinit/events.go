// Log events of this package that tests wait for on the console: the e2e
// VM tests match these messages (with internal/testbed/logtext.Msg), so
// they refer to the constants, and a reworded message breaks the build,
// not a VM test. Change a message's text only together with its tests.

package rdinit

const (
	// EventInit is logged when the init started (its uptime).
	EventInit = "ironic-agent init"
	// EventModule is logged when a kernel module did not load.
	EventModule = "module"
	// EventModulesLoaded is logged when the kernel modules are loaded.
	EventModulesLoaded = "modules loaded"
	// EventNetworkReady is logged when the network is up.
	EventNetworkReady = "network ready"
	// EventAgentStarted is logged when the init started the agent (its uptime).
	EventAgentStarted = "agent started"
)
