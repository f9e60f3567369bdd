// Package inspect builds the inspection data IPA posts to ironic-inspector
// (/v1/continue) or Ironic (/v1/continue_inspection), and posts it with
// retries until it is accepted.
package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/collector"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/inventory/hints"
)

// Manager names one hardware manager in "configuration.managers".
type Manager struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Options are the inputs of one inspection.
type Options struct {
	// URL is the callback URL (ipa-inspection-callback-url).
	URL        string
	HTTP       *http.Client
	Collectors []string
	Inventory  *inventory.Inventory
	// RootDiskCandidates are the disks root_disk is chosen among; nil means
	// the inventory's (a confined agent passes its allowed devices).
	RootDiskCandidates []inventory.Disk
	// BootIF is the raw BOOTIF kernel parameter.
	BootIF string
	// Root is the directory the machine is read below ("" means "/") by
	// the pci-devices and numa-topology collectors (package collector).
	Root     string
	Managers []Manager
	// Logs returns base64 of the log tarball (the "logs" collector).
	Logs func(ctx context.Context) (string, error)
	// Benchmarks is ipa-inspection-benchmarks, which asks IPA's
	// extra-hardware collector to run hardware-detect's benchmarks.
	Benchmarks string
	// LLDPRaw returns {ifname: [[type, "hex"], ...]} for the "lldp"
	// collector; nil means this build cannot capture LLDP.
	LLDPRaw func(ctx context.Context) (map[string][]inventory.LLDPTLV, error)
	Log     *slog.Logger
	Backoff ironic.Backoff
	// Timeout bounds the retries of the POST (0: 5 minutes).
	Timeout   time.Duration
	RequestID string
}

// Collect runs the collectors and returns the inspection document. Collector
// failures are accumulated into "error" (null when none), so the data that
// could be gathered is still sent, as IPA does. An unknown name fails alone
// (IPA fails to load the whole set and sends nothing but the error).
func Collect(ctx context.Context, o Options) map[string]any {
	data := map[string]any{}
	var failures []string
	known := collectors()
	for _, name := range o.Collectors {
		run, ok := known[name]
		if !ok {
			failures = append(failures, fmt.Sprintf("collector %s: not supported by this agent", name))
			continue
		}
		failures = append(failures, run(ctx, o, data)...)
	}
	if len(failures) > 0 {
		data["error"] = "The following errors were encountered:\n* " + strings.Join(failures, "\n* ")
	} else {
		data["error"] = nil
	}
	return data
}

// collectorOptions points the collector's inspection readers at the
// machine being inspected.
func (o Options) collectorOptions() collector.Options {
	return collector.Options{Root: o.Root, Logger: o.Log}
}

func (o Options) log() *slog.Logger {
	return logging.OrDiscard(o.Log)
}

func (o Options) managers() []Manager {
	if o.Managers == nil {
		return []Manager{}
	}
	return o.Managers
}

// RootDisk is the disk IPA picks without hints (hints.ChooseRootDisk:
// the smallest of at least 4 GiB, ties broken by name) among disks; nil
// when none qualifies.
func RootDisk(disks []inventory.Disk) *inventory.Disk {
	d, err := hints.ChooseRootDisk(hints.Disks(disks), nil)
	if err != nil {
		return nil
	}
	return &d.Disk
}

// Run collects and posts the data, retrying connection errors, 5xx and 409
// with backoff until accepted or Timeout. It returns the node UUID from the
// reply ("" if none). A final refusal (node not found is a 400 at
// ironic-inspector) is returned as an error; the agent logs it and goes on
// with lookup.
func Run(ctx context.Context, o Options) (string, error) {
	data := Collect(ctx, o)
	body, err := json.Marshal(data)
	if err != nil {
		return "", fmt.Errorf("encoding inspection data: %w", err)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	deadline := o.Backoff.NowOrReal().Add(timeout)
	for n := 1; ; n++ {
		uuid, retry, err := post(ctx, o, body)
		if err == nil {
			o.log().Info("inspection data accepted", "url", o.URL, "node", uuid)
			if e, ok := data["error"].(string); ok {
				return uuid, errors.New(e)
			}
			return uuid, nil
		}
		if !retry || ctx.Err() != nil {
			return "", err
		}
		wait := RetryWait(o.Backoff, n)
		if !o.Backoff.NowOrReal().Add(wait).Before(deadline) {
			return "", fmt.Errorf("inspection gave up after %d attempts in %s: %w", n, timeout, err)
		}
		o.log().Warn("posting inspection data failed; retrying", "attempt", n, "error", err, "retry_in", wait.Round(time.Millisecond))
		if err := o.Backoff.SleepOrReal(ctx, wait); err != nil {
			return "", err
		}
	}
}

// RetryWait is the wait before attempt n+1: clamp(1.5 x 2^(n-1), 5, 30) s
// (IPA master's call_inspector), with +-20% jitter so a rack of machines
// booted together does not retry in lockstep.
func RetryWait(b ironic.Backoff, n int) time.Duration {
	base := 1.5 * math.Pow(2, float64(min(n, 10)-1))
	base = math.Min(math.Max(base, 5), 30)
	return time.Duration(base * (0.8 + 0.4*b.Float()) * float64(time.Second))
}

func post(ctx context.Context, o Options, body []byte) (string, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL, bytes.NewReader(body))
	if err != nil {
		return "", false, fmt.Errorf("inspection callback URL %q: %w", o.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if o.RequestID != "" {
		req.Header.Set("X-OpenStack-Request-ID", o.RequestID)
	}
	resp, err := o.HTTP.Do(req)
	if err != nil {
		return "", true, fmt.Errorf("POST %s: %w", o.URL, err)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		var doc struct {
			UUID string `json:"uuid"`
		}
		_ = json.Unmarshal(reply, &doc)
		return doc.UUID, false, nil
	}
	err = fmt.Errorf("POST %s: HTTP %d: %s", o.URL, resp.StatusCode, errorText(reply))
	return "", resp.StatusCode >= 500 || resp.StatusCode == http.StatusConflict, err
}

// errorText extracts ironic-inspector's {"error": {"message": ...}} or
// Ironic's envelope.
func errorText(b []byte) string {
	var doc struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &doc) == nil && doc.Error.Message != "" {
		return doc.Error.Message
	}
	return ironic.ErrorText(b)
}
