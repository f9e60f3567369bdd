package collector

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolCmd is struct ethtool_cmd of <linux/ethtool.h>, the argument of
// ETHTOOL_GSET: the legacy settings call, whose supported mask holds the
// link modes 0-31. It is what the lshw of IPA 13's ramdisk calls (Debian's
// 02.19 with its patch for the newer modes), not ETHTOOL_GLINKSETTINGS,
// so its speed_mbps sees exactly these 32 modes.
type ethtoolCmd struct {
	Cmd           uint32
	Supported     uint32
	Advertising   uint32
	Speed         uint16
	Duplex        uint8
	Port          uint8
	PhyAddress    uint8
	Transceiver   uint8
	Autoneg       uint8
	MDIOSupport   uint8
	MaxTxPkt      uint32
	MaxRxPkt      uint32
	SpeedHi       uint16
	EthTpMDIX     uint8
	EthTpMDIXCtrl uint8
	LpAdvertising uint32
	Reserved      [2]uint32
}

// ethtoolGSet fills cmd for the interface name: the OS boundary, which the
// tests replace.
type ethtoolGSet func(name string, cmd *ethtoolCmd) error

// ifreqData is struct ifreq with its ifr_data member set: the interface
// name and a pointer to the ethtool command.
type ifreqData struct {
	Name [unix.IFNAMSIZ]byte
	Data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte // the rest of the ifreq union
}

// ethtoolSocket opens the datagram socket SIOCETHTOOL goes through (lshw
// and ethtool(8) use one of AF_INET) and returns the ETHTOOL_GSET call on
// it and its closer.
func ethtoolSocket() (ethtoolGSet, func(), error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("ethtool socket: %w", err)
	}
	gset := func(name string, cmd *ethtoolCmd) error {
		var ifr ifreqData
		if len(name) >= len(ifr.Name) {
			return fmt.Errorf("interface name %q longer than %d bytes", name, len(ifr.Name)-1)
		}
		copy(ifr.Name[:], name)
		*cmd = ethtoolCmd{Cmd: unix.ETHTOOL_GSET}
		ifr.Data = unsafe.Pointer(cmd)
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
		runtime.KeepAlive(&ifr)
		runtime.KeepAlive(cmd)
		if errno != 0 {
			return errno
		}
		return nil
	}
	return gset, func() { unix.Close(fd) }, nil
}

// ethtoolFacts asks ETHTOOL_GSET about one interface: the names of the
// modes its supported mask has and its current speed (nil when unknown).
// A driver without ethtool settings (EOPNOTSUPP; virtual devices) has
// neither, as lshw reports none; an interface gone meanwhile (ENODEV)
// neither.
func ethtoolFacts(gset ethtoolGSet, name string) (modes []string, speed *int, err error) {
	var cmd ethtoolCmd
	if err := gset(name, &cmd); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENODEV) || errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("ethtool settings of %s: %w", name, err)
	}
	for bit, m := range legacyLinkModes {
		if cmd.Supported&(1<<bit) != 0 {
			modes = append(modes, m)
		}
	}
	// SPEED_UNKNOWN is (u32)-1 across speed and speed_hi; 0 means no link
	// on some drivers.
	if s := int(cmd.Speed) | int(cmd.SpeedHi)<<16; s > 0 && s < 1<<31-1 {
		speed = &s
	}
	return modes, speed, nil
}
