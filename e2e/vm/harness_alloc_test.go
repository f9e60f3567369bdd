package vm

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
)

// Agent API ports and NIC MACs of the scenarios. A scenario asks for its
// own with newAgentPort and newMACs instead of picking agentPortBase+N and
// a MAC by hand, which let two scenarios share one (agentPortBase+5 and
// 52:54:00:6d:05:01 twice, agentPortBase+9 three times). Each is handed
// out once per test process; the package's tests run one at a time, and
// a port is also checked free on 127.0.0.1 before it is handed out.
//
// The MACs come from the block 52:54:00:6e (two a machine: :01 and :02).
// The hand-picked families that remain have their own blocks: 52:54:00:1b
// (qemu.SideBySideMachine, which fixtures record), 1c and 1d (the IPA side
// by side runs), 6d:0a (the Metal3 node, whose network_data names it),
// 6d:0f (the multipath scenario), 6d:20+n (pxeMAC) and 6d:30+n
// (redfishMAC).
var scenarioAlloc struct {
	mu    sync.Mutex
	port  int // next offset from agentPortBase
	block int // next MAC block
}

// agentPortSpan is how many ports above agentPortBase the allocator hands
// out before it starts again from the first (each still checked free).
const agentPortSpan = 40

// reservedPort says whether p is one of the package's named ports, or the
// fixed agent port of a scenario that keeps its own (multipath_test.go's
// agentPortBase+16), inside the allocator's span.
func reservedPort(p int) bool {
	switch p {
	case imagePort, bmcLANPort, bmcVMPort, bmcLANPort + 2, bmcVMPort + 2,
		metal3AgentPort, fastTrackIronicPort, fastTrackAgentPort, agentPortBase + 16:
		return true
	}
	return false
}

// newAgentPort is a port on 127.0.0.1 for a VM's agent API (its hostfwd),
// of no other scenario of this process.
func newAgentPort(t *testing.T) int {
	t.Helper()
	scenarioAlloc.mu.Lock()
	defer scenarioAlloc.mu.Unlock()
	for range agentPortSpan {
		p := agentPortBase + scenarioAlloc.port%agentPortSpan
		scenarioAlloc.port++
		if reservedPort(p) {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	t.Fatalf("no free agent port in %d-%d", agentPortBase, agentPortBase+agentPortSpan-1)
	return 0
}

// newMACs are the MACs of a machine's two NICs, of no other scenario of
// this process.
func newMACs(t *testing.T) [2]string {
	t.Helper()
	scenarioAlloc.mu.Lock()
	defer scenarioAlloc.mu.Unlock()
	n := scenarioAlloc.block
	if n > 0xff {
		t.Fatal("newMACs: the 52:54:00:6e block is used up")
	}
	scenarioAlloc.block++
	return [2]string{fmt.Sprintf("52:54:00:6e:%02x:01", n), fmt.Sprintf("52:54:00:6e:%02x:02", n)}
}
