//go:build ppc64 || ppc64le || mips || mipsle || mips64 || mips64le

package ioctl

// Host is the encoding of the architecture this binary is built for (see
// host_generic.go).
func Host() Encoding { return powerpc }
