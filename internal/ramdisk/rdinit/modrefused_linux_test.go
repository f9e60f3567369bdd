package rdinit

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSignatureRefusal: finit_module's EPERM under lockdown and its
// EKEYREJECTED name the module and say why; an EPERM without lockdown
// and other errors are not explained as a signature's.
func TestSignatureRefusal(t *testing.T) {
	const p = "/lib/modules/6.12.99-test-amd64/updates/acme-nic.ko.xz"
	for _, c := range []struct {
		name string
		err  error
		mode string
		want []string // nil: not a signature refusal
	}{
		{"EPERM under lockdown", unix.EPERM, "integrity", []string{"finit_module " + p + ": module acme_nic: ", "Secure Boot lockdown (integrity mode) refused it because it is unsigned", "operation not permitted"}},
		{"EKEYREJECTED under lockdown", fmt.Errorf("wrapped: %w", unix.EKEYREJECTED), "confidentiality", []string{"module acme_nic: ", "Secure Boot lockdown (confidentiality mode) refused it because it is unsigned", "key was rejected by service"}},
		{"EKEYREJECTED, sig_enforce", unix.EKEYREJECTED, "none", []string{"module acme_nic: ", "module.sig_enforce", "unsigned"}},
		{"EKEYREJECTED, no lockdown file", unix.EKEYREJECTED, "", []string{"module acme_nic: ", "module.sig_enforce"}},
		{"EPERM without lockdown", unix.EPERM, "none", nil},
		{"EPERM, no lockdown file", unix.EPERM, "", nil},
		{"ENOEXEC under lockdown", unix.ENOEXEC, "integrity", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := signatureRefusal(p, c.err, c.mode)
			if c.want == nil {
				if got != nil {
					t.Fatalf("signatureRefusal = %v, want nil", got)
				}
				return
			}
			if got == nil || !errors.Is(got, c.err) {
				t.Fatalf("signatureRefusal = %v, want an error wrapping %v", got, c.err)
			}
			for _, w := range c.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("%v: does not say %q", got, w)
				}
			}
		})
	}
}
