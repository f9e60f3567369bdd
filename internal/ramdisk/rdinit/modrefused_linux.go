package rdinit

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/lockdown"
)

// signatureRefusal explains finit_module's refusal (err) of the module at
// path when its signature is the cause, naming the module, and returns
// nil otherwise. The error starts as finit's others do ("finit_module
// PATH: "), which the module-loading VM test parses. Debian's kernel under UEFI Secure Boot locks
// itself down and refuses an unsigned module (or one signed with a key
// it does not trust) with EPERM; one enforcing signatures
// (module.sig_enforce=1) with EKEYREJECTED. mode is the lockdown mode
// (lockdown.Mode): an EPERM without lockdown has another cause.
func signatureRefusal(path string, err error, mode string) error {
	locked := mode != "" && mode != lockdown.None
	switch {
	case errors.Is(err, unix.EPERM) && locked, errors.Is(err, unix.EKEYREJECTED) && locked:
		return fmt.Errorf("finit_module %[2]s: module %[1]s: Secure Boot lockdown (%[3]s mode) refused it because it is unsigned, or signed with a key the kernel does not trust (%w): sign it with a key enrolled in shim's MOK list, or boot without Secure Boot; see kernel_lockdown(7)", moduleName(path), path, mode, err)
	case errors.Is(err, unix.EKEYREJECTED):
		return fmt.Errorf("finit_module %[2]s: module %[1]s: the kernel enforces module signatures (module.sig_enforce) and refused it because it is unsigned, or its signature does not verify (%[3]w)", moduleName(path), path, err)
	}
	return nil
}
