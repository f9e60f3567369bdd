// Package ipaerror is IPA's error object: the type, code, message and
// details a failed command carries in command_error and an HTTP error reply
// is built from. It is a leaf so that the agent's command machinery and the
// disk packages (deploy/...) produce the same value, with no converter
// between them.
package ipaerror

import (
	"errors"
	"fmt"
)

// Error is IPA's RESTError. It always serialises, whatever went wrong (IPA
// pitfall: a raw exception made the whole command list unreadable).
// Error() reads like IPA's str(): "<message>: <details>".
type Error struct {
	Type    string `json:"type"` // IPA's exception class name, e.g. "ImageChecksumError"
	Code    int    `json:"code"` // HTTP-style status; 400 for bad parameters
	Message string `json:"message"`
	Details string `json:"details"`
	// Err is the wrapped cause, for errors.Is/As; never serialised.
	Err error `json:"-"`
}

func (e *Error) Error() string { return e.Message + ": " + e.Details }

func (e *Error) Unwrap() error { return e.Err }

// New builds an error of any IPA class.
func New(typ string, code int, message, details string) *Error {
	return &Error{Type: typ, Code: code, Message: message, Details: details}
}

// Wrap is New with a cause, kept for errors.Is/As.
func Wrap(typ string, code int, message, details string, cause error) *Error {
	return &Error{Type: typ, Code: code, Message: message, Details: details, Err: cause}
}

// The error classes of IPA's errors.py that the agent produces, with their
// fixed messages and codes.

// InvalidCommand is a malformed or unknown command name (400).
func InvalidCommand(details string) *Error {
	return New("InvalidCommandError", 400, "Invalid command", details)
}

// InvalidCommandParams is a parameter validation failure (400).
func InvalidCommandParams(format string, a ...any) *Error {
	return New("InvalidCommandParamsError", 400, "Invalid command parameters", fmt.Sprintf(format, a...))
}

// NotFound is an unknown extension or command id (404).
func NotFound(what, id string) *Error {
	return New("RequestedObjectNotFoundError", 404, "Not found", fmt.Sprintf("%s with id %s not found.", what, id))
}

// AgentIsBusy is a new command while the last one still runs (409).
func AgentIsBusy(running string) *Error {
	return New("AgentIsBusy", 409, "Agent is busy", "executing command "+running)
}

// ExecutionError wraps any failure that is not already an *Error.
func ExecutionError(err error) *Error {
	return Wrap("CommandExecutionError", 500, "Command execution failed", err.Error(), err)
}

// CleaningError is a failed clean step.
func CleaningError(details string) *Error {
	return New("CleaningError", 500, "Clean step failed", details)
}

// DeploymentError is a failed deploy step.
func DeploymentError(details string) *Error {
	return New("DeploymentError", 500, "Deploy step failed", details)
}

// VersionMismatch reports hardware manager versions differing from the ones
// Ironic recorded at get_*_steps time; the command status becomes
// CLEAN_VERSION_MISMATCH.
func VersionMismatch(current, ironic string) *Error {
	return New("VersionMismatch", 409, "Hardware managers version mismatch, reload agent with correct version",
		fmt.Sprintf("Current versions: %s, versions used by ironic: %s", current, ironic))
}

// Generic is IPA's base RESTError with its default message (500).
func Generic(details string) *Error {
	return New("RESTError", 500, "An error occurred", details)
}

// As returns err as an *Error, wrapping it as a CommandExecutionError when
// it is not one already.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return ExecutionError(err)
}
