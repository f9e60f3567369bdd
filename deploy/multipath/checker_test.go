package multipath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/devmapper"
	"github.com/ironic-go/ironic-agent/inventory"
)

// kernelMaps is device-mapper's side of the checker tests: each map's
// paths and their states, a table load resets them as the kernel does
// (a new table's paths start active), a message fails or reinstates one,
// and the status is the text dm-mpath writes.
type kernelMaps struct {
	maps    map[string][]PathState
	sectors map[string]uint64
	loads   []string
	msgs    []string
	failMsg bool
}

func (k *kernelMaps) Create(_ context.Context, name, uuid string, table []devmapper.Target) (*devmapper.Device, error) {
	if err := k.Load(context.Background(), name, table); err != nil {
		return nil, err
	}
	return &devmapper.Device{Name: name, Path: "/dev/dm-" + fmt.Sprint(len(k.maps)-1)}, nil
}

func (k *kernelMaps) Load(_ context.Context, name string, table []devmapper.Target) error {
	k.loads = append(k.loads, name+": "+table[0].Params)
	w := strings.Fields(table[0].Params)
	var paths []PathState
	if w[2] == "1" { // one group: "0 0 1 1 service-time 0 N 1 dev 1 ..."
		for i := 8; i < len(w); i += 2 {
			paths = append(paths, PathState{Dev: w[i], Active: true})
		}
	}
	if k.maps == nil {
		k.maps, k.sectors = map[string][]PathState{}, map[string]uint64{}
	}
	k.maps[name], k.sectors[name] = paths, table[0].Length
	return nil
}

func (k *kernelMaps) Status(name string, table bool) ([]devmapper.Target, error) {
	paths, ok := k.maps[name]
	if !ok {
		return nil, errors.New("DM_TABLE_STATUS " + name + ": no such device or address")
	}
	s := "2 0 0 0 0 0"
	if len(paths) > 0 {
		s = fmt.Sprintf("2 0 0 0 1 1 A 0 %d 2", len(paths))
		for _, p := range paths {
			st := "F"
			if p.Active {
				st = "A"
			}
			s += fmt.Sprintf(" %s %s %d 0 1", p.Dev, st, p.FailCount)
		}
	}
	return []devmapper.Target{{Length: k.sectors[name], Type: "multipath", Params: s}}, nil
}

func (k *kernelMaps) Message(name, msg string) error {
	k.msgs = append(k.msgs, name+": "+msg)
	if k.failMsg {
		return errors.New("DM_TARGET_MSG: invalid argument")
	}
	verb, dev, _ := strings.Cut(msg, " ")
	for i, p := range k.maps[name] {
		if p.Dev == dev {
			k.maps[name][i].Active = verb == "reinstate_path"
			if verb == "fail_path" {
				k.maps[name][i].FailCount++
			}
			return nil
		}
	}
	return errors.New("DM_TARGET_MSG: no such path")
}

// probes answers per device: nil, an error, or a channel to wait on.
type probes struct {
	mu      sync.Mutex
	answers map[string]error
	hang    map[string]chan struct{}
	calls   []string
}

func (p *probes) probe(_ context.Context, dev string) error {
	p.mu.Lock()
	p.calls = append(p.calls, dev)
	err, hang := p.answers[dev], p.hang[dev]
	p.mu.Unlock()
	if hang != nil {
		<-hang
	}
	return err
}

func held(p inventory.MultipathPath, m string) inventory.MultipathPath {
	p.Held, p.Map = true, m
	return p
}

// One map through its life: made, a path fails its check and is failed,
// answers again and is reinstated; its device goes (taken out), a new
// device comes on the same number (added back once the old one is out),
// a path of another size is not added, and a third path is.
func TestCheckerPass(t *testing.T) {
	k := &kernelMaps{}
	pr := &probes{answers: map[string]error{}}
	c := &Checker{Probe: pr.probe, Timeout: time.Second}
	ctx := context.Background()
	sda, sdb := path("sda", 0, lun), path("sdb", 16, lun)

	if made := c.Pass(ctx, k, []inventory.MultipathPath{sda, sdb}); !reflect.DeepEqual(made, []string{"/dev/dm-0"}) {
		t.Fatalf("made %q", made)
	}
	mapped := []inventory.MultipathPath{held(sda, lun), held(sdb, lun)}
	want := func(step string, states ...string) {
		t.Helper()
		var got []string
		for _, p := range k.maps[lun] {
			got = append(got, fmt.Sprintf("%s %v", p.Dev, p.Active))
		}
		if !reflect.DeepEqual(got, states) {
			t.Errorf("%s: paths %q, want %q", step, got, states)
		}
	}

	pr.answers["/dev/sdb"] = errors.New("directio check: input/output error")
	c.Pass(ctx, k, mapped)
	want("sdb fails its check", "8:0 true", "8:16 false")
	c.Pass(ctx, k, mapped)
	if n := len(k.msgs); n != 1 {
		t.Errorf("a failed path that still fails was messaged again: %q", k.msgs)
	}
	delete(pr.answers, "/dev/sdb")
	c.Pass(ctx, k, mapped)
	want("sdb answers again", "8:0 true", "8:16 true")
	if got := k.msgs; !reflect.DeepEqual(got, []string{lun + ": fail_path 8:16", lun + ": reinstate_path 8:16"}) {
		t.Errorf("messages %q", got)
	}

	// sdb removed: only sda is the map's.
	loads := len(k.loads)
	c.Pass(ctx, k, mapped[:1])
	want("sdb gone", "8:0 true")
	// A new disk on 8:16, not held: added in a pass of its own.
	c.Pass(ctx, k, []inventory.MultipathPath{mapped[0], sdb})
	want("a new sdb", "8:0 true", "8:16 true")
	if got := k.loads[loads:]; !reflect.DeepEqual(got, []string{
		lun + ": 0 0 1 1 service-time 0 1 1 8:0 1",
		lun + ": 0 0 1 1 service-time 0 2 1 8:0 1 8:16 1",
	}) {
		t.Errorf("reloads %q", got)
	}

	// Both gone at once, then both back: a map without paths, then two.
	c.Pass(ctx, k, nil)
	if len(k.loads) != loads+2 {
		t.Errorf("a map whose paths all left the listing was reloaded: %q", k.loads[loads+2:])
	}
	sdc := path("sdc", 32, lun)
	small := path("sdd", 48, lun)
	small.Sectors = 8
	c.Pass(ctx, k, append(mapped, sdc, small))
	want("sdc comes, sdd of another size does not", "8:0 true", "8:16 true", "8:32 true")
}

// A path whose device is gone while another stays, and the last one
// gone: the map keeps no path and fails its I/O.
func TestCheckerAllPathsGone(t *testing.T) {
	k := &kernelMaps{}
	c := &Checker{Probe: (&probes{}).probe, Timeout: time.Second}
	ctx := context.Background()
	if err := k.Load(ctx, lun, Map{Name: lun, Sectors: 131072, Paths: []inventory.MultipathPath{path("sda", 0, lun), path("sdb", 16, lun)}}.Table()); err != nil {
		t.Fatal(err)
	}
	// sdb's number now belongs to another LUN's disk: not this map's.
	c.Pass(ctx, k, []inventory.MultipathPath{held(path("sda", 0, lun), lun), path("sdb", 16, "3other")})
	if got := k.loads[len(k.loads)-1]; got != lun+": 0 0 1 1 service-time 0 1 1 8:0 1" {
		t.Errorf("reload %q", got)
	}
	k.maps[lun] = append(k.maps[lun], PathState{Dev: "8:16", Active: true})
	// sda still held by the map (the listing says so), the table's 8:16 gone.
	c.Pass(ctx, k, []inventory.MultipathPath{held(path("sda", 0, lun), lun)})
	if got := k.maps[lun]; len(got) != 1 {
		t.Errorf("paths %v", got)
	}
	empty := Map{Name: lun, Sectors: 131072}.Table()[0].Params
	if empty != "0 0 0 0" {
		t.Errorf("the table without paths %q", empty)
	}
}

// A probe that hangs fails its path after the timeout and is not started
// again while it hangs; its late answer is taken by a later pass.
func TestCheckerProbeHangs(t *testing.T) {
	k := &kernelMaps{}
	ctx := context.Background()
	sda, sdb := held(path("sda", 0, lun), lun), held(path("sdb", 16, lun), lun)
	if err := k.Load(ctx, lun, Map{Name: lun, Sectors: 131072, Paths: []inventory.MultipathPath{sda, sdb}}.Table()); err != nil {
		t.Fatal(err)
	}
	hang := make(chan struct{})
	pr := &probes{answers: map[string]error{}, hang: map[string]chan struct{}{"/dev/sdb": hang}}
	c := &Checker{Probe: pr.probe, Timeout: 50 * time.Millisecond}
	c.Pass(ctx, k, []inventory.MultipathPath{sda, sdb})
	if got := k.msgs; !reflect.DeepEqual(got, []string{lun + ": fail_path 8:16"}) {
		t.Errorf("messages %q", got)
	}
	c.Pass(ctx, k, []inventory.MultipathPath{sda, sdb})
	pr.mu.Lock()
	n := strings.Count(strings.Join(pr.calls, " "), "/dev/sdb")
	pr.mu.Unlock()
	if n != 1 {
		t.Errorf("sdb probed %d times while its first probe hung", n)
	}
	close(hang)
	// The hung probe's answer (nil) is the next pass's.
	c.Pass(ctx, k, []inventory.MultipathPath{sda, sdb})
	if got := k.msgs; len(got) != 2 || got[1] != lun+": reinstate_path 8:16" {
		t.Errorf("messages %q", got)
	}
}

// A map whose status cannot be read, or a message the kernel refuses, is
// logged and the pass goes on.
func TestCheckerErrors(t *testing.T) {
	k := &kernelMaps{failMsg: true}
	ctx := context.Background()
	sda := held(path("sda", 0, lun), lun)
	if err := k.Load(ctx, lun, Map{Name: lun, Sectors: 131072, Paths: []inventory.MultipathPath{sda}}.Table()); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	c := &Checker{Probe: (&probes{answers: map[string]error{"/dev/sda": errors.New("EIO")}}).probe, Timeout: time.Second, Log: textLogger(&log)}
	c.Pass(ctx, k, []inventory.MultipathPath{sda, held(path("sdb", 16, "3gone"), "3gone")})
	c.Pass(ctx, k, []inventory.MultipathPath{held(path("sdb", 16, "3gone"), "3gone")})
	out := log.String()
	if strings.Count(out, "cannot read a map's paths") != 1 {
		t.Errorf("the unreadable map's warning is not said exactly once:\n%s", out)
	}
	if !strings.Contains(out, "cannot fail a path") {
		t.Errorf("the refused message is not logged:\n%s", out)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if made := c.Pass(cctx, &kernelMaps{}, []inventory.MultipathPath{path("sda", 0, lun), path("sdb", 16, lun)}); len(made) != 0 {
		t.Errorf("made %q after the context ended", made)
	}
}

func TestWanted(t *testing.T) {
	if Wanted([]inventory.MultipathPath{path("sda", 0, lun), path("sdb", 16, "3other")}) {
		t.Error("one path per LUN wants device-mapper")
	}
	if !Wanted([]inventory.MultipathPath{held(path("sda", 0, lun), lun)}) {
		t.Error("a map to keep does not want device-mapper")
	}
	if !Wanted([]inventory.MultipathPath{path("sda", 0, lun), path("sdb", 16, lun)}) {
		t.Error("a map to make does not want device-mapper")
	}
}

func textLogger(w *strings.Builder) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil))
}
