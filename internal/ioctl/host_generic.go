//go:build amd64 || arm64 || riscv64 || s390x || loong64 || 386 || arm

package ioctl

// Host is the encoding of the architecture this binary is built for: a
// file per layout, so a build for an architecture neither lists fails to
// compile instead of using a wrong number.
func Host() Encoding { return generic }
