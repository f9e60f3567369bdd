package netnames

import (
	"os"
	"runtime"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// TestNetlinkRename renames a link and gives it an alternative name
// through Netlink, in a network namespace of its own.
func TestNetlinkRename(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: a network namespace needs root")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Fatal(err)
		}
		ns.Close()
	}()
	// A veth pair: the test kernels have no dummy links.
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth7"}, PeerName: "eth8"}); err != nil {
		t.Fatal(err)
	}
	res := Apply(Netlink{}, []Plan{
		{ID: ID{Interface: "eth7"}, Decision: Decision{Name: "ens7", AltNames: []string{"enp1s0", "enx525400123456"}}},
		{ID: ID{Interface: "eth8"}, Decision: Decision{Name: "eth7"}}, // free again by then
	})
	for _, r := range res {
		if r.Err != nil {
			t.Errorf("%s %s: %v", r.Interface, r.Name, r.Err)
		}
	}
	l, err := netlink.LinkByName("ens7")
	if err != nil {
		t.Fatal(err)
	}
	if alt := l.Attrs().AltNames; !slices.Equal(alt, []string{"enp1s0", "enx525400123456"}) {
		t.Errorf("alternative names %q", alt)
	}
	// A name the kernel already has is refused and said so.
	res = Apply(Netlink{}, []Plan{{ID: ID{Interface: "ens7"}, Decision: Decision{Name: "eth7"}}})
	if len(res) != 1 || res[0].Err == nil {
		t.Errorf("rename onto an existing name: %+v", res)
	}
}
