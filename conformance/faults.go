package conformance

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// The faults the cases inject through the middleware (middleware.go).

// faultFunc adapts a function to a fault.
type faultFunc func(ctx context.Context, o op, do func(context.Context) (reply, error)) (reply, error)

func (f faultFunc) call(ctx context.Context, o op, do func(context.Context) (reply, error)) (reply, error) {
	return f(ctx, o, do)
}

// slowReplies delays the reply of every call that may grant a lock by delay
// after the backend granted it, as a slow network would.
func slowReplies(delay time.Duration) func(driver.Driver) driver.Driver {
	return withFault(faultFunc(func(ctx context.Context, o op, do func(context.Context) (reply, error)) (reply, error) {
		r, err := do(ctx)
		if o.grants() {
			time.Sleep(delay) // the reply is on its way
		}
		return r, err
	}))
}

// blockedRenewals makes every Extend (and ExtendBatch) hang until its context
// ends, as when the holder's link to the backend is cut while the lock stays
// on the backend.
func blockedRenewals(d driver.Driver) driver.Driver {
	return withFault(faultFunc(func(ctx context.Context, o op, do func(context.Context) (reply, error)) (reply, error) {
		if o == opExtend || o == opExtendBatch {
			<-ctx.Done()
			return reply{}, ctx.Err()
		}
		return do(ctx)
	}))(d)
}

// lateDelivery delivers requests to the backend after a random delay of up
// to lag, as a congested network does; a caller whose context ends before
// its request has arrived is told so at once (ctx.Err()), and the request
// still arrives, with no caller left to take its reply: a lock granted that
// way is an orphan that only its TTL frees. Subscriptions are not delayed.
type lateDelivery struct {
	lag time.Duration
	// exact makes every request take exactly lag.
	exact   bool
	orphans sync.WaitGroup // deliveries whose caller has gone
	mu      sync.Mutex
	late    int // requests applied after their caller gave up
}

func (f *lateDelivery) call(ctx context.Context, o op, do func(context.Context) (reply, error)) (reply, error) {
	if o == opSubscribe {
		return do(ctx)
	}
	travel := f.lag
	if !f.exact {
		travel = time.Duration(rand.Int64N(int64(f.lag) + 1))
	}
	timer := time.NewTimer(travel)
	select {
	case <-timer.C:
		return do(ctx)
	case <-ctx.Done():
		timer.Stop()
	}
	f.mu.Lock()
	f.late++
	f.mu.Unlock()
	f.orphans.Go(func() {
		time.Sleep(travel) // still on its way; it lands after the caller left
		// The backend serves it as any request; a blocked Acquire waits
		// there, but not for ever.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.lag+time.Second)
		defer cancel()
		_, _ = do(ctx) // the reply finds nobody: an orphan's lease is dropped
	})
	return reply{}, ctx.Err()
}

// wait returns once every late request has been applied.
func (f *lateDelivery) wait() { f.orphans.Wait() }

func (f *lateDelivery) applied() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.late
}
