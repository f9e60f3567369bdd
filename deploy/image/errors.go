package image

import (
	"fmt"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// The IPA error classes an image write fails with; the agent reports them
// as they are.

func errInvalidParams(details string) *ipaerror.Error {
	return ipaerror.InvalidCommandParams("%s", details)
}

func errDownload(imageID string, cause error) *ipaerror.Error {
	return ipaerror.Wrap("ImageDownloadError", 500, "Error downloading image",
		"Download of image "+imageID+" failed: "+cause.Error(), cause)
}

func errChecksum(location, imageID, expected, actual string) *ipaerror.Error {
	return ipaerror.New("ImageChecksumError", 500, "Error verifying image checksum",
		"Image failed to verify against checksum. location: "+location+"; image ID: "+imageID+
			"; image checksum: "+expected+"; verification checksum: "+actual)
}

func errInvalidImage(details string, cause error) *ipaerror.Error {
	return ipaerror.Wrap("InvalidImage", 500, "The provided image is not valid for use", details, cause)
}

func errWrite(device string, cause error) *ipaerror.Error {
	return ipaerror.Wrap("ImageWriteError", 500, "Error writing image to device",
		"Writing image to device "+device+" failed: "+cause.Error(), cause)
}

// RootTooSmall is IPA's refusal of a partition image whose virtual size
// (MiB, rounded up) exceeds root_mb, an InvalidCommandParamsError.
func RootTooSmall(imageBytes, rootMiB int64) error {
	return errInvalidParams(fmt.Sprintf("Root partition is too small for requested image. Image virtual size: %d MB, Root size: %d MB",
		(imageBytes+blockdev.MiB-1)/blockdev.MiB, rootMiB))
}
