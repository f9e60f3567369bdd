//go:build !linux

package image

// readProcessCPU reads nothing outside Linux.
func readProcessCPU() (processCPU, bool) { return processCPU{}, false }
