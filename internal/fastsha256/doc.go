// Package fastsha256 is SHA-256 for the image pipeline on x86-64 CPUs
// that Go's crypto/sha256 serves with its pure-Go code: those without
// AVX2 (and so, for Go, without its SHA-NI path too), such as QEMU's
// default qemu64 CPU, older or low-power servers. There, an integer-only,
// fully unrolled assembly block function hashes about twice as fast as
// Go's generic code (as fast as OpenSSL's plain x86-64 code, which IPA
// hashes with); under QEMU's emulation the gap decided an image deploy's
// speed (README, "IPA 13 side by side"). Where Go has its AVX2 or SHA-NI
// code, and on other architectures, New returns crypto/sha256's hash.
package fastsha256
