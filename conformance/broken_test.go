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
// Every one of them is built on plainDriver, which hides the memory driver's
// optional capabilities, so that the core waits by polling and learns of
// losses by renewal, as it would over a plain key-value server. The unbroken
// plainDriver passes every case the broken ones are expected to fail.

// plainDriver is the memory driver behind the plain Driver and Lease methods.
type plainDriver struct {
	driver.Driver
	b *memory.Backend
	// Per-operation replacements; nil means the memory driver's own.
	acquire func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error)
	lease   func(l *plainLease) driver.Lease
}

func (d *plainDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	var l driver.Lease
	var err error
	if d.acquire != nil {
		l, err = d.acquire(ctx, d, req)
	} else {
		l, err = d.Driver.TryAcquire(ctx, req)
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

type plainLease struct {
	driver.Lease
	d   *plainDriver
	req driver.Request
}

// sharedDriver adds read-write locks to a plainDriver.
type sharedDriver struct{ *plainDriver }

func (sharedDriver) Features() driver.Features { return driver.Features{Shared: true} }

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
		return d.Driver.TryAcquire(ctx, forever)
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
		l, err := d.Driver.TryAcquire(ctx, req)
		if err == nil {
			return l, nil
		}
		skew := time.Duration(n%3) * req.TTL / 2
		if info, held := b.Inspect(req.Key); held && info.Expires.Before(time.Now().Add(skew)) {
			b.Tamper(req.Key, false) // GETSET over what this clock calls expired
			return d.Driver.TryAcquire(ctx, req)
		}
		return nil, err
	}
	return d
}

// Pattern 3: DEL without an owner check.
func deleteWithoutOwnerCheck(b *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.lease = func(l *plainLease) driver.Lease { return &blindDelete{l} }
	return d
}

type blindDelete struct{ *plainLease }

func (l *blindDelete) Release(context.Context) error {
	l.d.b.Tamper(l.req.Key, false) // DEL key
	return nil
}

// Pattern 4: GET to check the owner, then DEL as a second command. The DEL
// arrives a round trip later; a slow network makes that round trip long.
func checkThenDelete(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.lease = func(l *plainLease) driver.Lease { return &checkThenDel{l} }
	return d
}

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
func renewWithoutOwnerCheck(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.lease = func(l *plainLease) driver.Lease { return &blindRenew{l} }
	return d
}

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
	d.acquire = func(ctx context.Context, d *plainDriver, req driver.Request) (driver.Lease, error) {
		started := time.Now()
		l, err := d.Driver.TryAcquire(ctx, req) // the first master
		if err != nil {
			return nil, err
		}
		time.Sleep(4 * 5 * time.Millisecond) // four more masters, one by one
		return &replyValidity{Lease: l, elapsed: time.Since(started)}, nil
	}
	return d
}

type replyValidity struct {
	driver.Lease
	elapsed time.Duration
}

func (l *replyValidity) Validity() time.Duration { return l.Lease.Validity() + l.elapsed }

// transferringDriver adds driver.Transferer to a plainDriver: the memory
// driver's own, or a broken replacement.
type transferringDriver struct {
	*plainDriver
	transfer func(ctx context.Context, d *plainDriver, from *plainLease, to driver.Request) (driver.Lease, error)
}

func (d transferringDriver) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	pl, ok := from.(*plainLease)
	if !ok {
		return nil, errors.New("broken driver: foreign lease")
	}
	if d.transfer != nil {
		return d.transfer(ctx, d.plainDriver, pl, to)
	}
	l, err := d.Driver.(driver.Transferer).Transfer(ctx, pl.Lease, to)
	if err != nil {
		return nil, err
	}
	return &plainLease{Lease: l, d: d.plainDriver, req: to}, nil
}

func unbrokenTransfer(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return transferringDriver{plainDriver: d}
}

// A handoff as a release followed by a grant, without checking that the
// releasing lease still held the lock: a former holder hands over a lock
// that is someone else's (pattern 3, DEL without owner check, in a
// handoff).
func transferWithoutOwnerCheck(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return transferringDriver{plainDriver: d, transfer: func(ctx context.Context, d *plainDriver, from *plainLease, to driver.Request) (driver.Lease, error) {
		d.b.Tamper(from.req.Key, false) // the lock goes, whoever holds it
		return d.TryAcquire(ctx, to)
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
		l, err := d.TryAcquire(ctx, to)
		if err != nil {
			return nil, err
		}
		return &localToken{l.(*plainLease), from.Token()}, nil
	}}
}

// A lease that reports its own release as a loss: a LossNotifier made from
// a per-lease context that the driver ends on release, as the context form
// (driver.LossReporter) may. The core has let the lease go by then; a
// driver that keeps telling it holds on to every released lease's callback.
func lossAfterRelease(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.lease = func(l *plainLease) driver.Lease { return &notifyingLease{plainLease: l, reportRelease: true} }
	return d
}

// unbrokenLossReports is the control for lossAfterRelease.
func unbrokenLossReports(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.lease = func(l *plainLease) driver.Lease { return &notifyingLease{plainLease: l} }
	return d
}

// notifyingLease adds driver.LossNotifier to a plainLease. It has no loss
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

// blockDriver adds driver.TokenBlocker to a plainDriver, claiming blocks of
// blockClaimed tokens; the memory driver underneath reserves what it was
// made with.
type blockDriver struct {
	*plainDriver
	blockClaimed uint64
}

func (d blockDriver) TokenBlock() uint64 { return d.blockClaimed }

// Subscribe keeps the memory driver's notifications, so that the core's
// waiters wake at once and hand the lock over between themselves.
func (d blockDriver) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	return d.Driver.(driver.Notifier).Subscribe(ctx, key)
}

func unbrokenBlocks(b *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	d.Driver = memory.New(b, memory.WithTokenBlocks(8))
	return blockDriver{plainDriver: d, blockClaimed: 8}
}

// Blocks of tokens claimed but not reserved: each grant advances the
// counter by one, as a plain counter does, while the core hands the lock
// between its goroutines with the next tokens, which the next grant
// elsewhere issues again (reused fencing tokens, in an in-process handoff).
func blocksNotReserved(_ *memory.Backend, d *plainDriver, _ int64) driver.Driver {
	return blockDriver{plainDriver: d, blockClaimed: 8}
}
