package lldp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/netnstest"
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

// capture runs Capture inside the host namespace.
func (tp *topology) capture(t *testing.T, ctx context.Context, ifaces []string, timeout time.Duration) (map[string][]inventory.LLDPTLV, time.Duration, error) {
	t.Helper()
	var got map[string][]inventory.LLDPTLV
	var capErr error
	start := time.Now()
	err := tp.host.Do(func() error {
		got, capErr = Capture(ctx, ifaces, timeout, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
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
	err = tp.host.Do(func() error {
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

var manyNICs = flag.Int("nics", 8, "number of NICs for TestCaptureManyNICsTakesOneInterval")

// TestCaptureManyNICsTakesOneInterval shows that NICs are listened to at
// once: N NICs behind an lldpd that sends every second are all heard in
// about one interval, not N. The time is logged, not asserted.
func TestCaptureManyNICsTakesOneInterval(t *testing.T) {
	n := *manyNICs
	tp := newTopology(t, n, nil, nil)
	// lldpd's first frames go out as ports appear; wait for steady state so
	// the capture measures the 1 s interval, not start-up bursts.
	time.Sleep(2 * time.Second)
	got, took, err := tp.capture(t, t.Context(), tp.nics, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, nic := range tp.nics {
		if len(got[nic]) == 0 {
			t.Errorf("%s heard nothing", nic)
		}
	}
	t.Logf("MEASURED: %d NICs captured in %v (lldpd tx-interval 1 s)", n, took.Round(time.Millisecond))
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
