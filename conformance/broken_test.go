package conformance

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// Deliberately broken drivers: the memory driver with exactly one operation
// replaced by a known-broken algorithm from ../shared/reference/README.md
// ("Broken patterns the suite must catch"). Each models, over the in-process
// backend, what the broken algorithm does to a real key-value server.
//
// Every one of them is built on plainDriver, which declares none of the
// memory driver's capabilities (zero Capabilities) and whose leases report
// nothing, so that the core waits by polling and learns of losses by
// renewal, as it would over a plain key-value server. The unbroken
// plainDriver passes every case the broken ones are expected to fail.

// plainDriver is the memory driver with zero Capabilities, its leases
// reporting no loss.
type plainDriver struct {
	driver.Driver
	b *memory.Backend
	// Per-operation replacements; nil means the memory driver's own.
	acquire func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error)
	lease   func(l *plainLease) driver.Lease
}

// Capabilities declares none: plain exclusive locks, waited for by polling.
func (d *plainDriver) Capabilities() driver.Capabilities { return driver.Capabilities{} }

// Acquire tries once (the core sends no Request.Block: plainDriver is not
// Blocking).
func (d *plainDriver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	var l driver.Lease
	var err error
	if d.acquire != nil {
		l, err = d.acquire(ctx, d, req)
	} else {
		l, err = d.Driver.Acquire(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	pl := &plainLease{Lease: l, d: d, req: req}
	if d.lease != nil {
		return d.lease(pl), nil
	}
	return pl, nil
}

// leasesAs returns the maker of a plainDriver whose leases are what wrap
// makes of them: for the broken drivers that replace one lease operation
// and nothing else.
func leasesAs(wrap func(l *plainLease) driver.Lease) func(*memory.Backend, *plainDriver, int64) driver.Driver {
	return func(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
		d.lease = wrap
		return d
	}
}

type plainLease struct {
	driver.Lease
	d   *plainDriver
	req driver.Request
}

// OnLoss reports nothing, as over a plain key-value server.
func (*plainLease) OnLoss(func(error)) {}

// Uncertain is never: the core learns of trouble by renewal.
func (*plainLease) Uncertain() error { return nil }

// sharedDriver adds read-write locks to a plainDriver.
type sharedDriver struct{ *plainDriver }

func (sharedDriver) Capabilities() driver.Capabilities { return driver.Capabilities{Shared: true} }

// brokenHarness makes clients over one fresh backend, each built by make.
func brokenHarness(make func(b *memory.Backend, d *plainDriver, n int64) driver.Driver) Harness {
	b := memory.NewBackend()
	var clients atomic.Int64
	return Harness{
		// 1 s, as for the drivers' own runs: at 250 ms a scheduler stall of
		// under 200 ms on a loaded machine failed the unbroken control.
		TTL: time.Second,
		NewDriver: func(context.Context) (driver.Driver, error) {
			d := &plainDriver{Driver: memory.New(b), b: b}
			return make(b, d, clients.Add(1)), nil
		},
	}
}

func unbroken(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver { return d }

// Pattern 1: SETNX, then EXPIRE as a second command. A crash between them
// leaves a lock that never expires: modelled as the expiry never arriving.
func acquireWithoutExpiry(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.acquire = func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
		forever := req
		forever.TTL = 24 * time.Hour // SETNX without EXPIRE
		return d.Driver.Acquire(ctx, forever)
	}
	d.lease = func(l *plainLease) driver.Lease { return &ttlReporting{l} }
	return d
}

// ttlReporting reports the TTL the client meant to set, not the one it did.
type ttlReporting struct{ *plainLease }

func (l *ttlReporting) Validity() time.Duration { return l.req.TTL }

// Pattern 2: the expiry stored as the client's timestamp, and an expired lock
// recovered with GET then GETSET. It trusts every client's clock: here the
// clients' clocks disagree by up to a TTL, as unsynchronised clocks do.
func clientClockRecovery(b *memory.Backend, d *plainDriver, n int64) driver.Driver {
	d.acquire = func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
		l, err := d.Driver.Acquire(ctx, req)
		if err == nil {
			return l, nil
		}
		skew := time.Duration(n%3) * req.TTL / 2
		if info, held := b.Inspect(req.Key); held && info.Expires.Before(time.Now().Add(skew)) {
			b.Tamper(req.Key, false) // GETSET over what this clock calls expired
			return d.Driver.Acquire(ctx, req)
		}
		return nil, err
	}
	return d
}

// Pattern 3: DEL without an owner check.
var deleteWithoutOwnerCheck = leasesAs(func(l *plainLease) driver.Lease { return &blindDelete{l} })

type blindDelete struct{ *plainLease }

func (l *blindDelete) Release(context.Context) error {
	l.d.b.Tamper(l.req.Key, false) // DEL key
	return nil
}

// Pattern 4: GET to check the owner, then DEL as a second command. The DEL
// arrives a round trip later; a slow network makes that round trip long.
var checkThenDelete = leasesAs(func(l *plainLease) driver.Lease { return &checkThenDel{l} })

type checkThenDel struct{ *plainLease }

const slowRoundTrip = 30 * time.Millisecond

func (l *checkThenDel) Release(context.Context) error {
	info, held := l.d.b.Inspect(l.req.Key) // GET key
	if !held || info.Token != l.Token() {
		return driver.ErrNotHeld
	}
	time.Sleep(slowRoundTrip)      // the DEL's round trip
	l.d.b.Tamper(l.req.Key, false) // DEL key
	return nil
}

// Pattern 5: renewal that extends the key without checking its owner
// (PEXPIRE key ttl): it succeeds on whoever holds the key.
var renewWithoutOwnerCheck = leasesAs(func(l *plainLease) driver.Lease { return &blindRenew{l} })

type blindRenew struct{ *plainLease }

func (l *blindRenew) Extend(ctx context.Context, ttl time.Duration) error {
	if l.Lease.Extend(ctx, ttl) == nil {
		return nil
	}
	if _, held := l.d.b.Inspect(l.req.Key); held {
		return nil // PEXPIRE on someone else's key succeeds
	}
	return driver.ErrNotHeld
}

// Reused fencing tokens: a counter kept per client (or reset on release), so
// that grants on different clients repeat each other's numbers.
func reusedFencingTokens(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	var counter atomic.Uint64
	d.lease = func(l *plainLease) driver.Lease { return &localToken{l, counter.Add(1)} }
	return d
}

type localToken struct {
	*plainLease
	token uint64
}

func (l *localToken) Token() uint64 { return l.token }

// Pattern 8: the read-write lock of 004 with one `read` field. Every reader
// writes the same field, so the first reader to leave clears it for all.
func singleReadField(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.lease = func(l *plainLease) driver.Lease {
		if l.req.Mode == driver.Shared {
			return &oneReadField{l}
		}
		return l
	}
	return sharedDriver{d}
}

type oneReadField struct{ *plainLease }

func (l *oneReadField) Release(context.Context) error {
	l.d.b.Tamper(l.req.Key, false) // HDEL lock read
	return nil
}

// unbrokenShared is the control for singleReadField.
func unbrokenShared(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return sharedDriver{d}
}

// Pattern 9: RedLock that reports the full TTL as validity, not TTL minus the
// time the other masters took. The first master's key was set at the call's
// start; the others took their round trips after it.
func validityFromReply(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.acquire = firstMasterAcquire
	return d
}

// firstMasterAcquire is the Acquire of pattern 9: a grant on the first
// master, then four more round trips, and the TTL counted from the end.
func firstMasterAcquire(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
	started := time.Now()
	l, err := d.Driver.Acquire(ctx, req) // the first master
	if err != nil {
		return nil, err
	}
	time.Sleep(4 * 5 * time.Millisecond) // four more masters, one by one
	return &replyValidity{Lease: l, elapsed: time.Since(started)}, nil
}

type replyValidity struct {
	driver.Lease
	elapsed time.Duration
}

func (l *replyValidity) Validity() time.Duration { return l.Lease.Validity() + l.elapsed }

// transferringDriver adds a Transferer to a plainDriver: the memory
// driver's own (made WithoutBlocking, which has one), or a broken
// replacement.
type transferringDriver struct {
	*plainDriver
	transfer func(ctx context.Context, d *plainDriver, from *plainLease, to driver.Request) (driver.Lease, error)
}

func (d transferringDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{Transferer: d}
}

func (d transferringDriver) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	pl, ok := from.(*plainLease)
	if !ok {
		return nil, errors.New("broken driver: foreign lease")
	}
	if d.transfer != nil {
		return d.transfer(ctx, d.plainDriver, pl, to)
	}
	l, err := d.Driver.Capabilities().Transferer.Transfer(ctx, pl.Lease, to)
	if err != nil {
		return nil, err
	}
	return &plainLease{Lease: l, d: d.plainDriver, req: to}, nil
}

func unbrokenTransfer(b *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.Driver = memory.New(b, memory.WithoutBlocking())
	return transferringDriver{plainDriver: d}
}

// A handoff as a release followed by a grant, without checking that the
// releasing lease still held the lock: a former holder hands over a lock
// that is someone else's (pattern 3, DEL without owner check, in a
// handoff).
func transferWithoutOwnerCheck(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return transferringDriver{plainDriver: d, transfer: func(ctx context.Context, d *plainDriver, from *plainLease, to driver.Request) (driver.Lease, error) {
		d.b.Tamper(from.req.Key, false) // the lock goes, whoever holds it
		return d.Acquire(ctx, to)
	}}
}

// A handoff that moves the lock but keeps the holder's fencing token, as an
// in-process handoff that never asks the backend would: the new holder's
// writes are indistinguishable from the old one's.
func transferKeepingToken(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return transferringDriver{plainDriver: d, transfer: func(ctx context.Context, d *plainDriver, from *plainLease, to driver.Request) (driver.Lease, error) {
		if err := from.Release(ctx); err != nil {
			return nil, err
		}
		l, err := d.Acquire(ctx, to)
		if err != nil {
			return nil, err
		}
		return &localToken{l.(*plainLease), from.Token()}, nil
	}}
}

// A lease that reports its own release as a loss: OnLoss made from a
// per-lease context that the driver ends on release, watched without being
// stopped on release. The core has let the lease go by then; a driver that
// keeps telling it holds on to every released lease's callback.
var lossAfterRelease = leasesAs(func(l *plainLease) driver.Lease { return &notifyingLease{plainLease: l, reportRelease: true} })

// unbrokenLossReports is the control for lossAfterRelease.
var unbrokenLossReports = leasesAs(func(l *plainLease) driver.Lease { return &notifyingLease{plainLease: l} })

// notifyingLease adds loss reports (OnLoss) to a plainLease. It has no loss
// of its own to report; broken, it reports its release.
type notifyingLease struct {
	*plainLease
	reportRelease bool

	mu     sync.Mutex
	onLoss func(error)
}

func (l *notifyingLease) OnLoss(f func(reason error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onLoss = f
}

func (l *notifyingLease) Release(ctx context.Context) error {
	err := l.plainLease.Release(ctx)
	l.mu.Lock()
	f := l.onLoss
	l.onLoss = nil
	l.mu.Unlock()
	if l.reportRelease && f != nil {
		f(errors.New("released"))
	}
	return err
}

// blockDriver adds a TokenBlock to a plainDriver, claiming blocks of
// blockClaimed tokens; the memory driver underneath reserves what it was
// made with. It keeps the memory driver's Notifier, so that the core's
// waiters wake at once and hand the lock over between themselves.
type blockDriver struct {
	*plainDriver
	blockClaimed uint64
}

func (d blockDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{TokenBlock: d.blockClaimed, Notifier: d.Driver.Capabilities().Notifier}
}

func unbrokenBlocks(b *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.Driver = memory.New(b, memory.WithoutBlocking(), memory.WithTokenBlocks(8))
	return blockDriver{plainDriver: d, blockClaimed: 8}
}

// Blocks of tokens claimed but not reserved: each grant advances the
// counter by one, as a plain counter does, while the core hands the lock
// between its goroutines with the next tokens, which the next grant
// elsewhere issues again (reused fencing tokens, in an in-process handoff).
func blocksNotReserved(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return blockDriver{plainDriver: d, blockClaimed: 8}
}

// A grant whose reply came after its caller gave up, kept and taken later
// as a grant of a new request: a late message trusted (issue 15's Redis
// double grant). The backend applied the request and the reply is on its
// way when the caller's context ends; the driver keeps the grant, which
// expires on the backend a TTL later, and hands it to a later request of
// the same client once its message arrives (a TTL on), with its old token
// and with validity counted from the new request's start.
func lateGrantTrusted(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	type message struct {
		lease   driver.Lease
		arrives time.Time
	}
	var mu sync.Mutex
	late := map[string]message{}
	d.acquire = func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
		mu.Lock()
		if m, ok := late[req.Key]; ok && time.Now().After(m.arrives) {
			delete(late, req.Key)
			mu.Unlock()
			return m.lease, nil // trusted: validity counted from this call
		}
		mu.Unlock()
		l, err := d.Driver.Acquire(context.WithoutCancel(ctx), req)
		if err != nil {
			return nil, err
		}
		select {
		case <-time.After(time.Millisecond): // the reply's way back
			return l, nil
		case <-ctx.Done():
			mu.Lock()
			late[req.Key] = message{lease: l, arrives: time.Now().Add(req.TTL)}
			mu.Unlock()
			return nil, ctx.Err()
		}
	}
	return d
}

// A lease that the driver keeps alive by itself until it is released, as
// a driver-side watchdog does: a grant whose caller is gone (its request
// applied after the caller's context ended) is never released, so it is
// renewed for ever and the lock never frees.
func selfRenewingLeases(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	kd := &keepAliveDriver{plainDriver: d, closed: make(chan struct{})}
	d.lease = func(l *plainLease) driver.Lease {
		kl := &keepAliveLease{plainLease: l, released: make(chan struct{})}
		kd.wg.Go(func() {
			tick := time.NewTicker(l.req.TTL / 3)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					_ = l.Lease.Extend(context.Background(), l.req.TTL)
				case <-kl.released:
					return
				case <-kd.closed:
					return
				}
			}
		})
		return kl
	}
	return kd
}

type keepAliveDriver struct {
	*plainDriver
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

func (d *keepAliveDriver) Close() error {
	d.once.Do(func() { close(d.closed) })
	d.wg.Wait()
	return d.plainDriver.Close()
}

type keepAliveLease struct {
	*plainLease
	released chan struct{}
	once     sync.Once
}

func (l *keepAliveLease) Release(ctx context.Context) error {
	l.once.Do(func() { close(l.released) })
	return l.plainLease.Release(ctx)
}

// blockingPlainDriver makes a plainDriver Blocking: Acquire with
// Request.Block waits in the memory driver's queue, or in a broken
// replacement; without it, Acquire tries once as plainDriver's does.
type blockingPlainDriver struct {
	*plainDriver
	acquire func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error)
}

func (d blockingPlainDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{Blocking: true}
}

func (d blockingPlainDriver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if !req.Block {
		return d.plainDriver.Acquire(ctx, req)
	}
	acquire := func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
		return d.Driver.Acquire(ctx, req)
	}
	if d.acquire != nil {
		acquire = d.acquire
	}
	l, err := acquire(ctx, d.plainDriver, req)
	if err != nil {
		return nil, err
	}
	return &plainLease{Lease: l, d: d.plainDriver, req: req}, nil
}

func unbrokenBlocking(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return blockingPlainDriver{plainDriver: d}
}

// Pattern 9 in a server-side wait: a RedLock-style Acquire that reports the
// full TTL as validity from its reply, not from its start. Its single tries
// are sound: only Lock, through a blocking Acquire, meets the fault.
func acquireValidityFromReply(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return blockingPlainDriver{plainDriver: d, acquire: firstMasterAcquire}
}

// notifyingPlainDriver adds the memory driver's Notifier to a plainDriver;
// broken, it acts on its wake-ups (onWake).
type notifyingPlainDriver struct {
	*plainDriver
	onWake func(key string)
}

func (d *notifyingPlainDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notifier: d}
}

func (d *notifyingPlainDriver) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	s, err := d.Driver.Capabilities().Notifier.Subscribe(ctx, key)
	if err != nil || d.onWake == nil {
		return s, err
	}
	return relay(s, func(forward func(), _ func(func())) {
		d.onWake(key)
		forward()
	}), nil
}

func unbrokenNotifying(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return &notifyingPlainDriver{plainDriver: d}
}

// A release message taken as a grant: a waiter that was woken takes the
// lock at its next try as if the releaser had handed it over, over whoever
// took it since (the message tells of a release, not of the lock now).
func wakeupTakenAsGrant(b *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	var mu sync.Mutex
	woken := map[string]bool{}
	d.acquire = func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
		mu.Lock()
		w := woken[req.Key]
		delete(woken, req.Key)
		mu.Unlock()
		if req.Wait && w {
			b.Tamper(req.Key, false) // "the lock is ours now"
		}
		return d.Driver.Acquire(ctx, req)
	}
	return &notifyingPlainDriver{plainDriver: d, onWake: func(key string) {
		mu.Lock()
		woken[key] = true
		mu.Unlock()
	}}
}

// Grants by release, taken on a late message (issue 15's Redis double
// grants): the first request refused a lock joins the key's queue on the
// backend; a release grants the lock to the queue's head in the same step,
// and the head's driver takes that grant at its next try, however long ago
// it was made, with validity counted from that try; and it forgets the
// grant only when giving it back succeeds. A waiter that stalls longer than
// the TTL is handed the lapsed grant, which the core refuses as expired on
// arrival and gives back (the backend says it is not held), and then again,
// at its next try, as fresh.
func grantByReleaseTrusted(b *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	q, _ := releaseQueues.LoadOrStore(b, &releaseQueue{head: map[string]queued{}, granted: map[string]queued{}})
	rq := q.(*releaseQueue)
	d.acquire = func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
		rq.mu.Lock()
		defer rq.mu.Unlock()
		if g, ok := rq.granted[req.Key]; ok && g.d == d {
			delete(rq.granted, req.Key)
			return g.lease, nil // taken on the message: no check that it still holds
		}
		l, err := d.Driver.Acquire(ctx, req)
		if err == nil {
			if h, ok := rq.head[req.Key]; ok && h.d == d {
				delete(rq.head, req.Key)
			}
			return l, nil
		}
		if _, ok := rq.head[req.Key]; !ok && errors.Is(err, driver.ErrLocked) {
			rq.head[req.Key] = queued{d: d, req: req}
		}
		return nil, err
	}
	d.lease = func(l *plainLease) driver.Lease { return &grantingRelease{plainLease: l, q: rq} }
	return &notifyingPlainDriver{plainDriver: d}
}

// releaseQueues holds the queue of each broken backend.
var releaseQueues sync.Map // *memory.Backend -> *releaseQueue

type releaseQueue struct {
	mu      sync.Mutex
	head    map[string]queued // by key: the first request refused
	granted map[string]queued // by key: a grant made by a release, untaken
}

type queued struct {
	d     *plainDriver
	req   driver.Request
	lease driver.Lease
}

type grantingRelease struct {
	*plainLease
	q *releaseQueue
}

func (l *grantingRelease) Release(ctx context.Context) error {
	if err := l.plainLease.Release(ctx); err != nil {
		return err
	}
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	h, ok := l.q.head[l.req.Key]
	if !ok {
		return nil
	}
	delete(l.q.head, l.req.Key)
	if g, err := h.d.Driver.Acquire(context.WithoutCancel(ctx), h.req); err == nil {
		sl := &stayGrant{plainLease: &plainLease{Lease: g, d: h.d, req: h.req}, q: l.q}
		h.lease, sl.entry = sl, h
		sl.entry.lease = sl
		l.q.granted[l.req.Key] = sl.entry
	}
	return nil
}

// stayGrant is a grant by release: the stay keeps it until it is given back.
type stayGrant struct {
	*plainLease
	q     *releaseQueue
	entry queued
}

func (l *stayGrant) Release(ctx context.Context) error {
	err := l.plainLease.Release(ctx)
	if errors.Is(err, driver.ErrNotHeld) {
		l.q.mu.Lock()
		if _, ok := l.q.granted[l.req.Key]; !ok {
			l.q.granted[l.req.Key] = l.entry // the message still says it is ours
		}
		l.q.mu.Unlock()
	}
	return err
}

// A lease that reports twice the validity the backend gives it: a holder
// that stops renewing (frozen) goes on trusting it for a TTL after the
// backend let it go and another client took the lock.
var validityOverstated = leasesAs(func(l *plainLease) driver.Lease { return &overstated{l} })

type overstated struct{ *plainLease }

func (l *overstated) Validity() time.Duration { return 2 * l.Lease.Validity() }

// A server-side wait that forgets a grant racing with its cancellation, on
// a backend where a lock lasts as long as its holder's session (here: the
// driver renews its leases by itself until they are released): the
// caller's context ends while the grant's reply is on its way, Acquire
// returns the context's error, and the lock stays taken for as long as the
// client lives.
func cancelledGrantForgotten(b *memory.Backend, d *plainDriver, n int64) driver.Driver {
	return raceReply(b, d, n, false)
}

// unbrokenCancelledGrant is its control: it gives the grant back.
func unbrokenCancelledGrant(b *memory.Backend, d *plainDriver, n int64) driver.Driver {
	return raceReply(b, d, n, true)
}

func raceReply(b *memory.Backend, d *plainDriver, n int64, giveBack bool) driver.Driver {
	kd := selfRenewingLeases(b, d, n).(*keepAliveDriver)
	return blockingKeepAlive{keepAliveDriver: kd, acquire: func(ctx context.Context, req driver.Request) (driver.Lease, error) {
		l, err := d.Driver.Acquire(ctx, req)
		if err != nil {
			return nil, err
		}
		pl := d.lease(&plainLease{Lease: l, d: d, req: req}) // renewed from now on
		select {
		case <-time.After(2 * time.Millisecond): // the reply's way back
			return pl, nil
		case <-ctx.Done():
			if giveBack {
				_ = pl.Release(context.WithoutCancel(ctx))
			}
			return nil, ctx.Err()
		}
	}}
}

// blockingKeepAlive is a Blocking keepAliveDriver: Acquire with
// Request.Block goes to acquire; without it, it tries once as
// plainDriver's does.
type blockingKeepAlive struct {
	*keepAliveDriver
	acquire func(ctx context.Context, req driver.Request) (driver.Lease, error)
}

func (d blockingKeepAlive) Capabilities() driver.Capabilities {
	return driver.Capabilities{Blocking: true}
}

func (d blockingKeepAlive) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if !req.Block {
		return d.keepAliveDriver.Acquire(ctx, req)
	}
	return d.acquire(ctx, req)
}

// A subscription whose Close does not stop the goroutine that relays its
// wake-ups: every wait leaves a goroutine behind, for the life of the
// process. The leak check after each case catches it.
func subscriptionsLeaked(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return leakyNotifier{&notifyingPlainDriver{plainDriver: d}}
}

type leakyNotifier struct{ *notifyingPlainDriver }

func (d leakyNotifier) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notifier: d}
}

func (d leakyNotifier) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	s, err := d.notifyingPlainDriver.Subscribe(ctx, key)
	if err != nil {
		return nil, err
	}
	ls := &leakySubscription{Subscription: s, c: make(chan struct{}, 1)}
	go func() {
		for range time.Tick(time.Millisecond) { // polls the inner channel for ever
			select {
			case <-s.C():
				select {
				case ls.c <- struct{}{}:
				default:
				}
			default:
			}
		}
	}()
	return ls, nil
}

type leakySubscription struct {
	driver.Subscription
	c chan struct{}
}

func (s *leakySubscription) C() <-chan struct{} { return s.c }

// Capabilities made anew at every call, with a different value: the core
// reads them once, the suite from one client for all, and a wrapper passes
// them on; a value that changes means that they disagree.
func unstableCapabilities(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return &unstableDriver{notifyingPlainDriver: &notifyingPlainDriver{plainDriver: d}}
}

type unstableDriver struct {
	*notifyingPlainDriver
	calls atomic.Uint64
}

// countedNotifier is the driver's Notifier, stamped with the call that
// made it.
type countedNotifier struct {
	*notifyingPlainDriver
	call uint64
}

func (d *unstableDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{Notifier: &countedNotifier{d.notifyingPlainDriver, d.calls.Add(1)}}
}

// A Blocking driver that also declares a Transferer: its waiters sit in
// the backend's queue, where no lock can be handed to them
// (Capabilities.Check).
func blockingTransferer(b *memory.Backend, d *plainDriver, n int64) driver.Driver {
	return blockingTransfer{unbrokenTransfer(b, d, n).(transferringDriver)}
}

type blockingTransfer struct{ transferringDriver }

func (d blockingTransfer) Capabilities() driver.Capabilities {
	return driver.Capabilities{Blocking: true, Transferer: d.transferringDriver}
}

// A driver that declares a TTL limit its backend does not honour: it says
// MaxTTL is a day, and its backend refuses anything over an hour.
func ttlLimitOverstated(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return ttlLimited{plainDriver: d, declared: 24 * time.Hour, honoured: time.Hour}
}

// unbrokenTTLLimit is its control: it declares what its backend honours.
func unbrokenTTLLimit(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return ttlLimited{plainDriver: d, declared: time.Hour, honoured: time.Hour}
}

type ttlLimited struct {
	*plainDriver
	declared, honoured time.Duration
}

func (d ttlLimited) Capabilities() driver.Capabilities {
	return driver.Capabilities{MinTTL: 100 * time.Millisecond, MaxTTL: d.declared, TTLReason: "the backend's expiry takes at most that"}
}

func (d ttlLimited) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if req.TTL > d.honoured {
		return nil, errors.New("broken driver: TTL too long for the backend")
	}
	return d.plainDriver.Acquire(ctx, req)
}
