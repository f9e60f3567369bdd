package collector

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironic-go/ironic-agent/bmc"
)

func bmcStr(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestBMCUnit(t *testing.T) {
	withDevice := t.TempDir()
	if err := os.MkdirAll(filepath.Join(withDevice, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withDevice, "dev/ipmi0"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Channel 1 is an 802.3 LAN with 192.0.2.20 and a MAC; the replay has
	// nothing else, as if every other request timed out.
	replay, err := bmc.NewReplay(bmc.Recording{Exchanges: []bmc.Exchange{
		{NetFn: bmc.NetFnApp, Cmd: bmc.CmdGetChannelInfo, Request: "01", Response: "0001040182f21b000000"},
		{NetFn: bmc.NetFnTransport, Cmd: bmc.CmdGetLANConfParam, Request: "01030000", Response: "0011c0000214"},
		{NetFn: bmc.NetFnTransport, Cmd: bmc.CmdGetLANConfParam, Request: "01050000", Response: "00113cecef010203"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		opts           Options
		ipv4, ipv6, mc string
	}{
		{"no IPMI device", Options{Root: t.TempDir(), IPMI: replay}, "<nil>", "<nil>", "<nil>"},
		{"device and replies", Options{Root: withDevice, IPMI: replay}, "192.0.2.20", "::/0", "3c:ec:ef:01:02:03"},
		{"device, skip_bmc_detect", Options{Root: withDevice, IPMI: replay, SkipBMC: true}, "<nil>", "<nil>", "<nil>"},
		{"device without recorded replies", Options{Root: withDevice}, "0.0.0.0", "::/0", "<nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := Collect(context.Background(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if bmcStr(inv.BMCAddress) != tc.ipv4 || bmcStr(inv.BMCV6Address) != tc.ipv6 || bmcStr(inv.BMCMAC) != tc.mc {
				t.Errorf("got %s %s %s, want %s %s %s", bmcStr(inv.BMCAddress), bmcStr(inv.BMCV6Address), bmcStr(inv.BMCMAC), tc.ipv4, tc.ipv6, tc.mc)
			}
		})
	}
}
