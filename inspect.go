package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/driver"
)

// Info describes a lock as its backend sees it: see driver.Info.
type Info = driver.Info

// Inspect describes the lock named key without taking it: who holds it,
// its fencing token, the time left and how many wait, as far as the backend
// can tell. Drivers without inspection return an error wrapping
// errors.ErrUnsupported.
func (c *Client) Inspect(ctx context.Context, key string) (Info, error) {
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	if c.isClosed() {
		return Info{}, ErrClosed
	}
	if err := checkKey(key); err != nil {
		return Info{}, err
	}
	in := c.caps.Inspector
	if in == nil {
		return Info{}, fmt.Errorf("dlock: inspect: %w by this driver", errors.ErrUnsupported)
	}
	info, err := in.Inspect(ctx, key)
	return info, wrapErr(ctx, "inspect", key, err)
}
