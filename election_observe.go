package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Observing an election: no backend call waits for "the next holder of this
// lock", so an observer looks at the holder (Leader) whenever a release may
// have happened (the driver's notification, a release in this Client) and
// at the polling backoff's intervals regardless, starting quick again after
// each change, when the next leader is likely to come soon.

func (e *election) Observe(ctx context.Context) (<-chan Leadership, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !e.c.caps.Values {
		return nil, fmt.Errorf("dlock: election observe: %w by this driver (it stores no value with a lock)", errors.ErrUnsupported)
	}
	// Close waits for the observer, so that its subscription is closed
	// before the driver is.
	if !e.c.beginOp() {
		return nil, ErrClosed
	}
	out := make(chan Leadership)
	go func() {
		defer e.c.ops.Done()
		defer close(out)
		e.observe(ctx, out)
	}()
	return out, nil
}

// observe sends every change of leader it finds to out, until ctx ends or
// the Client closes.
func (e *election) observe(ctx context.Context, out chan<- Leadership) {
	wake := make(chan struct{}, 1)
	unwatch := e.c.watchReleases([]string{e.key}, wake)
	defer unwatch()
	if e.c.caps.Notifier != nil {
		// Subscribed before the first look, so that no release after it
		// goes unnoticed; without a subscription, polling alone finds it.
		subs := e.c.subscribeReleases(ctx, []string{e.key}, wake)
		defer subs.close()
	}
	backoff := newBackoff(e.cfg.pollMin, e.cfg.pollMax)
	var highest uint64 // the greatest term reported
	vacant := false    // the latest report was of no leader
	first := true
	for {
		now, err := e.Leader(ctx)
		switch {
		case err == nil, errors.Is(err, ErrNoLeader):
			// A term not above the greatest reported is an older view (a
			// read that raced with a newer one), or no change.
			changed := now.Term > highest || (now.Term == 0 && (first || !vacant))
			if changed {
				select {
				case out <- now:
				case <-ctx.Done():
					return
				case <-e.c.closing.Done():
					return
				}
				first, vacant, highest = false, now.Term == 0, max(highest, now.Term)
				backoff.reset()
			}
		case ctx.Err() != nil:
			return
		}
		timer := time.NewTimer(backoff.next(0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-e.c.closing.Done():
			timer.Stop()
			return
		case <-wake:
			backoff.reset()
		case <-timer.C:
		}
		timer.Stop()
	}
}
