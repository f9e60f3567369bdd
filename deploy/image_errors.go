package deploy

import "fmt"

// Error is a failure with the fields IPA serialises for a failed command
// (type, code, message, details), so the agent can report it in IPA's
// words. Error() reads like IPA's str(): "<message>: <details>".
type Error struct {
	Type    string // IPA's exception class name, e.g. "ImageChecksumError"
	Code    int    // HTTP-style status; 400 for bad parameters
	Message string
	Details string
	Err     error // the cause, if any
}

func (e *Error) Error() string { return e.Message + ": " + e.Details }

func (e *Error) Unwrap() error { return e.Err }

func errInvalidParams(details string) *Error {
	return &Error{Type: "InvalidCommandParamsError", Code: 400, Message: "Invalid command parameters", Details: details}
}

func errDownload(imageID string, cause error) *Error {
	return &Error{Type: "ImageDownloadError", Code: 500, Message: "Error downloading image",
		Details: "Download of image " + imageID + " failed: " + cause.Error(), Err: cause}
}

func errChecksum(location, imageID, expected, actual string) *Error {
	return &Error{Type: "ImageChecksumError", Code: 500, Message: "Error verifying image checksum",
		Details: "Image failed to verify against checksum. location: " + location + "; image ID: " + imageID +
			"; image checksum: " + expected + "; verification checksum: " + actual}
}

func errInvalidImage(details string, cause error) *Error {
	return &Error{Type: "InvalidImage", Code: 500, Message: "The provided image is not valid for use", Details: details, Err: cause}
}

func errWrite(device string, cause error) *Error {
	return &Error{Type: "ImageWriteError", Code: 500, Message: "Error writing image to device",
		Details: "Writing image to device " + device + " failed: " + cause.Error(), Err: cause}
}

func errGeneric(details string) *Error {
	return &Error{Type: "RESTError", Code: 500, Message: "An error occurred", Details: details}
}

// RootTooSmall is IPA's refusal of a partition image whose virtual size
// (MiB, rounded up) exceeds root_mb, an InvalidCommandParamsError.
func RootTooSmall(imageBytes, rootMiB int64) error {
	return errInvalidParams(fmt.Sprintf("Root partition is too small for requested image. Image virtual size: %d MB, Root size: %d MB",
		(imageBytes+mib-1)/mib, rootMiB))
}
