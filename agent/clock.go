package agent

import (
	"github.com/ironic-go/ironic-agent/internal/clock"
)

// Clock is the agent's time source (start-up waits and deadlines, the
// heartbeat loop, the shutdown's wait for a running command), injected so
// tests run schedules without sleeping.
type Clock = clock.Clock
