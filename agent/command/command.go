package command

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// Status is a command's command_status.
type Status string

// The statuses on the wire. The version-mismatch value keeps its historical
// name even for deploy steps; Ironic matches this exact string.
const (
	Running                Status = "RUNNING"
	Succeeded              Status = "SUCCEEDED"
	Failed                 Status = "FAILED"
	StatusVersionMismatch  Status = "CLEAN_VERSION_MISMATCH"
	versionMismatchErrType        = "VersionMismatch"
)

// Params are a command's parameters as received.
type Params map[string]json.RawMessage

// Decode fills v (a pointer to a struct) from the parameters. Type errors
// are InvalidCommandParams errors naming the parameter.
func (p Params) Decode(v any) error {
	b, err := json.Marshal(p)
	if err != nil {
		return ipaerror.InvalidCommandParams("%v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			return ipaerror.InvalidCommandParams("parameter %s: want %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return ipaerror.InvalidCommandParams("%v", err)
	}
	return nil
}

// Func is a bound command ready to run. A string result is wrapped as
// {"result": ...} the way IPA does.
type Func func(ctx context.Context) (any, error)

// Command is one command of an extension.
type Command struct {
	// Async commands answer RUNNING at once and finish in the background.
	Async bool
	// Bind validates the parameters and returns the work. An error built by
	// InvalidCommandParams or InvalidCommand becomes an HTTP 400 and is not
	// recorded; any other error is recorded as a FAILED result.
	Bind func(p Params) (Func, error)
}

// Extension maps command names to commands.
type Extension map[string]Command

// Result is one entry of the command list.
type Result struct {
	id   string
	name string

	mu     sync.Mutex
	status Status
	err    *ipaerror.Error
	result json.RawMessage // "null" or a JSON object
	done   chan struct{}
}

// ID returns the command id.
func (r *Result) ID() string { return r.id }

// Name returns the short command name.
func (r *Result) Name() string { return r.name }

// Snapshot returns the status, error and result JSON at this moment.
func (r *Result) Snapshot() (Status, *ipaerror.Error, json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status, r.err, r.result
}

// Done is closed once the command has finished.
func (r *Result) Done() <-chan struct{} { return r.done }

// Wait blocks until the command has finished or ctx ends.
func (r *Result) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// MarshalJSON writes the fields in IPA's order: id, command_name,
// command_status, command_error, command_result.
func (r *Result) MarshalJSON() ([]byte, error) {
	st, e, res := r.Snapshot()
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	writeJSON(&b, r.id)
	b.WriteString(`,"command_name":`)
	writeJSON(&b, r.name)
	b.WriteString(`,"command_status":`)
	writeJSON(&b, string(st))
	b.WriteString(`,"command_error":`)
	if e == nil {
		b.WriteString("null")
	} else {
		writeJSON(&b, e)
	}
	b.WriteString(`,"command_result":`)
	if len(res) == 0 {
		b.WriteString("null")
	} else {
		b.Write(res)
	}
	b.WriteString("}")
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v any) {
	enc, err := json.Marshal(v)
	if err != nil {
		// Only strings and *ipaerror.Error reach here; both always marshal.
		enc = []byte("null")
	}
	b.Write(enc)
}

func (r *Result) finish(name string, async bool, v any, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer close(r.done)
	if err != nil {
		e := ipaerror.As(err)
		r.err = e
		r.result = nil
		r.status = Failed
		if e.Type == versionMismatchErrType {
			r.status = StatusVersionMismatch
		}
		return
	}
	v = wrapString(name, async, v)
	enc, merr := json.Marshal(v)
	if merr != nil {
		r.err = ipaerror.ExecutionError(fmt.Errorf("command result is not serialisable: %w", merr))
		r.status = Failed
		return
	}
	r.result = enc
	r.status = Succeeded
}

// wrapString wraps a string result as IPA does: {"result": s} for a sync
// command, {"result": "<name>: s"} for an async one.
func wrapString(name string, async bool, v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	if async {
		s = name + ": " + s
	}
	return map[string]string{"result": s}
}

// Executor dispatches commands, keeps every result for the life of the
// process in order, and allows one command at a time.
type Executor struct {
	exts   map[string]Extension
	ctx    context.Context
	log    *slog.Logger
	onDone func(*Result)

	execMu sync.Mutex // held while a command is dispatched (and a sync one runs)

	mu      sync.RWMutex
	results []*Result
	byID    map[string]*Result

	wg sync.WaitGroup
}

// NewExecutor returns an executor for the given extensions. Commands run
// under ctx (the agent's lifetime, not a request's); onAsyncDone is called
// after every async command ends (the agent forces a heartbeat there).
func NewExecutor(ctx context.Context, exts map[string]Extension, log *slog.Logger, onAsyncDone func(*Result)) *Executor {
	log = logging.OrDiscard(log)
	return &Executor{exts: exts, ctx: ctx, log: log, onDone: onAsyncDone, byID: map[string]*Result{}}
}

// lookup splits "<ext>.<cmd>" and finds the command.
func (e *Executor) lookup(full string) (string, Command, error) {
	ext, cmd, ok := strings.Cut(full, ".")
	if !ok {
		return "", Command{}, ipaerror.InvalidCommand("Command name must be of the form <extension>.<name>")
	}
	x, ok := e.exts[ext]
	if !ok {
		return "", Command{}, ipaerror.NotFound("Extension", ext)
	}
	c, ok := x[cmd]
	if !ok {
		return "", Command{}, ipaerror.InvalidCommand("Unknown command: " + cmd)
	}
	return cmd, c, nil
}

// Execute runs the command named "<extension>.<command>". It returns an
// error (an *ipaerror.Error) for outcomes that are HTTP errors and not recorded:
// malformed name, unknown extension or command, bad parameters, busy.
// Everything else is a recorded result, failed or not.
func (e *Executor) Execute(name string, params Params) (*Result, error) {
	e.execMu.Lock()
	defer e.execMu.Unlock()
	// IPA's order: name form, then busy, then extension and command.
	if !strings.Contains(name, ".") {
		return nil, ipaerror.InvalidCommand("Command name must be of the form <extension>.<name>")
	}
	if last := e.last(); last != nil {
		if st, _, _ := last.Snapshot(); st == Running {
			return nil, ipaerror.AgentIsBusy(last.name)
		}
	}
	short, cmd, fn, err := e.bind(name, params)
	if err != nil && cmd.Bind == nil {
		return nil, err
	}
	if err != nil {
		if ce, ok := isClientError(err); ok {
			return nil, ce
		}
		// IPA records a dispatch failure under the full dotted name.
		r := e.newResult(name)
		r.finish(name, false, nil, err)
		e.record(r)
		return r, nil
	}
	r := e.newResult(short)
	e.record(r)
	if !cmd.Async {
		v, err := e.call(fn)
		r.finish(short, false, v, err)
		return r, nil
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		v, err := e.call(fn)
		r.finish(short, true, v, err)
		st, _, _ := r.Snapshot()
		e.log.Info(EventAsyncCommandFinished, "command", short, "id", r.id, "status", st)
		if e.onDone != nil {
			e.onDone(r)
		}
	}()
	return r, nil
}

// RunNested runs a command inside another one (flow.start_flow, write_image
// running prepare_image): synchronously and not recorded, so the last entry
// of the list stays the outer command, which Ironic checks.
func (e *Executor) RunNested(ctx context.Context, name string, params Params) (any, error) {
	short, cmd, fn, err := e.bind(name, params)
	if err != nil {
		return nil, err
	}
	v, err := e.callCtx(ctx, fn)
	if err != nil {
		return nil, err
	}
	// The value is what the command's command_result would be, string
	// wrapping included: IPA's write_image returns prepare_image's
	// command_result, {"result": "prepare_image: ..."}.
	return wrapString(short, cmd.Async, v), nil
}

// bind finds the command and binds its parameters. A lookup failure comes
// back with a zero Command.
func (e *Executor) bind(name string, params Params) (string, Command, Func, error) {
	short, cmd, err := e.lookup(name)
	if err != nil {
		return "", Command{}, nil, err
	}
	if params == nil {
		params = Params{}
	}
	fn, err := safeBind(cmd, params)
	return short, cmd, fn, err
}

func safeBind(cmd Command, p Params) (fn Func, err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("internal error validating parameters: %v", x)
		}
	}()
	return cmd.Bind(p)
}

func (e *Executor) call(fn Func) (any, error) { return e.callCtx(e.ctx, fn) }

// callCtx runs fn and turns a panic into a failed command: one bad command
// must never take the agent down.
func (e *Executor) callCtx(ctx context.Context, fn Func) (v any, err error) {
	defer func() {
		if x := recover(); x != nil {
			e.log.Error("command panicked", "panic", x, "stack", string(debug.Stack()))
			v, err = nil, fmt.Errorf("internal error: %v", x)
		}
	}()
	return fn(ctx)
}

// RecordFailed appends a finished FAILED result for the short command name
// without running anything: how the agent reports a command that an earlier
// process of this boot started and never finished (it died), so that Ironic,
// which reads only the last entry, fails the step instead of taking the
// empty list of a fresh process as "step done".
func (e *Executor) RecordFailed(name string, err error) *Result {
	e.execMu.Lock()
	defer e.execMu.Unlock()
	r := e.newResult(name)
	r.finish(name, true, nil, err)
	e.record(r)
	return r
}

func (e *Executor) newResult(name string) *Result {
	return &Result{id: uuid.NewString(), name: name, status: Running, done: make(chan struct{})}
}

func (e *Executor) record(r *Result) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.results = append(e.results, r)
	e.byID[r.id] = r
}

func (e *Executor) last() *Result {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if len(e.results) == 0 {
		return nil
	}
	return e.results[len(e.results)-1]
}

// List returns every result in execution order.
func (e *Executor) List() []*Result {
	e.mu.RLock()
	defer e.mu.RUnlock()
	// Never nil: a fresh agent must answer {"commands": []}. Ironic 21.4
	// iterates the list after an agent restart and fails the node on null.
	return append([]*Result{}, e.results...)
}

// Get returns one result by id.
func (e *Executor) Get(id string) (*Result, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	r, ok := e.byID[id]
	return r, ok
}

// Busy tells whether the last command is still running.
func (e *Executor) Busy() bool {
	if last := e.last(); last != nil {
		st, _, _ := last.Snapshot()
		return st == Running
	}
	return false
}

// Wait blocks until every async command has finished.
func (e *Executor) Wait() { e.wg.Wait() }
