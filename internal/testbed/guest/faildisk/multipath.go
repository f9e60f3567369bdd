package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/multipath"
	"github.com/ironic-go/ironic-agent/internal/devmapper"
	"github.com/ironic-go/ironic-agent/internal/testbed/dmtest"
	"github.com/ironic-go/ironic-agent/inventory"
)

// mpathSectors is the LUN of the multipath scenario: the first 8 MiB of
// the base disk, reached over two device-mapper "paths" (linear maps of
// the same sectors) whose tables turn to error and back, as a SAN path
// fails and returns.
const mpathSectors = 8 << 20 / 512

// runMultipath is the scenario multipath_path_checker: the agent's
// multipath.Checker against the ramdisk kernel's dm-multipath. The map is
// bio-based (queue_mode bio) because its paths are device-mapper devices
// themselves, which a request-based map cannot stack on; the checker
// reads status and sends messages the same way for both.
func runMultipath(ctx context.Context, ctl *devmapper.Control, log *slog.Logger) {
	start := time.Now()
	detail, err := multipathScenario(ctx, ctl, log)
	secs := time.Since(start).Seconds()
	if err != nil {
		fmt.Printf("faildisk: fail multipath_path_checker %.1f %s\n", secs, oneLine(err.Error()))
		return
	}
	fmt.Printf("faildisk: ok multipath_path_checker %.1f %s\n", secs, oneLine(detail))
}

func multipathScenario(ctx context.Context, ctl *devmapper.Control, log *slog.Logger) (detail string, err error) {
	lin := []devmapper.Target{devmapper.Linear(0, mpathSectors, baseDisk, 0)}
	broken := []devmapper.Target{dmtest.Error(0, mpathSectors)}
	var devs []*devmapper.Device
	defer func() {
		for i := len(devs) - 1; i >= 0; i-- {
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = errors.Join(err, devs[i].Remove(rctx))
			cancel()
		}
	}()
	var paths []inventory.MultipathPath
	for _, name := range []string{"mp-path-a", "mp-path-b"} {
		d, err := ctl.Create(ctx, name, "", lin)
		if err != nil {
			return "", err
		}
		devs = append(devs, d)
		var st unix.Stat_t
		if err := unix.Stat(d.Path, &st); err != nil {
			return "", err
		}
		paths = append(paths, inventory.MultipathPath{Name: strings.TrimPrefix(d.Path, "/dev/"), Major: uint64(unix.Major(st.Rdev)),
			Minor: uint64(unix.Minor(st.Rdev)), Sectors: mpathSectors, WWID: "faildisk-lun", Held: true, Map: "mp-lun"})
	}
	a, b := devs[0], devs[1]
	dev := func(i int) string { return fmt.Sprintf("%d:%d", paths[i].Major, paths[i].Minor) }
	table := []devmapper.Target{{Length: mpathSectors, Type: "multipath",
		Params: fmt.Sprintf("2 queue_mode bio 0 1 1 service-time 0 2 1 %s 1 %s 1", dev(0), dev(1))}}
	mp, err := ctl.Create(ctx, "mp-lun", "mpath-faildisk-lun", table)
	if err != nil {
		return "", err
	}
	devs = append(devs, mp)
	c := &multipath.Checker{Timeout: 10 * time.Second, Log: log}
	var steps []string
	// want checks the map's paths after a pass: "A" or "F" for a and b.
	want := func(step, sa, sb string) error {
		c.Pass(ctx, ctl, paths)
		targets, err := ctl.Status("mp-lun", false)
		if err != nil {
			return err
		}
		states, err := multipath.ParseStatus(targets[0].Params)
		if err != nil {
			return err
		}
		got := ""
		for _, s := range states {
			got += map[bool]string{true: "A", false: "F"}[s.Active]
		}
		if got != sa+sb {
			return fmt.Errorf("%s: paths %s (status %q), want %s", step, got, targets[0].Params, sa+sb)
		}
		steps = append(steps, step+" "+got)
		return nil
	}
	if err := want("both answer", "A", "A"); err != nil {
		return "", err
	}
	// Path a fails: the checker's read fails it; the map's I/O goes
	// over b.
	if err := a.Load(ctx, broken); err != nil {
		return "", err
	}
	if err := want("a broken, checked", "F", "A"); err != nil {
		return "", err
	}
	data := bytes.Repeat([]byte("mpath-ok"), 512)
	if err := directIO(mp.Path, 4<<20, data, true); err != nil {
		return "", fmt.Errorf("write through the map with a failed: %w", err)
	}
	got := make([]byte, len(data))
	if err := directIO(b.Path, 4<<20, got, false); err != nil || !bytes.Equal(got, data) {
		return "", fmt.Errorf("the write through the map is not on path b (%v)", err)
	}
	if err := a.Load(ctx, lin); err != nil {
		return "", err
	}
	if err := want("a back, reinstated", "A", "A"); err != nil {
		return "", err
	}
	// Path b fails under I/O: the kernel fails it itself, the reads
	// still succeed over a, the checker keeps it failed until it answers.
	if err := b.Load(ctx, broken); err != nil {
		return "", err
	}
	for i := range 32 {
		if err := directIO(mp.Path, int64(i)*64<<10, got, false); err != nil {
			return "", fmt.Errorf("read %d through the map with b broken: %w", i, err)
		}
	}
	targets, err := ctl.Status("mp-lun", false)
	if err != nil {
		return "", err
	}
	steps = append(steps, "after 32 reads with b broken: "+targets[0].Params)
	if err := want("b broken, checked", "A", "F"); err != nil {
		return "", err
	}
	if err := b.Load(ctx, lin); err != nil {
		return "", err
	}
	if err := want("b back, reinstated", "A", "A"); err != nil {
		return "", err
	}
	return strings.Join(steps, "; "), nil
}

// directIO reads or writes len(buf) bytes at off of dev with O_DIRECT.
func directIO(dev string, off int64, buf []byte, write bool) error {
	flags := os.O_RDONLY
	if write {
		flags = os.O_WRONLY
	}
	f, err := os.OpenFile(dev, flags|unix.O_DIRECT, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	al, release, err := blockdev.AlignedBuffer(len(buf))
	if err != nil {
		return err
	}
	defer release()
	if write {
		copy(al, buf)
		_, err = f.WriteAt(al, off)
	} else {
		_, err = f.ReadAt(al, off)
		copy(buf, al)
	}
	return err
}
