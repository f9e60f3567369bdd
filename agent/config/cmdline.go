package config

import "strings"

// ParseCmdline parses a kernel command line the way Ironic Python Agent does
// (utils.get_agent_params): split on whitespace, ignore tokens without '=',
// split each token at the first '=', later duplicates win. There is no
// quote handling: IPA has none, and Ironic never quotes its ipa-* values.
func ParseCmdline(s string) map[string]string {
	params := map[string]string{}
	for _, tok := range strings.Fields(s) {
		k, v, ok := strings.Cut(tok, "=")
		if !ok {
			continue
		}
		params[k] = v
	}
	return params
}
