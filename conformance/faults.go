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
	sent := time.Now()
	timer := time.NewTimer(travel)
	select {
	case <-timer.C:
		// On a loaded machine this goroutine may run only after both the
		// request's arrival and the caller's deadline: a caller that gave
		// up first must not be served (select picks at random among ready
		// cases).
		if ctx.Err() == nil {
			return do(ctx)
		}
	case <-ctx.Done():
		timer.Stop()
	}
	f.mu.Lock()
	f.late++
	f.mu.Unlock()
	f.orphans.Go(func() {
		time.Sleep(time.Until(sent.Add(travel))) // still on its way; it lands after the caller left
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

// freezer stalls every driver call of a client, on its way to the backend
// and on its way back, and every wake-up of its subscriptions, while it is
// frozen, as a process stopped by a long GC pause, a VM pause or SIGSTOP
// would: a stalled call does not see its context end. The backend client's
// own goroutines (heartbeats, sessions) are not stopped, and the core's
// timers run on: only what goes through the driver waits.
type freezer struct {
	mu      sync.Mutex
	gate    chan struct{} // closed on thaw; nil while not frozen
	reached int           // calls that reached the backend
}

// reachedBackend returns how many calls have reached the backend.
func (f *freezer) reachedBackend() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reached
}

// freeze stalls the client until thaw, or until the case ends.
func (f *freezer) freeze(t *T) {
	f.mu.Lock()
	f.gate = make(chan struct{})
	f.mu.Unlock()
	t.Cleanup(f.thaw) // before the clients close, which waits for their calls
}

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
}

// pass waits while the client is frozen.
func (f *freezer) pass() {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

func (f *freezer) call(ctx context.Context, _ op, do func(context.Context) (reply, error)) (reply, error) {
	f.pass()
	f.mu.Lock()
	f.reached++
	f.mu.Unlock()
	r, err := do(ctx)
	f.pass()
	return r, err
}

func (f *freezer) subscription(s driver.Subscription) driver.Subscription {
	return relay(s, func(forward func(), _ func(func())) {
		f.pass()
		forward()
	})
}

// noisyWakeups holds back every wake-up of a subscription by a random delay
// of up to lag, delivers some twice, and so reorders them against the lock's
// state: a wake-up may come after the lock was taken again, and long after
// the release it tells of.
type noisyWakeups struct{ lag time.Duration }

func (f noisyWakeups) call(ctx context.Context, _ op, do func(context.Context) (reply, error)) (reply, error) {
	return do(ctx)
}

func (f noisyWakeups) subscription(s driver.Subscription) driver.Subscription {
	return relay(s, func(forward func(), spawn func(func())) {
		// Each wake-up travels on its own: later ones may overtake it.
		spawn(func() {
			time.Sleep(time.Duration(rand.Int64N(int64(f.lag) + 1)))
			forward()
			if rand.N(2) == 0 {
				time.Sleep(time.Duration(rand.Int64N(int64(f.lag) + 1)))
				forward() // duplicated
			}
		})
	})
}

// relay is a subscription whose wake-ups pass through deliver, which calls
// forward (any number of times, until Close returns) to hand one on to the
// core, and may spawn goroutines that Close waits for.
func relay(inner driver.Subscription, deliver func(forward func(), spawn func(func()))) driver.Subscription {
	r := &relayed{inner: inner, c: make(chan struct{}, 1), closed: make(chan struct{})}
	forward := func() {
		select {
		case r.c <- struct{}{}:
		default: // coalesced, as the contract says
		}
	}
	r.wg.Go(func() {
		for {
			select {
			case <-inner.C():
				deliver(forward, r.wg.Go)
			case <-r.closed:
				return
			}
		}
	})
	return r
}

type relayed struct {
	inner  driver.Subscription
	c      chan struct{}
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

func (r *relayed) C() <-chan struct{} { return r.c }

func (r *relayed) Close() error {
	r.once.Do(func() { close(r.closed) })
	err := r.inner.Close()
	r.wg.Wait()
	return err
}

// cancelOnGrant cancels the caller's context as each grant arrives: the
// driver call succeeded, and the caller has given up meanwhile.
type cancelOnGrant struct {
	mu     sync.Mutex
	cancel context.CancelFunc // of the next caller; nil when none
	calls  int                // that reached the driver
}

// reachedDriver returns how many calls have reached the driver.
func (f *cancelOnGrant) reachedDriver() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// arm makes the next grant cancel cancel.
func (f *cancelOnGrant) arm(cancel context.CancelFunc) {
	f.mu.Lock()
	f.cancel = cancel
	f.mu.Unlock()
}

func (f *cancelOnGrant) call(ctx context.Context, o op, do func(context.Context) (reply, error)) (reply, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	r, err := do(ctx)
	if err == nil && o.grants() {
		f.mu.Lock()
		cancel := f.cancel
		f.cancel = nil
		f.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
	return r, err
}
