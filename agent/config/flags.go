package config

import (
	"flag"
	"fmt"
	"strings"
)

// FlagValues collects what was given on the command line; pass it to Load
// through Inputs once the flag set is parsed.
type FlagValues struct {
	// Options maps option name to raw text, only for flags actually given.
	Options map[string]string
	// ConfigFiles are the --config-file values, in order.
	ConfigFiles []string
	// ConfigDirs are the --config-dir values, in order.
	ConfigDirs []string
}

// RegisterFlags adds one flag per option (its name with dashes, e.g.
// --api-url for api_url) plus --config-file and --config-dir.
func RegisterFlags(fs *flag.FlagSet) *FlagValues {
	fv := &FlagValues{Options: map[string]string{}}
	for _, o := range Options() {
		name := o.Name
		// The help text proper (kernel parameter, default, placeholder)
		// is the command's to print from Options.
		set := func(s string) error { fv.Options[name] = s; return nil }
		if o.Bool {
			fs.BoolFunc(o.Flag, o.Help, set)
		} else {
			fs.Func(o.Flag, o.Help, set)
		}
	}
	fs.Func("config-file", "read the INI config file at `PATH` (IPA option names in [DEFAULT]); repeatable, later files win", func(s string) error {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("empty path")
		}
		fv.ConfigFiles = append(fv.ConfigFiles, s)
		return nil
	})
	fs.Func("config-dir", "read every *.conf file in `DIR`, after --config-file; repeatable", func(s string) error {
		fv.ConfigDirs = append(fv.ConfigDirs, s)
		return nil
	})
	return fv
}

// DefaultConfigFiles returns the config files read, when they exist and no
// --config-file or --config-dir is given: where oslo.config looks for IPA's.
func DefaultConfigFiles() []string {
	return []string{
		"/etc/ironic-python-agent/ironic-python-agent.conf",
		"/etc/ironic-python-agent.conf",
		"/etc/ironic_python_agent/ironic_python_agent.conf",
	}
}

// DefaultConfigDirs returns the config directories read when none is named.
func DefaultConfigDirs() []string { return []string{"/etc/ironic-python-agent.d"} }
