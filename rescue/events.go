// Log events of this package that tests wait for on the console: the e2e
// VM tests match these messages (with internal/testbed/logtext.Msg), so
// they refer to the constants, and a reworded message breaks the build,
// not a VM test. Change a message's text only together with its tests.

package rescue

const (
	// EventSSHListening is logged when the rescue SSH server accepts connections.
	EventSSHListening = "rescue" + sshListening
	// EventDebugSSHListening is logged when the debug login's SSH server
	// (sshkey=) accepts connections, with its host key's fingerprint.
	EventDebugSSHListening = DebugName + sshListening
	// EventDebugLoginRefused is logged when sshkey= or rootpwd= has a
	// value that opens nothing (what and why).
	EventDebugLoginRefused = DebugName + ": parameter refused, nothing opened for it"
)

// sshListening ends the message of Serve's SSH server, after Config.Name.
const sshListening = ": SSH server listening"
