package collector

import (
	"errors"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestEthtoolCmdLayout: struct ethtool_cmd is 44 bytes, speed_hi at 28
// and lp_advertising at 32, and struct ifreq fits in ifreqData.
func TestEthtoolCmdLayout(t *testing.T) {
	var c ethtoolCmd
	if s := unsafe.Sizeof(c); s != 44 {
		t.Errorf("sizeof(ethtoolCmd) = %d, want 44", s)
	}
	if o := unsafe.Offsetof(c.SpeedHi); o != 28 {
		t.Errorf("speed_hi at %d, want 28", o)
	}
	if o := unsafe.Offsetof(c.LpAdvertising); o != 32 {
		t.Errorf("lp_advertising at %d, want 32", o)
	}
	var r ifreqData
	if s := unsafe.Sizeof(r); s != unix.IFNAMSIZ+24 {
		t.Errorf("sizeof(ifreqData) = %d, want %d", s, unix.IFNAMSIZ+24)
	}
}

func TestEthtoolFacts(t *testing.T) {
	answer := func(cmd ethtoolCmd, err error) ethtoolGSet {
		return func(name string, c *ethtoolCmd) error {
			if name != "enp2s0" {
				t.Errorf("asked about %q", name)
			}
			*c = cmd
			return err
		}
	}
	// vmxnet3: TP and 10000baseT/Full supported, nothing advertised,
	// QEMU's 1000 Mb/s link.
	modes, speed, err := ethtoolFacts(answer(ethtoolCmd{Supported: 1<<7 | 1<<12, Speed: 1000}, nil), "enp2s0")
	if err != nil || !slices.Equal(modes, []string{"TP", "10000baseT/Full"}) || speed == nil || *speed != 1000 {
		t.Errorf("vmxnet3: modes %v speed %v err %v", modes, deref(speed), err)
	}
	if s := lshwSpeed(netFacts{LinkModes: modes, SpeedMbps: speed}); s == nil || *s != 10000 {
		t.Errorf("vmxnet3: speed_mbps %v, want 10000", deref(s))
	}
	// speed_hi carries speeds past 65535; SPEED_UNKNOWN is all ones.
	if _, speed, _ := ethtoolFacts(answer(ethtoolCmd{Speed: 100000 & 0xffff, SpeedHi: 100000 >> 16}, nil), "enp2s0"); speed == nil || *speed != 100000 {
		t.Errorf("100G: speed %v", deref(speed))
	}
	if _, speed, _ := ethtoolFacts(answer(ethtoolCmd{Speed: 0xffff, SpeedHi: 0xffff}, nil), "enp2s0"); speed != nil {
		t.Errorf("SPEED_UNKNOWN: speed %v", *speed)
	}
	if modes, speed, err := ethtoolFacts(answer(ethtoolCmd{}, unix.EOPNOTSUPP), "enp2s0"); modes != nil || speed != nil || err != nil {
		t.Errorf("EOPNOTSUPP: %v %v %v, want nothing", modes, speed, err)
	}
	if _, _, err := ethtoolFacts(answer(ethtoolCmd{}, unix.EPERM), "enp2s0"); !errors.Is(err, unix.EPERM) {
		t.Errorf("EPERM: err %v", err)
	}
}

// TestEthtoolSocketLoopback asks the running kernel about lo, which has
// no ethtool settings: no modes, no speed, no error. It changes nothing.
func TestEthtoolSocketLoopback(t *testing.T) {
	gset, closeSocket, err := ethtoolSocket()
	if err != nil {
		t.Skipf("SKIPPED: no AF_INET socket here: %v", err)
	}
	defer closeSocket()
	modes, speed, err := ethtoolFacts(gset, "lo")
	if err != nil || modes != nil || speed != nil {
		t.Errorf("lo: modes %v speed %v err %v", modes, deref(speed), err)
	}
	if _, _, err := ethtoolFacts(gset, "no-such-nic0"); err != nil {
		t.Errorf("a missing interface: %v", err)
	}
	if err := gset("a-name-longer-than-ifnamsiz", &ethtoolCmd{}); err == nil {
		t.Error("an over-long name: no error")
	}
}
