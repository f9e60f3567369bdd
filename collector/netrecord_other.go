//go:build !linux

package collector

import (
	"context"
	"errors"
)

// liveNetRecord needs netlink, which only Linux has; fixture roots work
// everywhere.
func liveNetRecord(ctx context.Context, names []string) (*netRecord, error) {
	return nil, errors.New("netlink: only on Linux")
}
