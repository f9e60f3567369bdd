package main

import (
	"context"
	"strings"
	"testing"
)

// TestFlagErrors: bad flags are refused before anything is fetched or
// built, with a message naming the flag.
func TestFlagErrors(t *testing.T) {
	for args, want := range map[string]string{
		"-file etc/x":                       "want DST=SRC",
		"-file =/etc/hosts":                 "want DST=SRC",
		"-cached":                           "-cached needs -agent",
		"-cached -agent /bin/true -iso":     "cannot make an ISO",
		"-out /tmp/x stray":                 "unexpected arguments",
		"-cache-key a -cached -json":        "-cached needs -agent",
		"-kernel-package x -no-such-flag":   "no-such-flag",
		"-modules a -cached -file a=b -iso": "-cached needs -agent",
	} {
		err := run(context.Background(), strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", args, err, want)
		}
	}
}
