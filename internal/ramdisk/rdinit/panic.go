package rdinit

import (
	"fmt"
	"runtime/debug"
)

// PanicError is a panic caught in the init, with the stack of the goroutine
// that panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Recover, deferred at the top of a goroutine of the init, hands a panic of
// that goroutine to report instead of letting it end the process: PID 1
// dying panics the kernel, and the console would show a kernel panic rather
// than what went wrong. A nil report panics again, as if not recovered.
func Recover(report func(error)) {
	v := recover()
	if v == nil {
		return
	}
	if report == nil {
		panic(v)
	}
	report(&PanicError{Value: v, Stack: debug.Stack()})
}
