// Package command is the agent's command machinery: extensions and their
// commands, the ordered list of command results Ironic polls, sync and async
// execution, "one command at a time", and IPA's error objects.
package command

import (
	"errors"
	"fmt"
)

// Error is IPA's RESTError: what a failed command carries in command_error
// and what an HTTP error reply is built from. It always serialises, whatever
// went wrong (IPA pitfall: a raw exception made the whole list unreadable).
type Error struct {
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Details string `json:"details"`
	// Err is the wrapped cause, for errors.Is/As; never serialised.
	Err error `json:"-"`
}

func (e *Error) Error() string { return e.Message + ": " + e.Details }

func (e *Error) Unwrap() error { return e.Err }

func newErr(typ string, code int, msg, details string) *Error {
	return &Error{Type: typ, Code: code, Message: msg, Details: details}
}

// The error classes of IPA's errors.py that the agent produces, with their
// fixed messages and codes.

// InvalidCommand is a malformed or unknown command name (400).
func InvalidCommand(details string) *Error {
	return newErr("InvalidCommandError", 400, "Invalid command", details)
}

// InvalidCommandParams is a parameter validation failure (400).
func InvalidCommandParams(format string, a ...any) *Error {
	return newErr("InvalidCommandParamsError", 400, "Invalid command parameters", fmt.Sprintf(format, a...))
}

// NotFound is an unknown extension or command id (404).
func NotFound(what, id string) *Error {
	return newErr("RequestedObjectNotFoundError", 404, "Not found", fmt.Sprintf("%s with id %s not found.", what, id))
}

// AgentIsBusy is a new command while the last one still runs (409).
func AgentIsBusy(running string) *Error {
	return newErr("AgentIsBusy", 409, "Agent is busy", "executing command "+running)
}

// ExecutionError wraps any failure that is not already an *Error.
func ExecutionError(err error) *Error {
	e := newErr("CommandExecutionError", 500, "Command execution failed", err.Error())
	e.Err = err
	return e
}

// CleaningError is a failed clean step.
func CleaningError(details string) *Error {
	return newErr("CleaningError", 500, "Clean step failed", details)
}

// DeploymentError is a failed deploy step.
func DeploymentError(details string) *Error {
	return newErr("DeploymentError", 500, "Deploy step failed", details)
}

// VersionMismatch reports hardware manager versions differing from the ones
// Ironic recorded at get_*_steps time; the command status becomes
// CLEAN_VERSION_MISMATCH.
func VersionMismatch(current, ironic string) *Error {
	return newErr("VersionMismatch", 409, "Hardware managers version mismatch, reload agent with correct version",
		fmt.Sprintf("Current versions: %s, versions used by ironic: %s", current, ironic))
}

// New builds an error of any IPA class.
func New(typ string, code int, message, details string) *Error {
	return newErr(typ, code, message, details)
}

// AsError returns err as an *Error, wrapping it as a CommandExecutionError
// when it is not one already.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return ExecutionError(err)
}

// isClientError tells validation failures (not recorded, HTTP 4xx) from
// execution failures (recorded as FAILED).
func isClientError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) && e.Code >= 400 && e.Code < 500 && (e.Type == "InvalidCommandError" || e.Type == "InvalidCommandParamsError") {
		return e, true
	}
	return nil, false
}
