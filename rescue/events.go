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
	// EventConsoleLogin is logged when the rescue console login
	// opened a shell, with the console and the user.
	EventConsoleLogin = "rescue" + consoleLoginMsg
	// EventDebugConsoleLogin is the debug login's (rootpwd=).
	EventDebugConsoleLogin = DebugName + consoleLoginMsg
)

// sshListening ends the message of Serve's SSH server, after Config.Name.
const sshListening = ": SSH server listening"

// consoleLoginMsg ends the message of a console login, after Config.Name;
// a refused one adds " refused".
const consoleLoginMsg = ": console login"
