// Package dmtest makes device-mapper devices for tests that need a disk
// which fails: an error target over a sector range, a disk whose table is
// swapped to error while I/O runs, a dm-flakey or dm-delay disk, and loop
// devices with partitions over them. The devices themselves are made by
// internal/devmapper (the DM ioctls, no dmsetup in the ramdisk); this
// package adds the failing targets. Test beds only: nothing but tests
// imports it.
package dmtest

import (
	"fmt"

	"github.com/ironic-go/ironic-agent/internal/devmapper"
)

// Error fails every I/O to length sectors at start with EIO.
func Error(start, length uint64) devmapper.Target {
	return devmapper.Target{Start: start, Length: length, Type: "error"}
}

// Delay maps onto dev from sector offset, delaying every read and write
// by ms milliseconds (dm-delay).
func Delay(start, length uint64, dev string, offset uint64, ms int) devmapper.Target {
	return devmapper.Target{Start: start, Length: length, Type: "delay", Params: fmt.Sprintf("%s %d %d", dev, offset, ms)}
}

// Flakey maps onto dev from sector offset, working for up seconds and
// then failing every I/O for down seconds, over and over (dm-flakey).
func Flakey(start, length uint64, dev string, offset uint64, up, down int) devmapper.Target {
	return devmapper.Target{Start: start, Length: length, Type: "flakey", Params: fmt.Sprintf("%s %d %d %d", dev, offset, up, down)}
}
