package image

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// errMaxDuration is the cause of a download attempt's context ending at
// DownloadOptions.MaxDuration.
type errMaxDuration struct{ d time.Duration }

func (e errMaxDuration) Error() string {
	return fmt.Sprintf("Download exceeded max allowed time (%d seconds)", int64(e.d/time.Second))
}

// errDownloadTimeout is IPA's ImageDownloadTimeoutError (HTTP 408), which
// IPA does not retry.
func errDownloadTimeout(imageID string, cause errMaxDuration) *ipaerror.Error {
	return ipaerror.Wrap("ImageDownloadTimeoutError", 408, "Image download timeout",
		"Download of image "+imageID+" failed: "+cause.Error(), cause)
}

// downloadFailure is errDownload, or errDownloadTimeout when ctx (the
// attempt's) ended at the download's time limit, whatever error the cut
// transfer surfaced as.
func downloadFailure(ctx context.Context, imageID string, err error) *ipaerror.Error {
	var md errMaxDuration
	if errors.As(context.Cause(ctx), &md) {
		return errDownloadTimeout(imageID, md)
	}
	return errDownload(imageID, err)
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
