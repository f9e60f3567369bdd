package image

import (
	"bufio"
	"compress/bzip2"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/qcow2"
	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// DefaultPermittedFormats is IPA's permitted_image_formats default.
var DefaultPermittedFormats = []string{FormatRaw, FormatGPT, FormatQcow2}

// WriteOptions configures WriteImage.
type WriteOptions struct {
	Download DownloadOptions
	// MD5Enabled is IPA's md5_enabled (default true there).
	MD5Enabled bool
	// PermittedFormats is permitted_image_formats from lookup; nil means
	// DefaultPermittedFormats.
	PermittedFormats []string
	// DisableDeepInspection is disable_deep_image_inspection: the format
	// found by magic bytes is used without the permitted/declared checks.
	DisableDeepInspection bool
	// DeviceZeroed says the device reads as zeros (after a discard that
	// guarantees it): zero runs are skipped instead of zeroed.
	DeviceZeroed bool
	// Guard must allow the device; nil refuses every device.
	Guard *blockdev.Guard
	// Checksum, when set, overrides the one from image_info (write-image
	// command line); an empty Expected computes the digest without
	// comparing it (an operator who has no checksum).
	Checksum *Checksum
	// AllowLocalFiles lets a URL be a local path or file:// URL (the
	// write-image command); the agent accepts only http and https.
	AllowLocalFiles bool
	// TooLarge, when set, builds the error for an image whose virtual size
	// is larger than the device, found before anything is written
	// (partition images: IPA's "Root partition is too small").
	TooLarge func(virtualSize, deviceSize int64) error
	// Progress is called every ProgressInterval and once at the end.
	Progress         func(WriteProgress)
	ProgressInterval time.Duration
	Logger           *slog.Logger
}

// WriteProgress is a snapshot of a running image write.
type WriteProgress struct {
	Received int64 // bytes of the image file received
	Total    int64 // size of the image file, -1 if unknown
	Written  int64 // bytes of disk content written or zeroed
	Elapsed  time.Duration
	Done     bool
}

// WriteResult says what was written and verified.
type WriteResult struct {
	Device      string
	URL         string
	Algorithm   string
	Digest      string
	Verified    bool        // Digest was compared with an expected value
	FileBytes   int64       // image file size, as hashed
	DiskBytes   int64       // bytes of disk content (virtual size)
	Compression Compression // outer container, "" if none
	Format      string      // disk format inside
	Duration    time.Duration
	ZeroedBytes int64 // zero runs written with the zero-out ioctl
	SkipBytes   int64 // zero runs skipped on a zeroed device
	Resumes     int
	Refetched   int64 // qcow2 bytes fetched again with Range requests
	Attempts    int
	Warnings    []string
	// Stages is where the time went (the last attempt's).
	Stages StageTimes
}

// Summary is the one line an operator reads at the end.
func (r *WriteResult) Summary() string {
	f := r.Format
	if r.Compression != CompressionNone {
		f = string(r.Compression) + "-compressed " + f
	}
	secs := r.Duration.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(r.DiskBytes) / secs / 1e6
	}
	verb := "verified"
	if !r.Verified {
		verb = "NOT verified (no checksum given), computed"
	}
	return fmt.Sprintf("%s %s %s of %d bytes (%s image, %d bytes on disk) written to %s in %.1fs, %.0f MB/s",
		verb, r.Algorithm, r.Digest, r.FileBytes, f, r.DiskBytes, r.Device, secs, rate)
}

// source is an opened image: a stream from the start, random access when
// possible, the file size (-1 unknown), and what to call it in messages.
type source struct {
	stream  io.Reader
	random  randomReader
	size    int64
	name    string
	close   func()
	resumes func() int
}

// openSource opens an http(s) URL (with resume) or, when allowed, a local
// file.
func openSource(ctx context.Context, urls []string, o *DownloadOptions, received *atomic.Int64, allowLocal bool) (*source, error) {
	local := len(urls) == 1 && (!strings.Contains(urls[0], "://") || strings.HasPrefix(urls[0], "file://"))
	for _, u := range urls {
		if !allowLocal && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			// Ironic sends http(s) URLs; anything else could read the
			// ramdisk's own files or devices.
			return nil, errFatal{fmt.Errorf("unsupported URL %q: only http and https are accepted", u)}
		}
	}
	if local {
		p := strings.TrimPrefix(urls[0], "file://")
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		return &source{
			stream: &countingReader{r: f, n: received}, random: fileRandom{f}, size: st.Size(), name: p,
			close: func() { f.Close() }, resumes: func() int { return 0 },
		}, nil
	}
	rf, resp, cancel, err := openImage(ctx, o, urls)
	if err != nil {
		return nil, err
	}
	sr := newStreamReader(ctx, rf, resp, cancel, received)
	src := &source{stream: sr, size: rf.size, name: rf.url, close: sr.close, resumes: func() int { return sr.resumes }}
	src.random = rf
	return src, nil
}

type fileRandom struct{ f *os.File }

func (r fileRandom) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return r.f.ReadAt(p, off)
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// hashingReader hashes what passes through it until h is set to nil.
type hashingReader struct {
	r io.Reader
	h io.Writer
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if h.h != nil {
		h.h.Write(p[:n])
	}
	return n, err
}

// WriteImage downloads the image, verifies it and writes it to device as a
// whole-disk image. Every byte received is hashed; the digest is compared
// before the write counts as done, then the device is synced and its
// partition table re-read. Failed attempts (a checksum mismatch, a file
// that changed on the server, a transfer that could not be resumed) are
// repeated up to Download.Retries times, as IPA repeats the whole
// download; bad parameters, a refused image and 4xx replies are not.
func WriteImage(ctx context.Context, info *ImageInfo, device string, opts WriteOptions) (*WriteResult, error) {
	opts.Logger = logging.OrDiscard(opts.Logger)
	if opts.Download.Logger == nil {
		opts.Download.Logger = opts.Logger
	}
	if opts.Guard == nil {
		return nil, errWrite(device, errors.New("no device guard configured"))
	}
	if err := opts.Guard.Check(device); err != nil {
		return nil, errWrite(device, err)
	}
	dl := downloadOptionsFor(info, &opts)
	var sum Checksum
	if opts.Checksum != nil {
		sum = *opts.Checksum
	} else {
		var err error
		if sum, err = resolveChecksum(ctx, info, &dl, opts.MD5Enabled); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		res, err := writeOnce(ctx, info, device, sum, &dl, &opts)
		if err == nil {
			res.Attempts = attempt
			return res, nil
		}
		var e *ipaerror.Error
		retryable := errors.As(err, &e) && (e.Type == "ImageChecksumError" || (e.Type == "ImageDownloadError" && !isFatalDownload(err)))
		if !retryable || ctx.Err() != nil || attempt > dl.Retries {
			return nil, err
		}
		opts.Logger.Warn("image write attempt failed, retrying", "image", info.ID, "attempt", attempt, "error", err)
		if err := clock.Sleep(ctx, dl.RetryInterval); err != nil {
			return nil, err
		}
	}
}

// downloadOptionsFor adds image_info's proxies and credentials to the
// download options.
func downloadOptionsFor(info *ImageInfo, opts *WriteOptions) DownloadOptions {
	if len(opts.Download.Proxies) == 0 && len(info.Proxies) > 0 {
		opts.Download.Proxies, opts.Download.NoProxy = info.Proxies, info.NoProxy
	}
	if info.Authorization != "" || info.AuthStrategy == "http_basic" {
		h := opts.Download.Header.Clone()
		if h == nil {
			h = http.Header{}
		}
		if info.Authorization != "" {
			h.Set("Authorization", info.Authorization)
		} else {
			r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
			r.SetBasicAuth(info.User, info.Password)
			h.Set("Authorization", r.Header.Get("Authorization"))
		}
		opts.Download.Header = h
	}
	if opts.Download.Logger == nil {
		opts.Download.Logger = opts.Logger
	}
	return opts.Download.withDefaults()
}

// ImageVirtualSize returns how many bytes the image takes on disk when its
// first bytes tell: the file size of an uncompressed raw image, the virtual
// size in a qcow2 header; -1 when they do not (compressed images). The
// transfer is dropped after those bytes, so a partition image too big for
// its root partition is refused before the disk is touched, as IPA refuses
// it before work_on_disk.
func ImageVirtualSize(ctx context.Context, info *ImageInfo, opts WriteOptions) (int64, error) {
	opts.Logger = logging.OrDiscard(opts.Logger)
	dl := downloadOptionsFor(info, &opts)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var received atomic.Int64
	src, err := openSource(ctx, info.URLs, &dl, &received, opts.AllowLocalFiles)
	if err != nil {
		return -1, errDownload(info.ID, err)
	}
	defer src.close()
	head, err := bufio.NewReaderSize(src.stream, SniffLen).Peek(SniffLen)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return -1, errDownload(info.ID, err)
	}
	if DetectCompression(head) != CompressionNone {
		return -1, nil
	}
	switch f := DetectFormat(head); {
	case rawLike(f):
		return src.size, nil
	case f == FormatQcow2:
		h, err := qcow2.ParseHeader(head)
		if err != nil {
			return -1, errInvalidImage(fmt.Sprintf("image %s: %v", info.ID, err), err)
		}
		return int64(h.Size), nil
	}
	return -1, nil
}

func isFatalDownload(err error) bool {
	var se *statusError
	var fe errFatal
	return errors.As(err, &se) && se.fatal() || errors.As(err, &fe)
}

// errFatal marks a download error that no retry can fix.
type errFatal struct{ err error }

func (e errFatal) Error() string { return e.err.Error() }
func (e errFatal) Unwrap() error { return e.err }

func writeOnce(ctx context.Context, info *ImageInfo, device string, sum Checksum, dl *DownloadOptions, opts *WriteOptions) (res *WriteResult, err error) {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctx, stopLimit, release := transferLimit(ctx, dl.MaxDuration)
	defer release()
	var received atomic.Int64
	src, err := openSource(ctx, info.URLs, dl, &received, opts.AllowLocalFiles)
	if err != nil {
		return nil, downloadFailure(ctx, info.ID, err)
	}
	defer src.close()
	h := newHash(sum.Algorithm)
	if h == nil {
		return nil, ipaerror.Generic("unsupported checksum algorithm " + sum.Algorithm)
	}
	clock := startStageClock()
	// Hashed beside the producer, which may have a qcow2 image to
	// convert or a file to decompress; a raw image's bytes are hashed
	// by the writer instead.
	ah := newAsyncHash(timedHash{h, &clock.hash}, &clock.bufferWait)
	defer ah.Wait()
	hr := &hashingReader{r: timedReader{src.stream, &clock.receive, &clock.reads}, h: ah}
	outer := bufio.NewReaderSize(hr, SniffLen)
	c, inner, decoder, head, closeDec, err := sniff(ctx, outer, info.ID)
	if err != nil {
		return nil, err
	}
	defer closeDec()
	res = &WriteResult{Device: device, URL: src.name, Algorithm: sum.Algorithm, Compression: c, Format: DetectFormat(head)}
	if err := checkFormat(info, res.Format, opts); err != nil {
		return nil, err
	}

	dev, err := openDevice(device)
	if err != nil {
		return nil, errWrite(device, err)
	}
	defer dev.Close()
	if err := checkFits(res, src.size, dev.Size(), info.ID, device, opts); err != nil {
		return nil, err
	}
	w, writerHash, err := newImageWriter(dev, device, res, hr, &h, sum.Algorithm, clock, opts)
	if err != nil {
		return nil, errWrite(device, err)
	}
	stopProgress := startProgress(ctx, opts, &received, src.size, w, start)
	defer stopProgress(false)

	copyStart := time.Now()
	fra, copyErr := copyImage(ctx, res, outer, inner, decoder, src, w, dev.Size(), info.ID, opts)
	copyTime := time.Since(copyStart)
	stopLimit()
	if copyErr != nil {
		w.abort()
		return nil, copyFailure(ctx, copyErr, info.ID, device)
	}
	if err := w.Close(); err != nil {
		return nil, errWrite(device, err)
	}
	res.FileBytes, res.DiskBytes = received.Load(), w.Size()
	res.ZeroedBytes, res.SkipBytes = w.zeroOut.Load(), w.skipped.Load()
	res.Resumes = src.resumes()
	if fra != nil {
		res.Refetched = fra.Refetched
	}
	ah.Wait()
	if err := verify(res, h, sum, src.name, info.ID); err != nil {
		return nil, err
	}
	syncStart := time.Now()
	if err := finishDevice(ctx, dev, res, opts); err != nil {
		return nil, errWrite(device, err)
	}
	res.Stages = clock.times(copyTime, time.Since(syncStart), writerHash == nil, hashImplementation(sum.Algorithm))
	res.Duration = time.Since(start)
	stopProgress(true)
	opts.Logger.Info(EventImageWritten, "image", info.ID, "device", device, "summary", res.Summary(), "stages", res.Stages.String())
	return res, nil
}

// transferLimit bounds the transfer by d (0: no bound). The time limit
// covers the transfer only (IPA checks it per chunk received): stop ends
// it once the last byte is in, so the final sync is never cut by it;
// release frees the limit's context.
func transferLimit(ctx context.Context, d time.Duration) (_ context.Context, stop, release func()) {
	if d <= 0 {
		return ctx, func() {}, func() {}
	}
	ctx, cancelCause := context.WithCancelCause(ctx)
	limit := time.AfterFunc(d, func() { cancelCause(errMaxDuration{d}) })
	stop = func() { limit.Stop() }
	return ctx, stop, func() { cancelCause(nil); stop() }
}

// verify records the image's digest in res and checks it against the
// expected checksum, when there is one.
func verify(res *WriteResult, h hash.Hash, sum Checksum, url, id string) error {
	res.Digest = fmt.Sprintf("%x", h.Sum(nil))
	res.Verified = sum.Expected != ""
	if res.Verified && res.Digest != sum.Expected {
		return errChecksum(url, id, sum.Expected, res.Digest)
	}
	return nil
}

// newImageWriter makes the disk writer. A raw, uncompressed image's bytes
// all go to the disk in order, the sniffed ones included: the writer's
// hash stage hashes them, with a fresh hash put in *h, and the reader
// hashes nothing. writerHash is that stage's hash, nil otherwise.
func newImageWriter(dev *deviceFile, device string, res *WriteResult, hr *hashingReader, h *hash.Hash, algorithm string,
	clock *stageClock, opts *WriteOptions) (w *diskWriter, writerHash hash.Hash, err error) {
	if res.Compression == CompressionNone && rawLike(res.Format) {
		*h = newHash(algorithm)
		hr.h, writerHash = nil, timedHash{*h, &clock.hash}
	}
	w, err = newDiskWriter(dev, device, opts.DeviceZeroed, writerHash, clock)
	return w, writerHash, err
}

// sniff reads the head of the file and detects its compression; for a
// compressed file it starts the decoder and returns the head of what that
// yields. inner is what the copy reads; closeDec is always safe to call.
func sniff(ctx context.Context, outer *bufio.Reader, id string) (c Compression, inner *bufio.Reader, decoder io.Reader, head []byte, closeDec func(), err error) {
	head, perr := outer.Peek(SniffLen)
	if perr != nil && !errors.Is(perr, io.EOF) && !errors.Is(perr, bufio.ErrBufferFull) {
		return "", nil, nil, nil, nil, downloadFailure(ctx, id, perr)
	}
	c = DetectCompression(head)
	if c == CompressionNone {
		return c, outer, nil, head, func() {}, nil
	}
	inner, decoder, head, closeDec, err = decompress(outer, c, id)
	return c, inner, decoder, head, closeDec, err
}

// finishDevice syncs the device (dev.Finish) and records its warning.
func finishDevice(ctx context.Context, dev *deviceFile, res *WriteResult, opts *WriteOptions) error {
	warn, err := dev.Finish(ctx)
	if err != nil {
		return err
	}
	if warn != "" {
		res.Warnings = append(res.Warnings, warn)
		opts.Logger.Warn(warn)
	}
	return nil
}

// decompress starts the decoder of a compressed image and sniffs the head
// of what it yields.
func decompress(outer *bufio.Reader, c Compression, id string) (inner *bufio.Reader, decoder io.Reader, head []byte, closeDec func(), err error) {
	d, closeDec, err := newDecoder(c, outer)
	if err != nil {
		return nil, nil, nil, nil, errInvalidImage(fmt.Sprintf("image %s: %s header: %v", id, c, err), err)
	}
	inner = bufio.NewReaderSize(d, SniffLen)
	head, perr := inner.Peek(SniffLen)
	if perr != nil && !errors.Is(perr, io.EOF) && !errors.Is(perr, bufio.ErrBufferFull) {
		closeDec()
		return nil, nil, nil, nil, errInvalidImage(fmt.Sprintf("image %s: decompressing %s: %v", id, c, perr), perr)
	}
	return inner, d, head, closeDec, nil
}

// checkFits refuses a raw, uncompressed image larger than the device
// before anything is written (the size is known from the server).
func checkFits(res *WriteResult, srcSize, devSize int64, id, device string, opts *WriteOptions) error {
	if res.Compression != CompressionNone || !rawLike(res.Format) || srcSize < 0 || devSize < 0 || srcSize <= devSize {
		return nil
	}
	if opts.TooLarge != nil {
		return opts.TooLarge(srcSize, devSize)
	}
	return errInvalidImage(fmt.Sprintf("image %s is %d bytes, larger than %s (%d bytes)", id, srcSize, device, devSize), nil)
}

// copyImage writes the image's contents to w: raw bytes as they come, a
// qcow2 image converted (reading back through src's ranges when the file
// is not compressed). It then reads the rest, so the decoder checks its
// CRC and every byte of the file is hashed. fra is the qcow2 reader, nil
// for a raw image.
func copyImage(ctx context.Context, res *WriteResult, outer, inner *bufio.Reader, decoder io.Reader, src *source, w *diskWriter,
	devSize int64, id string, opts *WriteOptions) (fra *forwardReaderAt, err error) {
	switch {
	case rawLike(res.Format):
		_, err = w.ReadFrom(inner)
	case res.Format == FormatQcow2:
		if res.Compression == CompressionNone {
			fra = newForwardReaderAt(ctx, outer, src.random)
			err = convertQcow2(ctx, fra, src.size, w, devSize, id, opts.TooLarge)
		} else {
			fra = newForwardReaderAt(ctx, inner, nil)
			err = convertQcow2(ctx, fra, -1, w, devSize, id, opts.TooLarge)
		}
		if err == nil {
			err = fra.Drain()
		}
	default:
		err = errInvalidImage(fmt.Sprintf("image %s is in %s format, which this agent cannot write", id, res.Format), nil)
	}
	if err == nil && decoder != nil {
		// The decoder must reach its end (it checks its own CRC there).
		_, err = io.Copy(io.Discard, inner)
	}
	if err == nil {
		// Hash whatever follows (nothing, for a well-formed file).
		_, err = io.Copy(io.Discard, outer)
	}
	return fra, err
}

// copyFailure is the IPA error of a failed copy: the image's fault, the
// time limit's, the device's or the download's.
func copyFailure(ctx context.Context, err error, id, device string) error {
	var e *ipaerror.Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, qcow2.ErrCorrupt) || errors.Is(err, qcow2.ErrUnsupported) {
		return errInvalidImage(fmt.Sprintf("image %s: %v", id, err), err)
	}
	if ctx.Err() != nil {
		if e := downloadFailure(ctx, id, err); e.Type == "ImageDownloadTimeoutError" {
			return e
		}
		return ctx.Err()
	}
	if isWriteFailure(err) {
		return errWrite(device, err)
	}
	return errDownload(id, err)
}

// writeFailure marks errors that come from the device, not the source.
type writeFailure struct{ err error }

func (w writeFailure) Error() string { return w.err.Error() }
func (w writeFailure) Unwrap() error { return w.err }

func isWriteFailure(err error) bool {
	var wf writeFailure
	return errors.As(err, &wf)
}

func convertQcow2(ctx context.Context, r io.ReaderAt, size int64, w *diskWriter, devSize int64, id string, tooLarge func(int64, int64) error) error {
	img, err := qcow2.Open(r, size)
	if err != nil {
		return err
	}
	if devSize >= 0 && int64(img.Header.Size) > devSize {
		if tooLarge != nil {
			return tooLarge(int64(img.Header.Size), devSize)
		}
		return errInvalidImage(fmt.Sprintf("image %s has a virtual size of %d bytes, larger than the device (%d bytes)", id, img.Header.Size, devSize), nil)
	}
	return img.Convert(ctx, w)
}

// checkFormat applies IPA's get_and_validate_image_format rules to the
// format found by content.
func checkFormat(info *ImageInfo, detected string, opts *WriteOptions) error {
	declared := info.DiskFormat
	if opts.DisableDeepInspection {
		return nil
	}
	if declared == FormatRaw || declared == FormatGPT {
		// IPA trusts raw-declared images and writes them byte for byte.
		// A qcow2 header in a "raw" image is a mistake or an attack; its
		// bytes would not boot either way, so say so instead.
		if detected == FormatQcow2 {
			return errInvalidImage(fmt.Sprintf("Security: Expected format was %s, but image was actually %s", declared, detected), nil)
		}
		return nil
	}
	permitted := opts.PermittedFormats
	if permitted == nil {
		permitted = DefaultPermittedFormats
	}
	if !slices.Contains(permitted, detected) {
		return errInvalidImage(fmt.Sprintf("Security: Detected image format was %s, but only %s are allowed", detected, strings.Join(permitted, ", ")), nil)
	}
	if declared != "" && declared != detected && declared != "unknown" {
		return errInvalidImage(fmt.Sprintf("Security: Expected format was %s, but image was actually %s", declared, detected), nil)
	}
	return nil
}

// newDecoder returns a streaming decoder for c. Memory is bounded: zstd
// windows above 128 MiB and xz dictionaries above 64 MiB are refused.
func newDecoder(c Compression, r io.Reader) (io.Reader, func(), error) {
	switch c {
	case CompressionGzip:
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return z, func() { z.Close() }, nil
	case CompressionZstd:
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(2), zstd.WithDecoderMaxWindow(128<<20), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, nil, err
		}
		return z, z.Close, nil
	case CompressionXz:
		z, err := newXZReader(r, xzMaxDict)
		if err != nil {
			return nil, nil, err
		}
		return z, func() {}, nil
	case CompressionBzip2:
		return bzip2.NewReader(r), func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown compression %q", c)
}

// startProgress reports progress every interval until stopped.
func startProgress(ctx context.Context, opts *WriteOptions, received *atomic.Int64, total int64, w *diskWriter, start time.Time) func(done bool) {
	if opts.Progress == nil {
		return func(bool) {}
	}
	interval := opts.ProgressInterval
	if interval <= 0 {
		interval = time.Second
	}
	snap := func(done bool) WriteProgress {
		return WriteProgress{Received: received.Load(), Total: total, Written: w.written.Load(), Elapsed: time.Since(start), Done: done}
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				opts.Progress(snap(false))
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	stopped := false
	return func(done bool) {
		if stopped {
			return
		}
		stopped = true
		close(stop)
		<-finished
		if done {
			opts.Progress(snap(true))
		}
	}
}
