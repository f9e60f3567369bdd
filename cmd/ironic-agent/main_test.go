package main

import "testing"

// TestPlainSignals checks which commands start without the signal
// goroutine: only those that read and print, never one that writes a disk
// or talks to Ironic, whose context must end on SIGINT and SIGTERM.
func TestPlainSignals(t *testing.T) {
	for args, want := range map[string]bool{
		"inventory": true, "version": true,
		"": false, "init": false, "run": false, "erase": false, "write-image": false,
		"lldp": false, "capture-fixture": false, "debug-login": false, "nonsense": false,
	} {
		var a []string
		if args != "" {
			a = []string{args, "--flag"}
		}
		if got := plainSignals(a); got != want {
			t.Errorf("plainSignals(%q) = %v, want %v", a, got, want)
		}
	}
}
