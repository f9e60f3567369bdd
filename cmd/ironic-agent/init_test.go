package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
)

// A panic in the init, in its own goroutine or one it started, is reported
// with its stack and the machine powered off, once, instead of PID 1 dying.
func TestInitPanicPowersOff(t *testing.T) {
	cases := map[string]func(ctx context.Context, console io.Writer, onPanic func(error)) error{
		"returned error": func(context.Context, io.Writer, func(error)) error {
			return errors.New("supervisor gave up")
		},
		"panic in init": func(context.Context, io.Writer, func(error)) error {
			panicInInit()
			return nil
		},
		"panic in a goroutine of init": func(_ context.Context, _ io.Writer, onPanic func(error)) error {
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer rdinit.Recover(onPanic)
				panicInInit()
			}()
			wg.Wait()
			return errors.New("after the goroutine")
		},
	}
	for name, main := range cases {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			powerOffs := 0
			err := initUntilFailure(context.Background(), io.Discard, &stderr, main, func() error {
				powerOffs++
				return errors.New("not really")
			})
			if powerOffs != 1 {
				t.Errorf("powered off %d times, want once", powerOffs)
			}
			if err == nil || err.Error() != "not really" {
				t.Errorf("error %v, want the power-off's", err)
			}
			out := stderr.String()
			if !strings.Contains(out, "; powering off") || !strings.Contains(out, "power off: not really") {
				t.Errorf("console:\n%s", out)
			}
			if strings.HasPrefix(name, "panic") && (!strings.Contains(out, "panic: injected") || !strings.Contains(out, "panicInInit")) {
				t.Errorf("console lacks the panic and its stack:\n%s", out)
			}
		})
	}
}

func panicInInit() { panic("injected") }
