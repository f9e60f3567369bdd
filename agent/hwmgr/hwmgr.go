// Package hwmgr is the hardware-manager framework of the agent (IPA's
// hardware.py dispatch): managers report how well they support this
// machine, are ordered by it, list clean and deploy steps that are merged by
// IPA's de-duplication rules, and run steps with fall-through to the next
// manager when one says "incompatible hardware".
//
// Managers are registered at build time as a list of constructors passed to
// Load; there is no global registry.
package hwmgr

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"

	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// Support is a manager's hardware support level (IPA's HardwareSupport):
// larger is more specific. 0 means the manager is not used.
type Support int

// IPA's guideline values.
const (
	SupportNone            Support = 0
	SupportGeneric         Support = 1
	SupportMainline        Support = 2
	SupportServiceProvider Support = 3
)

// Step is one clean or deploy step as listed to Ironic.
type Step struct {
	Step            string `json:"step"`
	Priority        int    `json:"priority"`
	Interface       string `json:"interface"`
	RebootRequested bool   `json:"reboot_requested"`
	// Abortable is set on clean steps and absent on deploy steps, as in IPA.
	Abortable *bool `json:"abortable,omitempty"`
	// Argsinfo describes the step's arguments: {name: {"description",
	// "required"}}.
	Argsinfo map[string]ArgInfo `json:"argsinfo,omitempty"`
}

// ArgInfo describes one step argument.
type ArgInfo struct {
	Description string `json:"description"`
	Required    bool   `json:"required"`
}

// Request is what a step receives: the node and ports Ironic sent, and the
// step's arguments (step.args merged over extra command parameters).
type Request struct {
	Node  map[string]any
	Ports []any
	Args  map[string]json.RawMessage
}

// Manager is a hardware manager.
type Manager interface {
	// Name is HARDWARE_MANAGER_NAME (key of hardware_manager_version).
	Name() string
	// ClassName keys the manager's step list (IPA uses the Python class
	// name, e.g. "GenericHardwareManager").
	ClassName() string
	// Version must be byte-for-byte stable for one build: Ironic compares
	// it before every step and restarts cleaning on a change.
	Version() string
	EvaluateHardwareSupport(ctx context.Context) Support
	CleanSteps(ctx context.Context, node map[string]any, ports []any) ([]Step, error)
	DeploySteps(ctx context.Context, node map[string]any, ports []any) ([]Step, error)
	// ExecuteStep runs the step named step. It returns an error wrapping
	// ErrNoSuchMethod when the manager has no such step, and one wrapping
	// ErrIncompatibleHardware to let the next manager try.
	ExecuteStep(ctx context.Context, step string, req Request) (any, error)
}

// ServiceLister is a Manager that lists service steps (IPA 9.7+'s
// get_service_steps). A manager without it lists none, as IPA's base
// HardwareManager returns [], so managers written before servicing need no
// change.
type ServiceLister interface {
	ServiceSteps(ctx context.Context, node map[string]any, ports []any) ([]Step, error)
}

// ErrNoSuchMethod: the manager does not implement the step.
var ErrNoSuchMethod = errors.New("no such method")

// ErrIncompatibleHardware is IPA's IncompatibleHardwareMethodError: the
// manager has the method but not for this hardware; dispatch falls through.
var ErrIncompatibleHardware = errors.New("HardwareManager method is not compatible with hardware")

type entry struct {
	m       Manager
	support Support
}

// Set is the loaded managers, most specific first.
type Set struct {
	entries []entry
	log     *slog.Logger
}

// Load builds every manager, keeps those with support > 0 and orders them
// by support, most specific first (equal support keeps list order).
func Load(ctx context.Context, ctors []func() Manager, log *slog.Logger) (*Set, error) {
	log = logging.OrDiscard(log)
	s := &Set{log: log}
	for _, c := range ctors {
		m := c()
		sup := m.EvaluateHardwareSupport(ctx)
		if sup <= SupportNone {
			log.Info("hardware manager not used: no support for this machine", "manager", m.Name())
			continue
		}
		log.Info("hardware manager found", "manager", m.Name(), "class", m.ClassName(), "version", m.Version(), "support", int(sup))
		s.entries = append(s.entries, entry{m, sup})
	}
	if len(s.entries) == 0 {
		return nil, ipaerror.New("HardwareManagerNotFound", 500, "No valid HardwareManager found", "no hardware manager supports this machine")
	}
	slices.SortStableFunc(s.entries, func(a, b entry) int { return cmp.Compare(b.support, a.support) })
	return s, nil
}

// Managers returns the managers in dispatch order.
func (s *Set) Managers() []Manager {
	out := make([]Manager, len(s.entries))
	for i, e := range s.entries {
		out[i] = e.m
	}
	return out
}

// Versions is hardware_manager_version: {manager name: version}.
func (s *Set) Versions() map[string]string {
	v := map[string]string{}
	for _, e := range s.entries {
		v[e.m.Name()] = e.m.Version()
	}
	return v
}

// CheckVersions compares the versions Ironic recorded (the clean_version or
// deploy_version parameter) with ours. null/absent means "first run" and
// passes; anything else must be equal, else a VersionMismatch error.
func (s *Set) CheckVersions(provided json.RawMessage) error {
	if len(provided) == 0 || string(provided) == "null" {
		return nil
	}
	cur := s.Versions()
	var got any
	if err := json.Unmarshal(provided, &got); err != nil {
		return ipaerror.InvalidCommandParams("version dict: %v", err)
	}
	want := map[string]any{}
	for k, v := range cur {
		want[k] = v
	}
	if !reflect.DeepEqual(got, want) {
		cj, _ := json.Marshal(cur)
		return ipaerror.VersionMismatch(string(cj), string(provided))
	}
	return nil
}

type kindSteps func(m Manager, ctx context.Context, node map[string]any, ports []any) ([]Step, error)

// CleanSteps asks every manager and merges by IPA's de-duplication rules.
func (s *Set) CleanSteps(ctx context.Context, node map[string]any, ports []any) (map[string][]Step, error) {
	return s.steps(ctx, node, ports, Manager.CleanSteps)
}

// DeploySteps asks every manager and merges by IPA's de-duplication rules.
func (s *Set) DeploySteps(ctx context.Context, node map[string]any, ports []any) (map[string][]Step, error) {
	return s.steps(ctx, node, ports, Manager.DeploySteps)
}

// ServiceSteps asks every manager that lists service steps and merges by
// IPA's de-duplication rules.
func (s *Set) ServiceSteps(ctx context.Context, node map[string]any, ports []any) (map[string][]Step, error) {
	return s.steps(ctx, node, ports, func(m Manager, ctx context.Context, node map[string]any, ports []any) ([]Step, error) {
		if sl, ok := m.(ServiceLister); ok {
			return sl.ServiceSteps(ctx, node, ports)
		}
		return nil, nil
	})
}

func (s *Set) steps(ctx context.Context, node map[string]any, ports []any, get kindSteps) (map[string][]Step, error) {
	var cands []candidate
	for _, e := range s.entries {
		steps, err := get(e.m, ctx, node, ports)
		if errors.Is(err, ErrIncompatibleHardware) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: listing steps: %w", e.m.Name(), err)
		}
		for _, st := range steps {
			cands = append(cands, candidate{st, e.m.ClassName(), e.support})
		}
	}
	return deduplicate(cands), nil
}

type candidate struct {
	step    Step
	class   string
	support Support
}

// deduplicate keeps one step per step name: the one of the manager with the
// higher support, then the higher priority, then the manager class name
// first in the alphabet (IPA's deduplicate_steps). The result maps class
// name to its winning steps, each list in the order the manager gave them.
func deduplicate(cands []candidate) map[string][]Step {
	byName := map[string][]int{}
	var order []string
	for i, c := range cands {
		if _, ok := byName[c.step.Step]; !ok {
			order = append(order, c.step.Step)
		}
		byName[c.step.Step] = append(byName[c.step.Step], i)
	}
	winners := map[int]bool{}
	for _, name := range order {
		idx := byName[name]
		sort.SliceStable(idx, func(a, b int) bool {
			x, y := cands[idx[a]], cands[idx[b]]
			if x.support != y.support {
				return x.support > y.support
			}
			if x.step.Priority != y.step.Priority {
				return x.step.Priority > y.step.Priority
			}
			return x.class < y.class
		})
		winners[idx[0]] = true
	}
	out := map[string][]Step{}
	for i, c := range cands {
		if winners[i] {
			out[c.class] = append(out[c.class], c.step)
		}
	}
	return out
}

// Dispatch runs a step on the most specific manager that has it, falling
// through on ErrNoSuchMethod and ErrIncompatibleHardware.
func (s *Set) Dispatch(ctx context.Context, step string, req Request) (any, error) {
	for _, e := range s.entries {
		v, err := e.m.ExecuteStep(ctx, step, req)
		switch {
		case errors.Is(err, ErrNoSuchMethod):
			continue
		case errors.Is(err, ErrIncompatibleHardware):
			s.log.Debug("hardware manager does not support this step here", "manager", e.m.Name(), "step", step, "error", err)
			continue
		}
		return v, err
	}
	return nil, ipaerror.New("HardwareManagerMethodNotFound", 500, "No HardwareManager found to handle method", "Could not find method: "+step)
}
