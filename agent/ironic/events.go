// Log events of this package that tests wait for on the console: the e2e
// VM tests match these messages (with internal/testbed/logtext.Msg), so
// they refer to the constants, and a reworded message breaks the build,
// not a VM test. Change a message's text only together with its tests.

package ironic

const (
	// EventLookupRetrying is logged when a lookup failed and will be retried.
	EventLookupRetrying = "lookup failed; retrying"
	// EventOverTLS is logged (at debug level) with the TLS version and
	// cipher suite a connection to Ironic negotiated.
	EventOverTLS = "Ironic over TLS"
)
