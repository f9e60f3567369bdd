// Log events of this package that tests wait for on the console: the e2e
// VM tests match these messages (with internal/testbed/logtext.Msg), so
// they refer to the constants, and a reworded message breaks the build,
// not a VM test. Change a message's text only together with its tests.

package rdinit

const (
	// EventVersion is the init's first line: the agent's version,
	// build, commit and the kernel's release.
	EventVersion = "ironic-agent init version"
	// EventInit is logged when the init started (its uptime).
	EventInit = "ironic-agent init"
	// EventModule is logged when a kernel module did not load.
	EventModule = "module"
	// EventModulesLoaded is logged when the kernel modules are loaded.
	EventModulesLoaded = "modules loaded"
	// EventNICRenamed is logged for each NIC given its predictable name
	// (link, name, why: the rule or policy).
	EventNICRenamed = "NIC renamed"
	// EventNICNotRenamed is logged for each NIC whose rename failed
	// (link, name, why, error).
	EventNICNotRenamed = "NIC not renamed"
	// EventNICKept is logged for each NIC that keeps the kernel's name
	// (link, why).
	EventNICKept = "NIC keeps its name"
	// EventNICNaming is logged for a NIC that could not be read or a bad
	// naming parameter.
	EventNICNaming = "NIC naming"
	// EventNICsNamed is logged once the NICs are named.
	EventNICsNamed = "NICs named"
	// EventNetworkReady is logged when the network is up.
	EventNetworkReady = "network ready"
	// EventDebugLoginStarted is logged when the init started the debug
	// login (sshkey=, rootpwd=).
	EventDebugLoginStarted = "debug login started"
	// EventDebugLoginReplaced is logged when virtual media's parameters
	// replace the debug login the kernel command line started.
	EventDebugLoginReplaced = "debug login: stopping the kernel command line's, for virtual media's parameters"
	// EventAgentStarted is logged when the init started the agent (its uptime).
	EventAgentStarted = "agent started"
)
