package netnames

import (
	"errors"
	"fmt"
	"sort"
)

// Plan is what Apply does to one interface.
type Plan struct {
	ID
	Decision
}

// Renamer is the kernel side of Apply: netlink on Linux, a fake in tests.
type Renamer interface {
	// Rename gives interface from the name to; AddAltName adds an
	// alternative name to interface name.
	Rename(from, to string) error
	AddAltName(name, alt string) error
}

// Result is one thing Apply did or failed to do, for the log.
type Result struct {
	Interface string
	// Name is the new name ("" when the interface keeps its own) or the
	// alternative name of AltName.
	Name    string
	AltName bool
	Why     string
	Err     error
}

// Plans computes the decisions for every interface of sysRoot's
// class/net, in name order. An interface that cannot be read is an error
// naming it; the others are still planned.
func Plans(sysRoot string, scheme Scheme, policies bool) ([]Plan, []error) {
	return plans(sysfs{root: sysRoot}, scheme, policies)
}

// Trace tells visit every path below sysRoot that naming the NICs reads
// under the newest scheme (dir: a directory listed), so a capture of a
// machine (collector.Capture) holds what udev's net_id needs to name its
// NICs again.
func Trace(sysRoot string, visit func(rel string, dir bool)) []error {
	_, errs := plans(sysfs{root: sysRoot, visit: visit}, schemes[len(schemes)-1], true)
	return errs
}

func plans(s sysfs, scheme Scheme, policies bool) ([]Plan, []error) {
	ents, err := s.list("class/net")
	if err != nil {
		return nil, []error{fmt.Errorf("netnames: %w", err)}
	}
	var plans []Plan
	var errs []error
	for _, e := range ents {
		id, err := compute(s, e.Name(), scheme)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if id.Scheme == "" && id.Special == "" {
			// Not a link net_id names (loopback, tunnels, stacked).
			continue
		}
		plans = append(plans, Plan{ID: id, Decision: Decide(id, policies)})
	}
	return plans, errs
}

// ErrCollision is a new name another interface takes first.
var ErrCollision = errors.New("another interface takes this name")

// Apply renames the interfaces of plans and adds their alternative names.
// Two interfaces wanting one name is an error on the second (in name
// order), as udev's rename fails on it; so is a name another interface
// already has. Every outcome is in the results, failures with the reason.
func Apply(r Renamer, plans []Plan) []Result {
	taken := map[string]string{}
	var res []Result
	ordered := append([]Plan(nil), plans...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Interface < ordered[j].Interface })
	for _, p := range ordered {
		cur := p.Interface
		if p.Name != "" {
			out := Result{Interface: p.Interface, Name: p.Name, Why: p.Why}
			if other, ok := taken[p.Name]; ok {
				out.Err = fmt.Errorf("%w: %s", ErrCollision, other)
			} else if err := r.Rename(p.Interface, p.Name); err != nil {
				out.Err = err
			} else {
				taken[p.Name] = p.Interface
				cur = p.Name
			}
			res = append(res, out)
		}
		for _, alt := range p.AltNames {
			out := Result{Interface: cur, Name: alt, AltName: true, Why: "AlternativeNamesPolicy"}
			if err := r.AddAltName(cur, alt); err != nil {
				out.Err = err
			}
			res = append(res, out)
		}
	}
	return res
}
