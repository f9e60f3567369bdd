// Package hostguard records what a test run must leave as it found it on
// the machine that runs it (the host's /etc, host name, addresses, routes,
// links, mounts, loop devices, network namespaces, EFI variables, network
// sysctls, kernel modules and processes), so ./test.sh can take a Snapshot
// before and after the suite and fail on every Difference.
//
// Files are read below Options.Root and the network state of the namespace
// at Options.NetNS, so the package's own tests point both at things they
// created and never change the host to prove that a change is caught.
package hostguard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Options say where a Snapshot looks.
type Options struct {
	// Root is the directory below which etc, proc, sys and run are read:
	// "/" for the host.
	Root string
	// NetNS is the network namespace file (e.g. /run/netns/x) whose
	// addresses, routes and links are recorded; "": the caller's.
	NetNS string
	// Mark is an environment entry ("HOSTGUARD_RUN=abc") that the test
	// run's processes inherit; a process still carrying it, other than
	// the snapshot's own ancestors, was left running by the run. "": no
	// process check.
	Mark string
	// Self is the process whose ancestors are the run itself (the shell of
	// test.sh) rather than leftovers; 0: this process.
	Self int
	// Checks names the checks to run (Checks' names: "mounts", "loop
	// devices", "network", ...); empty: all of them. A caller that can
	// only attribute some kinds of state to itself, such as one test
	// binary among others, records just those.
	Checks []string
}

// Checks' names, in the order Take runs them.
const (
	CheckFiles     = "files"
	CheckEtc       = "etc"
	CheckSysctls   = "sysctls"
	CheckMounts    = "mounts"
	CheckLoops     = "loop devices"
	CheckNetns     = "network namespaces"
	CheckEFIVars   = "EFI variables"
	CheckPstore    = "pstore"
	CheckModules   = "modules"
	CheckProcesses = "processes"
	CheckNetwork   = "network"
)

// Snapshot is the recorded state: each item is a checked thing ("file
// /etc/resolv.conf", "route main 10.0.0.0/8 via 192.0.2.1 dev eth0") with
// its value (content, hash, type or count); absent things are absent.
type Snapshot struct {
	Root  string            `json:"root"`
	NetNS string            `json:"netns,omitempty"`
	Items map[string]string `json:"items"`
	// Skipped says what could not be checked and why (not root, no
	// efivarfs): printed, never a failure, so a partial check is loud.
	Skipped []string `json:"skipped,omitempty"`
}

// failing reports whether a difference of this kind (the first word of an
// item's key) fails the run. Module loads are reported only: tests
// legitimately make the kernel load loop, veth, vfat, nbd or tun, and
// unloading a module that something else on the machine may have started
// using is riskier than leaving it loaded.
func failing(kind string) bool {
	switch kind {
	case "file", "etc", "hostname", "sysctl", "addr", "route", "link",
		"mount", "loop", "netns", "efivar", "pstore", "process":
		return true
	}
	return false
}

// Difference is one thing that is not as it was.
type Difference struct {
	Item          string // the item's key
	Before, After string // values; "" with Added or Removed
	Added         bool
	Removed       bool
	Fails         bool // false: reported only (module loads)
}

// String names the difference in one line.
func (d Difference) String() string {
	switch {
	case d.Added && d.After != "":
		return fmt.Sprintf("%s: appeared (%s)", d.Item, d.After)
	case d.Added:
		return d.Item + ": appeared"
	case d.Removed && d.Before != "":
		return fmt.Sprintf("%s: disappeared (was %s)", d.Item, d.Before)
	case d.Removed:
		return d.Item + ": disappeared"
	}
	return fmt.Sprintf("%s: changed from %s to %s", d.Item, d.Before, d.After)
}

// Diff lists, sorted by item, what differs from before to after.
func Diff(before, after *Snapshot) []Difference {
	var out []Difference
	keys := slices.Sorted(maps.Keys(before.Items))
	for k := range after.Items {
		if _, ok := before.Items[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		b, inB := before.Items[k]
		a, inA := after.Items[k]
		if inA && inB && a == b {
			continue
		}
		kind, _, _ := strings.Cut(k, " ")
		out = append(out, Difference{Item: k, Before: b, After: a, Added: !inB, Removed: !inA, Fails: failing(kind)})
	}
	return out
}

// check is one kind of state Take records.
type check struct {
	name string
	run  func(*Snapshot, Options) error
}

// Take records the state Options point at. A check that cannot run is
// listed in Skipped; an error means the snapshot as a whole is unusable.
func Take(ctx context.Context, o Options) (*Snapshot, error) {
	if o.Root == "" {
		o.Root = "/"
	}
	s := &Snapshot{Root: o.Root, NetNS: o.NetNS, Items: map[string]string{}}
	checks := []check{
		{CheckFiles, snapFiles},
		{CheckEtc, snapEtc},
		{CheckSysctls, snapSysctls},
		{CheckMounts, snapMounts},
		{CheckLoops, snapLoops},
		{CheckNetns, snapNetns},
		{CheckEFIVars, snapEFIVars},
		{CheckPstore, snapPstore},
		{CheckModules, snapModules},
		{CheckProcesses, snapProcesses},
		{CheckNetwork, snapNetwork},
	}
	for _, name := range o.Checks {
		if !slices.ContainsFunc(checks, func(c check) bool { return c.name == name }) {
			return nil, fmt.Errorf("hostguard: no check %q", name)
		}
	}
	for _, c := range checks {
		if len(o.Checks) > 0 && !slices.Contains(o.Checks, c.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := c.run(s, o); err != nil {
			return nil, fmt.Errorf("hostguard: %s below %s: %w", c.name, o.Root, err)
		}
	}
	return s, nil
}

// skip records that a check could not run, and why.
func (s *Snapshot) skip(format string, args ...any) {
	s.Skipped = append(s.Skipped, fmt.Sprintf(format, args...))
}

// Write stores the snapshot as JSON.
func (s *Snapshot) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(s)
}

// Read loads a snapshot Write stored.
func Read(r io.Reader) (*Snapshot, error) {
	var s Snapshot
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		return nil, fmt.Errorf("hostguard: reading a snapshot: %w", err)
	}
	if s.Items == nil {
		return nil, fmt.Errorf("hostguard: reading a snapshot: no items")
	}
	return &s, nil
}
