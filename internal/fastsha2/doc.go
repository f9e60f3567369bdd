// Package fastsha2 is SHA-256 and SHA-512 for the image pipeline on
// x86-64 CPUs that Go's crypto/sha256 and crypto/sha512 serve with their
// pure-Go code: those without AVX2 (and so, for Go, without its SHA-NI
// path too), such as QEMU's default qemu64 CPU and older or low-power
// servers. There, integer-only, fully unrolled assembly block functions
// hash about twice as fast as Go's generic code (as fast as OpenSSL's
// plain x86-64 code, which IPA hashes with); under QEMU's emulation the
// gap decided an image deploy's speed (docs/testing.md: IPA side by side).
// Where Go has its AVX2 or SHA-NI code, and on other architectures, the
// constructors return crypto/sha256's and crypto/sha512's hashes.
package fastsha2
