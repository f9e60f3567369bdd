package hwmgr

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ExecSteps is a hardware manager made of executables an operator drops
// into a directory, so a ramdisk gains a step (say, a firmware flash)
// without recompiling the agent.
//
// For every step there are two files in the directory:
//
//	<name>.json   the manifest: {"step": "<name>", "interface": "deploy",
//	              "priority": 0, "reboot_requested": false, "abortable": false,
//	              "clean": true, "deploy": false, "service": false, "timeout": 3600,
//	              "argsinfo": {"arg": {"description": "...", "required": false}}}
//	<name>        the executable (mode +x)
//
// The executable gets {"step": ..., "node": ..., "ports": ..., "args": ...}
// as JSON on stdin. Exit status 0 is success; its stdout, when it is JSON,
// becomes the step result. Any other exit status fails the step with the
// command line, exit status and stderr in the error.
type ExecSteps struct {
	dir   string
	steps map[string]execStep
	names []string
	// version is derived from the manifests and executables so it is stable
	// across restarts with the same directory and changes when it changes.
	version string
	err     error
}

type execStep struct {
	Step            string             `json:"step"`
	Interface       string             `json:"interface"`
	Priority        int                `json:"priority"`
	RebootRequested bool               `json:"reboot_requested"`
	Abortable       bool               `json:"abortable"`
	Clean           *bool              `json:"clean"`
	Deploy          bool               `json:"deploy"`
	Service         bool               `json:"service"`
	Timeout         float64            `json:"timeout"`
	Argsinfo        map[string]ArgInfo `json:"argsinfo"`
	path            string
}

// NewExecSteps reads the step directory. A missing directory gives a
// manager that supports nothing; a broken manifest is reported by
// LoadError and the manager refuses to run (better than silently dropping
// an operator's step).
func NewExecSteps(dir string) *ExecSteps {
	x := &ExecSteps{dir: dir, steps: map[string]execStep{}}
	x.err = x.load()
	return x
}

// LoadError returns the problem found reading the directory, if any.
func (x *ExecSteps) LoadError() error { return x.err }

func (x *ExecSteps) load() error {
	ents, err := os.ReadDir(x.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("steps directory %s: %w", x.dir, err)
	}
	h := sha256.New()
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		mpath := filepath.Join(x.dir, n)
		data, err := os.ReadFile(mpath)
		if err != nil {
			return fmt.Errorf("step manifest %s: %w", mpath, err)
		}
		var st execStep
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&st); err != nil {
			return fmt.Errorf("step manifest %s: %w", mpath, err)
		}
		base := strings.TrimSuffix(n, ".json")
		if st.Step == "" {
			st.Step = base
		}
		if st.Step != base {
			return fmt.Errorf("step manifest %s: step %q must match the file name %q", mpath, st.Step, base)
		}
		if st.Interface == "" {
			st.Interface = "deploy"
		}
		if st.Timeout < 0 {
			return fmt.Errorf("step manifest %s: negative timeout", mpath)
		}
		st.path = filepath.Join(x.dir, base)
		fi, err := os.Stat(st.path)
		if err != nil {
			return fmt.Errorf("step %s: executable: %w", st.Step, err)
		}
		if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("step %s: %s is not an executable file", st.Step, st.path)
		}
		bin, err := os.ReadFile(st.path)
		if err != nil {
			return fmt.Errorf("step %s: %w", st.Step, err)
		}
		h.Write(data)
		h.Write(bin)
		x.steps[st.Step] = st
		x.names = append(x.names, st.Step)
	}
	x.version = "1.0-" + hex.EncodeToString(h.Sum(nil))[:12]
	return nil
}

// Name implements Manager.
func (x *ExecSteps) Name() string { return "exec_steps_hardware_manager" }

// ClassName implements Manager.
func (x *ExecSteps) ClassName() string { return "ExecStepsHardwareManager" }

// Version implements Manager.
func (x *ExecSteps) Version() string { return x.version }

// EvaluateHardwareSupport is MAINLINE when the directory holds steps (so an
// operator's step of the same name as a generic one wins), else none.
func (x *ExecSteps) EvaluateHardwareSupport(context.Context) Support {
	if len(x.steps) == 0 && x.err == nil {
		return SupportNone
	}
	return SupportMainline
}

// list lists the steps of one kind ("clean", "deploy" or "service"); clean
// and service steps carry abortable, as IPA's lists do.
func (x *ExecSteps) list(kind string) ([]Step, error) {
	if x.err != nil {
		return nil, x.err
	}
	var out []Step
	for _, n := range x.names {
		st := x.steps[n]
		switch {
		case kind == "clean" && st.Clean != nil && !*st.Clean, kind == "deploy" && !st.Deploy, kind == "service" && !st.Service:
			continue
		}
		s := Step{Step: st.Step, Priority: st.Priority, Interface: st.Interface, RebootRequested: st.RebootRequested, Argsinfo: st.Argsinfo}
		if kind != "deploy" {
			ab := st.Abortable
			s.Abortable = &ab
		}
		out = append(out, s)
	}
	return out, nil
}

// CleanSteps implements Manager: every step not marked "clean": false.
func (x *ExecSteps) CleanSteps(context.Context, map[string]any, []any) ([]Step, error) {
	return x.list("clean")
}

// DeploySteps implements Manager: steps marked "deploy": true.
func (x *ExecSteps) DeploySteps(context.Context, map[string]any, []any) ([]Step, error) {
	return x.list("deploy")
}

// ServiceSteps implements ServiceLister: steps marked "service": true.
func (x *ExecSteps) ServiceSteps(context.Context, map[string]any, []any) ([]Step, error) {
	return x.list("service")
}

// ExecuteStep runs the step's executable.
func (x *ExecSteps) ExecuteStep(ctx context.Context, step string, req Request) (any, error) {
	st, ok := x.steps[step]
	if !ok {
		return nil, ErrNoSuchMethod
	}
	if st.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(st.Timeout*float64(time.Second)))
		defer cancel()
	}
	args := req.Args
	if args == nil {
		args = map[string]json.RawMessage{}
	}
	in, err := json.Marshal(map[string]any{"step": step, "node": req.Node, "ports": req.Ports, "args": args})
	if err != nil {
		return nil, fmt.Errorf("step %s: encoding input: %w", step, err)
	}
	cmd := exec.CommandContext(ctx, st.path)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		status := "not started"
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			status = ee.ProcessState.String()
		}
		if ctx.Err() != nil {
			status += " (" + ctx.Err().Error() + ")"
		}
		return nil, fmt.Errorf("step %s: %s: %s; stderr: %s", step, st.path, status, tail(stderr.Bytes(), 4096))
	}
	out := bytes.TrimSpace(stdout.Bytes())
	if len(out) == 0 {
		return nil, nil
	}
	var v any
	if json.Unmarshal(out, &v) == nil {
		return v, nil
	}
	return string(tail(out, 4096)), nil
}

func tail(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return append([]byte("..."), b[len(b)-n:]...)
	}
	return b
}
