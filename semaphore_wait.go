package dlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Waiting for a permit, as the holder of a semaphore's gate: no backend
// call waits for "any of these locks", so the gate holder tries them all
// whenever one may have been released, and at the polling backoff's
// intervals regardless.

// waitForPermit takes the first permit that is free or becomes free, while
// gate is held. It returns exactly ctx.Err() when ctx ends, ErrClosed when
// the Client closes, and errGateLost when the gate was lost meanwhile.
func (s *semaphore) waitForPermit(ctx context.Context, gate Lease) (Lease, error) {
	backoff := newBackoff(s.cfg.pollMin, s.cfg.pollMax)
	wake := make(chan struct{}, 1)
	unwatch := s.c.watchReleases(s.keys, wake)
	defer unwatch()
	var subs *releaseSubs
	defer func() { subs.close() }()
	failures := 0 // failed tries in a row
	for {
		l, soonest, err := s.tryAll(ctx)
		switch {
		case err == nil:
			return l, nil
		case errors.Is(err, errExpiredOnArrival):
			continue // given back already: try again
		case errors.Is(err, ErrLocked):
			failures = 0
			if subs == nil && s.c.caps.Notifier != nil {
				// Subscribe, then try again at once: a release between
				// the tries and the subscription would go unnoticed.
				subs = s.c.subscribeReleases(ctx, s.keys, wake)
				continue
			}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !s.cfg.failFast && transient(ctx, err):
			failures++
			s.c.tel.waitedThrough(ctx, s.key, driver.Exclusive, failures, err)
		default:
			return nil, err
		}
		timer := time.NewTimer(backoff.next(soonest))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-s.c.closing.Done():
			timer.Stop()
			return nil, ErrClosed
		case <-gate.Done():
			timer.Stop()
			if errors.Is(gate.Err(), ErrClosed) {
				return nil, ErrClosed
			}
			return nil, errGateLost
		case <-wake:
			backoff.reset()
		case <-timer.C:
		}
		timer.Stop()
	}
}

// releaseSubs are the driver's subscriptions to the releases of a
// semaphore's permits, each forwarded to one wake-up channel.
type releaseSubs struct {
	subs []driver.Subscription
	stop chan struct{}
	wg   sync.WaitGroup
}

// subscribeReleases subscribes to the releases of every lock among keys
// through the driver's Notifier, forwarding their wake-ups to wake. A key
// whose subscription fails is polled: the failure is logged, and the wait
// goes on.
func (c *Client) subscribeReleases(ctx context.Context, keys []string, wake chan<- struct{}) *releaseSubs {
	r := &releaseSubs{stop: make(chan struct{})}
	for _, key := range keys {
		sub, err := c.caps.Notifier.Subscribe(ctx, key)
		if err != nil {
			if ctx.Err() == nil {
				c.tel.subscribeFailed(ctx, key, false, err)
			}
			continue
		}
		r.subs = append(r.subs, sub)
		r.wg.Go(func() {
			for {
				select {
				case <-sub.C():
					notify(wake)
				case <-r.stop:
					return
				}
			}
		})
	}
	return r
}

// close ends the subscriptions and their forwarding goroutines; nil is
// closed already.
func (r *releaseSubs) close() {
	if r == nil {
		return
	}
	close(r.stop)
	r.wg.Wait()
	for _, sub := range r.subs {
		_ = sub.Close()
	}
}

// notify sends a coalesced wake-up.
func notify(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// watchReleases makes every release by this Client of a lock among keys
// wake wake (see kick), until the returned func is called: a permit given
// back in this process reaches its gate holder at once, without the
// backend's notification or the next poll.
func (c *Client) watchReleases(keys []string, wake chan<- struct{}) (unwatch func()) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.watchers == nil {
		c.watchers = map[string][]chan<- struct{}{}
	}
	for _, k := range keys {
		c.watchers[k] = append(c.watchers[k], wake)
	}
	return func() {
		c.qmu.Lock()
		defer c.qmu.Unlock()
		for _, k := range keys {
			ws := slices.DeleteFunc(c.watchers[k], func(w chan<- struct{}) bool { return w == wake })
			if len(ws) == 0 {
				delete(c.watchers, k)
			} else {
				c.watchers[k] = ws
			}
		}
	}
}
