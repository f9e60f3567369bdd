// Log events of this package that tests wait for on the console: the e2e
// VM tests match these messages (with internal/testbed/logtext.Msg), so
// they refer to the constants, and a reworded message breaks the build,
// not a VM test. Change a message's text only together with its tests.

package agent

const (
	// EventAPIListening is logged when the agent's API accepts connections.
	EventAPIListening = "agent API listening"
	// EventTokenReceived is logged when the lookup handed the agent its token.
	EventTokenReceived = "agent token received"
	// EventMaskedTokenKept is logged when a later lookup returned the masked token and the agent keeps the token it holds.
	EventMaskedTokenKept = "lookup returned the masked token; keeping the one held"
	// EventLookingUp is logged when the agent starts looking its node up.
	EventLookingUp = "looking up node"
	// EventLookupSucceeded is logged when Ironic's lookup found the node.
	EventLookupSucceeded = "lookup succeeded"
	// EventHeartbeatSuccessful is logged when Ironic accepted a heartbeat.
	EventHeartbeatSuccessful = "heartbeat successful"
	// EventHeartbeatFailed is logged when a heartbeat failed (retried).
	EventHeartbeatFailed = "heartbeat failed"
	// EventClockSetFromNTP is logged when the clock was set from an NTP server.
	EventClockSetFromNTP = "clock set from NTP"
	// EventExecutingStep is logged when a clean, deploy or service step starts.
	EventExecutingStep = "executing step"
	// EventStepCompleted is logged when a step finished without an error.
	EventStepCompleted = "step completed"
	// EventUnfinishedStepFailed is logged when a step an earlier agent process of this boot did not finish is reported as failed.
	EventUnfinishedStepFailed = "reporting the step an earlier agent process did not finish as failed"
	// EventWritingImage is logged when progress of an image being written (received, written bytes).
	EventWritingImage = "writing image"
	// EventImageAlreadyWritten is logged when prepare_image found the image already written by this agent.
	EventImageAlreadyWritten = "image already written to the device by this agent, not writing it again"
	// EventPartitionImageWritten is logged when a partition image and its partitions are on the device.
	EventPartitionImageWritten = "partition image written"
	// EventEraseProgress is logged when progress of a device erase.
	EventEraseProgress = "erase progress"
	// EventWaitingForDHCP is logged when inspection waits for IPv4 addresses from DHCP (ipa-inspection-dhcp-*), naming the interfaces without one.
	EventWaitingForDHCP = "waiting for IPv4 addresses from DHCP before inspection"
	// EventDHCPWaitTimedOut is logged when interfaces still had no IPv4 address at ipa-inspection-dhcp-wait-timeout; inspection goes on.
	EventDHCPWaitTimedOut = "interfaces without an IPv4 address at the DHCP wait's timeout; inspecting anyway"
	// EventDHCPAddressesReady is logged when every interface inspection waited for has an IPv4 address.
	EventDHCPAddressesReady = "IPv4 addresses from DHCP ready for inspection"
	// EventFIPSMode is logged at the start of an agent that runs in Go's
	// FIPS 140-3 mode, with what that changes.
	EventFIPSMode = "FIPS 140-3 mode: the standard library's validated cryptographic module, SHA-2 without the agent's own assembly, MD5 image checksums refused, TLS limited to approved suites"
	// EventLockedDown is logged when the agent locked the system down.
	EventLockedDown = "system locked down: waiting, not serving, until the agent is stopped"
)
