package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/mdns"
)

// MDNSLookup finds a service by mDNS: mdns.Lookup, or a stand-in in tests.
type MDNSLookup func(ctx context.Context, service string, opts mdns.Options) (mdns.Endpoint, error)

// ResolveMDNS does what IPA does before it starts when the configuration
// leaves Ironic's address to mDNS:
//   - api_url "mdns" (explicit): the "baremetal" service's endpoint
//     becomes api_url; no answer is an error.
//   - no api_url and use_mdns (implicit): the same, but no answer only
//     runs the agent without lookup and heartbeats (inspection may still
//     post), logged.
//   - inspection_callback_url "mdns": the "baremetal-introspection"
//     service's endpoint plus /v1/continue; no answer is an error.
//
// An answer's ipa_* parameters set the options named without the prefix,
// when [mdns]allowed_overrides lists them; the others are logged and
// skipped, as IPA's config.override does.
func ResolveMDNS(ctx context.Context, cfg *config.Config, log *slog.Logger, lookup MDNSLookup) error {
	log = logging.OrDiscard(log)
	if lookup == nil {
		lookup = mdns.Lookup
	}
	opts := mdns.Options{Interfaces: cfg.MDNSInterfaces, Attempts: cfg.MDNSLookupAttempts, Log: log}
	explicit := len(cfg.APIURLs) == 1 && cfg.APIURLs[0] == "mdns"
	if !cfg.Standalone && (explicit || (len(cfg.APIURLs) == 0 && cfg.UseMDNS)) {
		log.Warn("looking Ironic's API up by mDNS: the answer is not authenticated, so the network must be trusted", "service", "baremetal")
		ep, err := lookup(ctx, "baremetal", opts)
		switch {
		case err == nil:
			cfg.APIURLs = []string{ep.URL}
			cfg.Origins["api_url"] = "mDNS answer for baremetal." + mdns.Domain + " (server " + ep.Server + ")"
			log.Info("Ironic's API found by mDNS", "api_url", ep.URL, "server", ep.Server)
			applyMDNSParams(cfg, ep, "baremetal", log)
		case explicit:
			return fmt.Errorf("api_url=mdns (from %s): %w", cfg.Origins["api_url"], err)
		default:
			log.Warn("no Ironic API found by mDNS (use_mdns without api_url): the agent runs without lookup and heartbeats", "error", err)
			cfg.Standalone = true
			cfg.Origins["standalone"] = "implied: use_mdns found no Ironic API"
		}
	}
	if cfg.InspectionCallbackURL == "mdns" {
		ep, err := lookup(ctx, "baremetal-introspection", opts)
		if err != nil {
			return fmt.Errorf("inspection_callback_url=mdns (from %s): %w", cfg.Origins["inspection_callback_url"], err)
		}
		cfg.InspectionCallbackURL = strings.TrimRight(ep.URL, "/") + "/v1/continue"
		cfg.Origins["inspection_callback_url"] = "mDNS answer for baremetal-introspection." + mdns.Domain + " (server " + ep.Server + ")"
		log.Info("the inspection callback found by mDNS", "inspection_callback_url", cfg.InspectionCallbackURL)
		applyMDNSParams(cfg, ep, "baremetal-introspection", log)
	}
	return nil
}

// applyMDNSParams is IPA's config.override.
func applyMDNSParams(cfg *config.Config, ep mdns.Endpoint, service string, log *slog.Logger) {
	keys := make([]string, 0, len(ep.Params))
	for k := range ep.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, "ipa_")
		if !ok {
			log.Warn("mDNS: skipping a parameter that is no agent option (no ipa_ prefix)", "service", service, "parameter", k)
			continue
		}
		if !slices.Contains(cfg.MDNSAllowedOverrides, name) {
			log.Warn("mDNS: skipping a parameter [mdns]allowed_overrides does not list", "service", service, "parameter", k, "option", name)
			continue
		}
		src := "mDNS answer for " + service + "." + mdns.Domain + " (TXT " + k + ")"
		if err := cfg.Override(name, ep.Params[k], src); err != nil {
			log.Warn("mDNS: a parameter could not be applied", "service", service, "parameter", k, "error", err)
			continue
		}
		log.Info("option set by mDNS", "option", name, "value", ep.Params[k])
	}
}
