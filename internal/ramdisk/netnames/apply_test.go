package netnames

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// fakeLinks is a Renamer over a map of names, failing where told.
type fakeLinks struct {
	names map[string]bool
	alts  map[string][]string
	fail  map[string]error // by new name
}

func (f *fakeLinks) Rename(from, to string) error {
	if err := f.fail[to]; err != nil {
		return err
	}
	if f.names[to] {
		return fmt.Errorf("rename %s to %s: file exists", from, to)
	}
	delete(f.names, from)
	f.names[to] = true
	return nil
}

func (f *fakeLinks) AddAltName(name, alt string) error {
	if err := f.fail[alt]; err != nil {
		return err
	}
	f.alts[name] = append(f.alts[name], alt)
	return nil
}

func TestApply(t *testing.T) {
	busy := errors.New("device or resource busy")
	links := &fakeLinks{names: map[string]bool{"eth0": true, "eth1": true, "eth2": true, "eth3": true},
		alts: map[string][]string{}, fail: map[string]error{"ens4": busy}}
	plans := []Plan{
		{ID: ID{Interface: "eth1"}, Decision: Decision{Name: "ens6", Why: "slot", AltNames: []string{"enp2s0f1"}}},
		{ID: ID{Interface: "eth0"}, Decision: Decision{Name: "ens6", Why: "slot", AltNames: []string{"enp2s0f0"}}},
		{ID: ID{Interface: "eth2"}, Decision: Decision{Name: "ens4", Why: "slot"}},
		{ID: ID{Interface: "eth3"}, Decision: Decision{Why: "net.ifnames=0", AltNames: []string{"enp5s0"}}},
	}
	res := Apply(links, plans)
	var got []string
	for _, r := range res {
		got = append(got, fmt.Sprintf("%s %s alt=%v err=%v", r.Interface, r.Name, r.AltName, r.Err))
	}
	want := []string{
		"eth0 ens6 alt=false err=<nil>",
		"ens6 enp2s0f0 alt=true err=<nil>",
		"eth1 ens6 alt=false err=another interface takes this name: eth0",
		"eth1 enp2s0f1 alt=true err=<nil>",
		"eth2 ens4 alt=false err=device or resource busy",
		"eth3 enp5s0 alt=true err=<nil>",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("results:\n%q\nwant\n%q", got, want)
	}
	if !errors.Is(res[2].Err, ErrCollision) {
		t.Errorf("collision error %v is not ErrCollision", res[2].Err)
	}
}

func TestDecideIfnamesOff(t *testing.T) {
	id := ID{Interface: "eth0", Scheme: DefaultScheme, Onboard: "eno1", Path: "enp0s25", MAC: "enx525400123456"}
	d := Decide(id, false)
	if d.Name != "" || !reflect.DeepEqual(d.AltNames, []string{"eno1", "enp0s25", "enx525400123456"}) {
		t.Errorf("net.ifnames=0: %+v", d)
	}
	// A BMC's USB NIC is named by udev's rules, which net.ifnames=0 does
	// not turn off.
	id = ID{Interface: "usb0", Scheme: DefaultScheme, Path: "enp0s20u4", MAC: "enx109836000001", USB: true, Special: "idrac"}
	if d := Decide(id, false); d.Name != "idrac" || d.AltNames != nil {
		t.Errorf("net.ifnames=0, iDRAC: %+v", d)
	}
}

func TestParseScheme(t *testing.T) {
	for name, want := range map[string]string{"latest": "v261", "v255": "v255", DefaultScheme: DefaultScheme} {
		s, err := ParseScheme(name)
		if err != nil || s.Name != want {
			t.Errorf("ParseScheme(%q) = %q, %v; want %q", name, s.Name, err, want)
		}
	}
	if s, err := ParseScheme("v256"); err == nil || s.Name != DefaultScheme {
		t.Errorf("ParseScheme(v256) = %q, %v; want the default and an error", s.Name, err)
	}
	if Default().Name != DefaultScheme {
		t.Errorf("Default() = %q", Default().Name)
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{"eno1": true, "enp0s20u1u4c2i1": true, "enP18p161s31f7d12": false, "123": false,
		"": false, ".": false, "all": false, "default": false, "a:b": false, "a b": false, "a%d": false, "a/b": false, "ens1\x7f": false} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v", s, got)
		}
	}
}

func TestComputeRefusesOutside(t *testing.T) {
	tr := newTree(t)
	tr.write("../outside/net/eth9/type", "1\n")
	for _, name := range []string{"../eth0", "", ".", "eth9"} {
		if _, err := Compute(tr.root, name, Default()); err == nil {
			t.Errorf("Compute(%q): no error", name)
		}
	}
}
