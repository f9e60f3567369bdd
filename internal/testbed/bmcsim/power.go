package bmcsim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// machinePower is the power a simulated BMC (IPMISim, RedfishBMC) holds
// over its machine: each power-on is a QEMU started by the BMC, a power-off
// kills it, a guest that powers off is off. It keeps the QEMU of every
// power-on and a list of events for the test's log. mu also guards the
// owning BMC's own state.
type machinePower struct {
	mu      sync.Mutex
	vm      *qemu.VM
	vms     []*qemu.VM // of every power-on, in order (the last of each)
	ended   *qemu.VM   // the last VM whose end (power-off or exit) is recorded
	boots   int
	starts  int // QEMUs started, power-ons and guest resets: console logs
	events  []string
	changed chan struct{} // closed and replaced on every power change
}

// On reports whether the machine is powered on.
func (p *machinePower) On() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.onLocked()
}

// VM is the QEMU of the last power-on (nil before the first).
func (p *machinePower) VM() *qemu.VM {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.vm
}

// VMOfBoot is the QEMU of power-on number n (from 1), nil if there was
// none; after a guest's reset within that power-on, the QEMU that booted
// again.
func (p *machinePower) VMOfBoot(n int) *qemu.VM {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n < 1 || n > len(p.vms) {
		return nil
	}
	return p.vms[n-1]
}

// Boots is how many times the machine was powered on.
func (p *machinePower) Boots() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.boots
}

// Events lists what happened to the machine, in order ("boot device
// disk", "power on by IPMI (boot disk)", ...), for the test's log.
func (p *machinePower) Events() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.events...)
}

// WaitBoot waits until the machine has been powered on more than after
// times and returns the VM of that power-on.
func (p *machinePower) WaitBoot(ctx context.Context, after int) (*qemu.VM, error) {
	return p.wait(ctx, fmt.Sprintf("power-on number %d", after+1), func() bool { return p.boots > after && p.onLocked() })
}

// WaitOff waits until the machine is powered off.
func (p *machinePower) WaitOff(ctx context.Context) error {
	_, err := p.wait(ctx, "power-off", func() bool { return !p.onLocked() })
	return err
}

func (p *machinePower) wait(ctx context.Context, what string, done func() bool) (*qemu.VM, error) {
	for {
		p.mu.Lock()
		ok, vm, ch := done(), p.vm, p.changedLocked()
		p.mu.Unlock()
		if ok {
			return vm, nil
		}
		// Every change, a guest's own power-off included, is recorded
		// before ch is closed: waiting on QEMU's exit instead would see
		// the machine off before its event is in the list.
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("bmcsim: waiting for the BMC's %s: %w (events: %s)", what, ctx.Err(), strings.Join(p.Events(), ", "))
		}
	}
}

func (p *machinePower) changedLocked() chan struct{} {
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return p.changed
}

// onLocked says whether the machine is on: it has a VM whose end is not
// recorded yet.
func (p *machinePower) onLocked() bool {
	return p.vm != nil && p.ended != p.vm
}

func (p *machinePower) notifyLocked(event string) {
	p.events = append(p.events, event)
	close(p.changedLocked())
	p.changed = make(chan struct{})
}

// startLocked powers the machine on as m with start (Start, or a test's
// stand-in), recording event; nothing happens when it is on already.
// boot is the machine the BMC's boot settings start at that moment: a
// guest's reset (qemu.VM.GuestReset) starts it again within the same
// power-on, as a server reboots without its BMC powering it off, so
// Ironic never sees the machine off and never powers it on again.
func (p *machinePower) startLocked(ctx context.Context, m qemu.Machine, opts qemu.Options, start func(context.Context, qemu.Machine, qemu.Options) (*qemu.VM, error), event string, boot func() (qemu.Machine, error)) error {
	if p.onLocked() {
		return nil
	}
	return p.runLocked(ctx, m, opts, start, event, boot, false)
}

// runLocked starts QEMU as m: a power-on, or with reset the next boot of
// the running power-on, whose VM it becomes (VMOfBoot).
func (p *machinePower) runLocked(ctx context.Context, m qemu.Machine, opts qemu.Options, start func(context.Context, qemu.Machine, qemu.Options) (*qemu.VM, error), event string, boot func() (qemu.Machine, error), reset bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Each QEMU gets a fresh console log; the earlier ones are kept.
	if p.starts > 0 {
		log := filepath.Join(m.Dir, "serial.log")
		_ = os.Rename(log, filepath.Join(m.Dir, fmt.Sprintf("serial-%d.log", p.starts)))
	}
	vm, err := start(ctx, m, opts)
	if err != nil {
		return err
	}
	p.starts++
	p.vm = vm
	if reset {
		p.vms[len(p.vms)-1] = vm
	} else {
		p.vms = append(p.vms, vm)
		p.boots++
	}
	p.notifyLocked(event)
	go func() {
		<-vm.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.vm != vm || p.ended == vm {
			return
		}
		if vm.GuestReset() {
			next, err := boot()
			if err == nil {
				err = p.runLocked(ctx, next, opts, start, fmt.Sprintf("reset by the guest: boots again (the console before the reset: serial-%d.log)", p.starts), boot, true)
			}
			if err == nil {
				return
			}
			p.events = append(p.events, "reset by the guest: cannot boot again: "+err.Error())
		}
		p.ended = vm
		p.notifyLocked("powered off by the guest (QEMU exited)")
	}()
	return nil
}

func (p *machinePower) powerOffLocked(from string) {
	if vm := p.vm; vm != nil && p.onLocked() {
		p.ended = vm
		vm.Kill()
		p.notifyLocked("power off by " + from)
	}
}
