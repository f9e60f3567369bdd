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
	"syscall"
	"time"
)

// ExecSteps is a hardware manager made of executables an operator drops
// into a directory, so a ramdisk gains a step (say, a firmware flash)
// without recompiling the agent, as a Python hardware manager does in IPA.
//
// For every step there are two files in the directory:
//
//	<name>.json   the manifest: {"step": "<name>", "interface": "deploy",
//	              "priority": 0, "reboot_requested": false, "abortable": false,
//	              "clean": true, "deploy": false, "service": false, "timeout": 3600,
//	              "argsinfo": {"arg": {"description": "...", "required": false}}}
//	<name>        the executable (mode +x)
//
// The executable gets {"step", "node", "ports", "args", "inventory"} as
// JSON on stdin (inventory: the agent's hardware inventory, as Ironic
// receives it), and the step's name, the node's UUID and each argument in
// its environment (stepEnv). Exit status 0 is success; its stdout, when it is JSON,
// becomes the step result. Exit status 77 (ExitIncompatibleHardware)
// says "not my hardware": the next manager's step of the same name runs,
// as after IPA's IncompatibleHardwareMethodError. Any other exit status,
// or the manifest's timeout passing (the process is killed), fails the
// step with the command line, exit status and the end of its stderr (of
// its stdout when stderr is empty).
//
// A manifest with "builtin": true and no executable re-lists a step of
// another manager (the generic erase_devices, say) with the manifest's
// priority, interface, reboot_requested and abortable: priority 0 keeps
// it out of automated cleaning, another value moves it. Running it runs
// the other manager's step. The manager's support (MAINLINE) is above
// the generic manager's, so its listing wins by IPA's de-duplication.
type ExecSteps struct {
	dir   string
	steps map[string]execStep
	names []string
	// version is derived from the manifests and executables so it is stable
	// across restarts with the same directory and changes when it changes.
	version string
	err     error
	// inventory gives the inventory a step receives; nil gives none.
	inventory func(ctx context.Context) (any, error)
}

// ExitIncompatibleHardware is the exit status by which a step's executable
// says the step is not for this hardware, so the next manager's runs.
// 77 is the "skipped" status of automake's test drivers: one no shell
// builtin or crash produces.
const ExitIncompatibleHardware = 77

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
	// Builtin: the manifest re-lists another manager's step of its name;
	// there is no executable, and running it falls through.
	Builtin bool `json:"builtin"`
	path    string
}

// NewExecSteps reads the step directory. A missing directory gives a
// manager that supports nothing; a broken manifest is reported by
// LoadError and the manager refuses to run (better than silently dropping
// an operator's step).
//
// inventory, when not nil, gives the inventory each step receives on its
// stdin; a step runs without one (null) when it fails, the failure logged
// by the caller's inventory hook.
func NewExecSteps(dir string, inventory func(ctx context.Context) (any, error)) *ExecSteps {
	x := &ExecSteps{dir: dir, steps: map[string]execStep{}, inventory: inventory}
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
		h.Write(data)
		if st.Builtin {
			if err := checkBuiltin(st, mpath); err != nil {
				return err
			}
		} else {
			st.path = filepath.Join(x.dir, base)
			bin, err := readExecutable(st)
			if err != nil {
				return err
			}
			h.Write(bin)
		}
		x.steps[st.Step] = st
		x.names = append(x.names, st.Step)
	}
	x.version = "1.0-" + hex.EncodeToString(h.Sum(nil))[:12]
	return nil
}

// checkBuiltin refuses a builtin manifest that also names an executable or
// says what only an executable can do: the operator meant something the
// agent would not do.
func checkBuiltin(st execStep, mpath string) error {
	exe := strings.TrimSuffix(mpath, ".json")
	if _, err := os.Lstat(exe); err == nil {
		return fmt.Errorf("step manifest %s: \"builtin\": true re-lists another manager's step, yet %s exists: remove one of the two", mpath, exe)
	}
	if st.Timeout != 0 {
		return fmt.Errorf("step manifest %s: \"timeout\" applies to an executable, and a \"builtin\" step has none", mpath)
	}
	return nil
}

// readExecutable checks that st's executable is an executable regular file
// and returns its bytes (for the manager's version).
func readExecutable(st execStep) ([]byte, error) {
	fi, err := os.Stat(st.path)
	if err != nil {
		return nil, fmt.Errorf("step %s: executable: %w (a manifest without an executable needs \"builtin\": true)", st.Step, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("step %s: %s is not an executable file", st.Step, st.path)
	}
	bin, err := os.ReadFile(st.path)
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", st.Step, err)
	}
	return bin, nil
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

// ExecuteStep runs the step's executable; a builtin step falls through to
// the next manager.
func (x *ExecSteps) ExecuteStep(ctx context.Context, step string, req Request) (any, error) {
	st, ok := x.steps[step]
	if !ok {
		return nil, ErrNoSuchMethod
	}
	if st.Builtin {
		return nil, fmt.Errorf("step %s: the steps directory only re-lists it: %w", step, ErrIncompatibleHardware)
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
	var inv any
	if x.inventory != nil {
		// A step that needs the inventory says so when it finds null;
		// the others must not fail for want of it.
		inv, _ = x.inventory(ctx)
	}
	in, err := json.Marshal(map[string]any{"step": step, "node": req.Node, "ports": req.Ports, "args": args, "inventory": inv})
	if err != nil {
		return nil, fmt.Errorf("step %s: encoding input: %w", step, err)
	}
	cmd := exec.CommandContext(ctx, st.path)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(os.Environ(), stepEnv(step, req)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// Its own process group, killed whole on timeout: a vendor tool the
	// step started must not outlive it, holding the disk or its output.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		status := "not started: " + err.Error()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ee.ExitCode() == ExitIncompatibleHardware && ctx.Err() == nil {
				return nil, fmt.Errorf("step %s: %s exited %d (not this hardware): %s: %w", step, st.path, ExitIncompatibleHardware, tail(stderr.Bytes(), 512), ErrIncompatibleHardware)
			}
			status = ee.ProcessState.String()
		}
		if ctx.Err() != nil {
			status += " (" + ctx.Err().Error() + ")"
			if st.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				status += fmt.Sprintf(": killed after the manifest's timeout of %gs", st.Timeout)
			}
		}
		printed, what := stderr.Bytes(), "stderr"
		if len(bytes.TrimSpace(printed)) == 0 {
			printed, what = stdout.Bytes(), "stdout (stderr empty)"
		}
		return nil, fmt.Errorf("step %s: %s: %s; %s: %s", step, st.path, status, what, tail(printed, 4096))
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

// stepEnv is what a step gets in its environment beside the JSON on its
// stdin, for scripts of busybox's sh, which has no JSON parser:
// IRONIC_STEP, IRONIC_NODE_UUID and IRONIC_STEP_ARG_<NAME> per argument
// (the name upper-cased, every character but letters and digits made _;
// a string as it is, any other value as JSON).
func stepEnv(step string, req Request) []string {
	env := []string{"IRONIC_STEP=" + step}
	if uuid, ok := req.Node["uuid"].(string); ok {
		env = append(env, "IRONIC_NODE_UUID="+uuid)
	}
	names := make([]string, 0, len(req.Args))
	for n := range req.Args {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		raw := req.Args[n]
		v := string(raw)
		var str string
		if json.Unmarshal(raw, &str) == nil {
			v = str
		}
		env = append(env, "IRONIC_STEP_ARG_"+envName(n)+"="+v)
	}
	return env
}

// envName is an argument name as an environment variable name's tail.
func envName(n string) string {
	b := []byte(strings.ToUpper(n))
	for i, c := range b {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

func tail(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return append([]byte("..."), b[len(b)-n:]...)
	}
	return b
}
