package rdinit

import (
	"errors"
	"strings"
	"testing"
)

func TestRecover(t *testing.T) {
	var got error
	func() {
		defer Recover(func(err error) { got = err })
		explode()
	}()
	var p *PanicError
	if !errors.As(got, &p) || p.Value != "boom" || got.Error() != "panic: boom" || !strings.Contains(string(p.Stack), "explode") {
		t.Fatalf("got %v (stack %q)", got, p)
	}
	got = nil
	func() {
		defer Recover(func(err error) { got = err })
	}()
	if got != nil {
		t.Errorf("no panic reported %v", got)
	}
	defer func() {
		if v := recover(); v != "boom" {
			t.Errorf("nil report: recovered %v, want the panic again", v)
		}
	}()
	defer Recover(nil)
	explode()
}

func explode() { panic("boom") }
