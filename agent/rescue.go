package agent

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ironic-go/ironic-agent/agent/command"
	"github.com/ironic-go/ironic-agent/internal/shacrypt"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// IPA's paths, below Options.StateRoot: the rescue password's hash (what
// IPA's ramdisk gives its rescue user) and the marker that this boot was
// rescued (RescuedMarker, which the debug login watches to make way for
// the rescue logins).
const (
	rescuePasswordFile = "etc/ipa-rescue-config/ipa-rescue-password"
	RescuedMarker      = "etc/.rescued"
)

// bindFinalizeRescue is rescue.finalize_rescue, as IPA: store the rescue
// password's crypt hash, mark the machine rescued, stop serving. Ironic
// sends the password hashed (hashed=true, SHA-crypt "$5$" by default or
// "$6$"), or in plaintext (no hashed) when the hashed call failed and
// [conductor]require_rescue_password_hashed is false; a plaintext one is
// hashed here with SHA-256, as IPA does. Unlike IPA, a hash no login could
// match (not SHA-crypt) is refused instead of stored.
func (a *Agent) bindFinalizeRescue(p command.Params) (command.Func, error) {
	var args struct {
		Password *string `json:"rescue_password"`
		Hashed   bool    `json:"hashed"`
	}
	if err := p.Decode(&args); err != nil {
		return nil, err
	}
	if args.Password == nil {
		return nil, ipaerror.InvalidCommandParams("missing parameter rescue_password")
	}
	var hash *shacrypt.Hash
	var err error
	if args.Hashed {
		if hash, err = shacrypt.Parse(*args.Password); err != nil {
			return nil, ipaerror.InvalidCommandParams("rescue_password is not a hash this agent can check logins against: %v", err)
		}
	} else if hash, err = shacrypt.New(shacrypt.SHA256, []byte(*args.Password), rand.Reader); err != nil {
		return nil, fmt.Errorf("finalize_rescue: %w", err)
	}
	return func(context.Context) (any, error) {
		file := filepath.Join(a.opts.StateRoot, rescuePasswordFile)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return nil, fmt.Errorf("finalize_rescue: %w", err)
		}
		if err := os.WriteFile(file, []byte(hash.String()), 0o600); err != nil {
			return nil, fmt.Errorf("finalize_rescue: %w", err)
		}
		if err := os.WriteFile(filepath.Join(a.opts.StateRoot, RescuedMarker), nil, 0o644); err != nil {
			return nil, fmt.Errorf("finalize_rescue: %w", err)
		}
		go a.StopServing()
		return nil, nil
	}, nil
}

// rescued reports whether this machine was rescued on this boot.
func (a *Agent) rescued() bool {
	_, err := os.Stat(filepath.Join(a.opts.StateRoot, RescuedMarker))
	return err == nil
}

// serveRescue hands the machine to the rescuer: the agent no longer
// serves Ironic and never heartbeats again; Options.Rescue (the SSH server
// and console logins) runs until ctx ends. Without it, or without a
// usable password, the agent just stays alive, as IPA does, so the
// ramdisk's init does not start a reachable agent again.
func (a *Agent) serveRescue(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(a.opts.StateRoot, rescuePasswordFile))
	var hash *shacrypt.Hash
	if err == nil {
		hash, err = shacrypt.Parse(string(b))
	}
	switch {
	case err != nil:
		a.log.Error("rescued, but no usable rescue password: no logins", "file", rescuePasswordFile, "error", err)
	case a.opts.Rescue == nil:
		a.log.Warn("rescued: nothing to serve logins with (Options.Rescue is nil)")
	default:
		a.log.Info("rescued: serving logins for the rescue user")
		return a.opts.Rescue(ctx, hash)
	}
	<-ctx.Done()
	return nil
}
