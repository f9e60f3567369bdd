package qemu

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ConsoleLogin is one login on the serial console (rescue's or the debug
// login's, package rescue): the banner line's text, the user, the
// password, and what the console must then show: "Login incorrect", or
// Want after the shell ran "echo SERIAL-$((6*7)) as $USER" (so Want
// "SERIAL-42 as root").
type ConsoleLogin struct {
	Banner, User, Password, Want string
}

// Login logs in on the serial console (the machine started with
// Options.ConsoleInput) and waits for l.Want; after a successful login
// it exits the shell and waits for the next banner. It also fails when
// the console echoed the password.
func (vm *VM) Login(ctx context.Context, l ConsoleLogin) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// A prompt may be stale or have the agent's log lines after it: an
	// empty user name brings a fresh one, whose first line is the banner
	// (the prompt itself ends without a newline).
	seen := len(vm.Lines())
	if err := vm.Type("\n"); err != nil {
		return err
	}
	banner, err := vm.WaitLine(ctx, seen, "the login banner", func(s string) bool { return strings.Contains(s, l.Banner) })
	if err != nil {
		return err
	}
	if err := vm.Type(l.User + "\n"); err != nil {
		return err
	}
	// The terminal echoes the user name as it arrives, before the login
	// reads it; the login turns the echo off, then prompts for the
	// password, which is typed only then. The prompt's line ends only
	// after the password: it is the console's tail, or a line of its own
	// if one of the agent's log lines came right after it.
	echo, err := vm.WaitLine(ctx, banner+1, "the user name's echo", func(s string) bool {
		return strings.HasSuffix(strings.TrimSpace(s), l.User)
	})
	if err != nil {
		return err
	}
	if err := vm.WaitPrompt(ctx, echo+1, "Password: "); err != nil {
		return err
	}
	if err := vm.Type(l.Password + "\n"); err != nil {
		return err
	}
	if l.Want != "Login incorrect" {
		if err := vm.Type("echo SERIAL-$((6*7)) as $USER\n"); err != nil {
			return err
		}
	}
	if err := vm.WaitAfter(ctx, seen, l.Want); err != nil {
		return err
	}
	if l.Want != "Login incorrect" {
		// Not on the command's line: the kernel hangs up a serial line
		// whose session leader exits, dropping output still queued.
		n := len(vm.Lines())
		if err := vm.Type("exit\n"); err != nil {
			return err
		}
		if err := vm.WaitAfter(ctx, n, l.Banner); err != nil {
			return fmt.Errorf("no login prompt after the shell's exit: %w", err)
		}
	}
	for _, line := range vm.Lines()[seen:] {
		if strings.Contains(line.Text, l.Password) {
			return fmt.Errorf("the console echoed the password: %q", line.Text)
		}
	}
	return nil
}

// WaitAfter waits for a console line holding s among the lines after the
// first n.
func (vm *VM) WaitAfter(ctx context.Context, n int, s string) error {
	_, err := vm.WaitLine(ctx, n, s, func(l string) bool { return strings.Contains(l, s) })
	return err
}

// WaitPrompt waits for prompt, the unended last line of the console
// (Tail) or in a line after the first n.
func (vm *VM) WaitPrompt(ctx context.Context, n int, prompt string) error {
	for {
		if strings.HasSuffix(vm.Tail(), prompt) {
			return nil
		}
		lines := vm.Lines()
		for i := min(n, len(lines)); i < len(lines); i++ {
			if strings.Contains(lines[i].Text, prompt) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no prompt %q on the console after line %d: %w", prompt, n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitLine waits for a console line after the first n that match accepts
// and returns its index; what names it in an error.
func (vm *VM) WaitLine(ctx context.Context, n int, what string, match func(string) bool) (int, error) {
	for {
		lines := vm.Lines()
		for i := min(n, len(lines)); i < len(lines); i++ {
			if match(lines[i].Text) {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no %q on the console after line %d: %w", what, n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
