package lldp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/inventory"
)

// topology is the agent's namespace ("host") and a switch namespace with
// lldpd, joined by one veth pair per NIC.
type topology struct {
	host, sw  *netnstest.Netns
	nics, sws []string // host-side and switch-side veth names, pairwise
	lldpd     *netnstest.LLDPD
}

const testSwitchName = "test-switch-1"

// newTopology builds n veth pairs. perPort returns extra lldpcli lines for
// switch port i (named sws[i]); lldpd runs on every port for which silent
// returns false.
func newTopology(t *testing.T, n int, perPort func(i int, port string) []string, silent func(i int) bool) *topology {
	t.Helper()
	netnstest.RequireRoot(t, "lldpd", "lldpcli")
	id := netnstest.ID(t)
	tp := &topology{
		host: netnstest.NewNetns(t, "lldp-h-"+id),
		sw:   netnstest.NewNetns(t, "lldp-s-"+id),
	}
	conf := []string{
		"configure system hostname " + testSwitchName,
		`configure system description "lldpd test switch"`,
		"configure lldp tx-interval 1",
	}
	var ports []string
	for i := range n {
		nic, port := fmt.Sprintf("lh%s%d", id, i), fmt.Sprintf("ls%s%d", id, i)
		tp.host.Veth(nic, tp.sw, port)
		tp.nics, tp.sws = append(tp.nics, nic), append(tp.sws, port)
		if silent != nil && silent(i) {
			continue
		}
		ports = append(ports, port)
		conf = append(conf, fmt.Sprintf("configure ports %s lldp portidsubtype local Ethernet1/%d", port, i+1))
		if perPort != nil {
			conf = append(conf, perPort(i, port)...)
		}
	}
	if len(ports) > 0 {
		tp.lldpd = tp.sw.StartLLDPD(ports, conf)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := tp.lldpd.WaitReady(ctx, testSwitchName); err != nil {
			t.Fatal(err)
		}
	}
	return tp
}

// capture runs Capture inside the host namespace, logging to the test.
func (tp *topology) capture(t *testing.T, ctx context.Context, ifaces []string, timeout time.Duration) (map[string][]inventory.LLDPTLV, time.Duration, error) {
	t.Helper()
	return tp.captureLogged(t, ctx, ifaces, timeout, slog.NewTextHandler(testWriter{t}, nil))
}

// captureLogged is capture with Capture's log going to h.
func (tp *topology) captureLogged(t *testing.T, ctx context.Context, ifaces []string, timeout time.Duration, h slog.Handler) (map[string][]inventory.LLDPTLV, time.Duration, error) {
	t.Helper()
	var got map[string][]inventory.LLDPTLV
	var capErr error
	start := time.Now()
	err := netnstest.Do(tp.host.Name, func() error {
		got, capErr = Capture(ctx, ifaces, timeout, slog.New(h))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, time.Since(start), capErr
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// customTLV is an lldpcli line that makes lldpd send an organisationally
// specific TLV. This kernel may lack 802.1Q VLAN devices (and VLAN-aware
// bridges), so lldpd cannot learn a VLAN from the system; the 802.1 and
// 802.3 TLVs are configured byte for byte instead, and lldpd sends them in
// its real frames.
func customTLV(port, oui string, subtype int, info string) string {
	return fmt.Sprintf("configure ports %s lldp custom-tlv add oui %s subtype %d oui-info %s", port, oui, subtype, info)
}

// TestCaptureFromLLDPD is the end-to-end check against Debian's lldpd: the
// system name, port ID, port VLAN ID, VLAN name and MTU lldpd was configured
// with come back on the right NIC, an unknown organisation's TLV is kept raw,
// a frame sent with an 802.1Q tag is heard, and a NIC that was down is heard
// and put down again.
func TestCaptureFromLLDPD(t *testing.T) {
	tp := newTopology(t, 3, func(i int, port string) []string {
		switch i {
		case 0:
			return []string{
				fmt.Sprintf(`configure ports %s lldp portdescription "uplink to host"`, port),
				customTLV(port, "00,80,c2", 1, "00,64"),                                  // PVID 100
				customTLV(port, "00,80,c2", 3, "00,64,0a,70,72,6f,76,69,73,69,6f,6e,31"), // VLAN 100 "provision1"
				customTLV(port, "00,12,0f", 4, "23,28"),                                  // max frame 9000
				customTLV(port, "12,34,56", 9, "de,ad,be,ef"),                            // unknown org
			}
		case 1:
			return []string{fmt.Sprintf("configure ports %s lldp vlan-tx 200", port)}
		}
		return nil
	}, nil)
	tp.host.IP("link", "set", tp.nics[2], "down")

	got, took, err := tp.capture(t, t.Context(), tp.nics, 20*time.Second)
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	t.Logf("captured %d NICs in %v", len(got), took)
	for i, nic := range tp.nics {
		tlvs, ok := got[nic]
		if !ok || len(tlvs) == 0 {
			t.Fatalf("%s heard nothing: %v", nic, got)
		}
		n, err := Decode(tlvs)
		if err != nil {
			t.Fatal(err)
		}
		if n.SystemName != testSwitchName {
			t.Errorf("%s: system name %q, want %q", nic, n.SystemName, testSwitchName)
		}
		if want := fmt.Sprintf("Ethernet1/%d", i+1); n.PortID != want || n.PortIDSubtype != "local" {
			t.Errorf("%s: port ID %q (%s), want %q (local)", nic, n.PortID, n.PortIDSubtype, want)
		}
		if tlvs[0].Type != TypeChassisID || tlvs[len(tlvs)-1].Type != TypeEnd {
			t.Errorf("%s: want chassis ID first and End last, got %v", nic, tlvs)
		}
		if len(n.Problems) > 0 {
			t.Errorf("%s: problems decoding lldpd's frame: %v", nic, n.Problems)
		}
	}
	n0, _ := Decode(got[tp.nics[0]])
	if n0.PortVLANID == nil || *n0.PortVLANID != 100 {
		t.Errorf("PVID: got %v, want 100", n0.PortVLANID)
	}
	if len(n0.VLANs) != 1 || n0.VLANs[0] != (VLAN{100, "provision1"}) {
		t.Errorf("VLANs: got %v, want [100 provision1]", n0.VLANs)
	}
	if n0.MTU == nil || *n0.MTU != 9000 {
		t.Errorf("MTU: got %v, want 9000", n0.MTU)
	}
	if n0.PortDescription != "uplink to host" {
		t.Errorf("port description: got %q", n0.PortDescription)
	}
	if !hasTLV(got[tp.nics[0]], 127, "12345609deadbeef") {
		t.Errorf("the unknown organisation's TLV is not in the raw list: %v", got[tp.nics[0]])
	}
	err = netnstest.Do(tp.host.Name, func() error {
		ifi, err := net.InterfaceByName(tp.nics[2])
		if err != nil {
			return err
		}
		if ifi.Flags&net.FlagUp != 0 {
			return errors.New("the NIC that was down is still up after the capture")
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func hasTLV(tlvs []inventory.LLDPTLV, typ int, value string) bool {
	for _, t := range tlvs {
		if t.Type == typ && t.Value == value {
			return true
		}
	}
	return false
}

var manyNICs = flag.Int("nics", 8, "number of NICs for TestCaptureManyNICsTakesOneInterval (at least 5)")

// TestCaptureManyNICsTakesOneInterval shows that NICs are listened to at
// once: N NICs behind an lldpd that sends on all its ports every second
// are all heard within one interval, not one after the other.
//
// lldpd sends on its ports in one round per interval, so a capture that
// listens on all NICs at once hears them all within one interval of each
// other; one that listened in turn would miss each round already heard by
// the NIC before and need about N-1 intervals. The test asserts both the
// structural property (the spread of arrival times, taken from Capture's
// own per-NIC log records, is under one interval) and the total time (one
// interval to wait for the next round plus a margin of 3 s for a loaded
// machine, still well under the N-1 intervals of a capture in turn).
func TestCaptureManyNICsTakesOneInterval(t *testing.T) {
	const interval = time.Second // newTopology's "configure lldp tx-interval 1"
	n := *manyNICs
	if n < 5 {
		t.Fatalf("-nics %d: want at least 5, so that N-1 intervals exceed the bound", n)
	}
	tp := newTopology(t, n, nil, nil)
	// lldpd sends a first frame on each port as it starts; once every port
	// has sent a second one, sends come at the interval, not in start-up
	// bursts that would make any capture fast.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := waitSent(ctx, tp.lldpd, tp.sws, 2); err != nil {
		t.Fatal(err)
	}
	rec := &arrivals{at: map[string]time.Time{}}
	got, took, err := tp.captureLogged(t, t.Context(), tp.nics, 30*time.Second, rec)
	if err != nil {
		t.Fatal(err)
	}
	var first, last time.Time
	for _, nic := range tp.nics {
		if len(got[nic]) == 0 {
			t.Errorf("%s heard nothing", nic)
			continue
		}
		at, ok := rec.get(nic)
		if !ok {
			t.Errorf("%s: no \"LLDP frame received\" record", nic)
			continue
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	spread := last.Sub(first)
	t.Logf("MEASURED: %d NICs captured in %v, frames arrived within %v (lldpd tx-interval %v)",
		n, took.Round(time.Millisecond), spread.Round(time.Microsecond), interval)
	if spread >= interval {
		t.Errorf("frames arrived %v apart, want all within one tx-interval (%v): the NICs were not listened to at once", spread, interval)
	}
	if bound := interval + 3*time.Second; took > bound {
		t.Errorf("capture of %d NICs took %v, want under %v (one interval plus margin; in turn it would take about %v)",
			n, took, bound, time.Duration(n-1)*interval)
	}
}

// arrivals is a slog handler keeping the time of Capture's "LLDP frame
// received" record for each interface.
type arrivals struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (a *arrivals) Enabled(context.Context, slog.Level) bool { return true }
func (a *arrivals) WithAttrs([]slog.Attr) slog.Handler       { return a }
func (a *arrivals) WithGroup(string) slog.Handler            { return a }

func (a *arrivals) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "LLDP frame received" {
		return nil
	}
	r.Attrs(func(at slog.Attr) bool {
		if at.Key == "interface" {
			a.mu.Lock()
			a.at[at.Value.String()] = r.Time
			a.mu.Unlock()
			return false
		}
		return true
	})
	return nil
}

func (a *arrivals) get(nic string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.at[nic]
	return at, ok
}

// waitSent waits until lldpd has transmitted at least frames LLDPDUs on
// every one of ports (lldpcli's statistics, key lldp.PORT.tx.tx).
func waitSent(ctx context.Context, l *netnstest.LLDPD, ports []string, frames int) error {
	for {
		out, err := exec.CommandContext(ctx, "lldpcli", "-u", l.Socket(), "-f", "keyvalue", "show", "statistics").Output()
		if err == nil {
			sent := map[string]int{}
			for _, line := range strings.Split(string(out), "\n") {
				key, val, ok := strings.Cut(line, "=")
				port, ok2 := strings.CutSuffix(strings.TrimPrefix(key, "lldp."), ".tx.tx")
				if n, err := strconv.Atoi(val); ok && ok2 && err == nil {
					sent[port] = n
				}
			}
			ready := true
			for _, p := range ports {
				ready = ready && sent[p] >= frames
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lldpd did not send %d frames on each of %v: %w (last statistics: %s, %v)", frames, ports, ctx.Err(), out, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestCaptureSilentAndMissing: a NIC with no neighbour gets [] after the
// timeout, a missing interface is named in the error, and the others are
// still reported.
func TestCaptureSilentAndMissing(t *testing.T) {
	tp := newTopology(t, 2, nil, func(i int) bool { return i == 1 })
	got, took, err := tp.capture(t, t.Context(), []string{tp.nics[0], tp.nics[1], "nosuchnic0"}, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "nosuchnic0") {
		t.Errorf("want an error naming nosuchnic0, got %v", err)
	}
	if len(got[tp.nics[0]]) == 0 {
		t.Errorf("%s heard nothing", tp.nics[0])
	}
	if tlvs, ok := got[tp.nics[1]]; !ok || tlvs == nil || len(tlvs) != 0 {
		t.Errorf("silent NIC: got %#v, want an empty non-nil list", tlvs)
	}
	if _, ok := got["nosuchnic0"]; ok {
		t.Errorf("missing NIC has an entry")
	}
	t.Logf("with a silent NIC the capture took %v (timeout 2s)", took)
}

// TestCaptureCancel: cancelling the context ends the capture at once.
func TestCaptureCancel(t *testing.T) {
	tp := newTopology(t, 1, nil, func(int) bool { return true })
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	got, took, err := tp.capture(t, ctx, tp.nics, time.Minute)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("want context.Canceled, got %v", err)
	}
	if tlvs := got[tp.nics[0]]; tlvs == nil || len(tlvs) != 0 {
		t.Errorf("got %#v, want []", tlvs)
	}
	t.Logf("cancelled after 200ms, returned after %v", took)
}
