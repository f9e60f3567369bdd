// Package command is the agent's command machinery: extensions and their
// commands, the ordered list of command results Ironic polls, sync and async
// execution, "one command at a time". Its errors are IPA's error objects,
// package ipaerror.
package command

import (
	"errors"

	"github.com/ironic-go/ironic-agent/ipaerror"
)

// isClientError tells validation failures (not recorded, HTTP 4xx) from
// execution failures (recorded as FAILED).
func isClientError(err error) (*ipaerror.Error, bool) {
	var e *ipaerror.Error
	if errors.As(err, &e) && e.Code >= 400 && e.Code < 500 && (e.Type == "InvalidCommandError" || e.Type == "InvalidCommandParamsError") {
		return e, true
	}
	return nil, false
}
