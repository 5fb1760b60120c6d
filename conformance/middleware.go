package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Fault middleware: a driver wrapper that the suite puts between the core and
// any driver, so that faults (a slow reply, a renewal that never gets
// through, a request applied after its caller gave up, a frozen process, a
// late notification) can be injected on every backend without harness hooks.
//
// Every call the core makes to the driver goes through one fault's call
// method, which decides when and with which context the inner driver sees it
// and what the core is told. The wrapper keeps the driver's optional
// interfaces, so that the core drives a wrapped driver exactly as it drives
// the bare one:
//
//   - Blocker, Notifier, Transferer and BatchExtender change how the core
//     waits, hands over and renews, so the wrapper has each exactly when the
//     inner driver has it (one of 16 shapes, chosen in withFault);
//   - Featurer, Validator, Inspector, TokenBlocker and, on leases,
//     UncertaintyReporter are always present, answering as the core's
//     fallback does when the inner driver lacks them: zero Features, nil
//     validation errors, an errors.ErrUnsupported error, a TokenBlock of 0
//     (the core ignores values below 2), a nil Uncertain;
//   - a lease is wrapped as a LossNotifier, a LossReporter, or neither,
//     exactly as the inner lease is, since the core listens to the two in
//     different ways.

// op names a driver call.
type op int

const (
	opTryAcquire op = iota
	opAcquire
	opTransfer
	opExtend
	opExtendBatch
	opRelease
	opSubscribe
)

var opNamesForLogs = [...]string{"TryAcquire", "Acquire", "Transfer", "Extend", "ExtendBatch", "Release", "Subscribe"}

func (o op) String() string { return opNamesForLogs[o] }

// grants reports whether the call may grant a lock.
func (o op) grants() bool { return o == opTryAcquire || o == opAcquire || o == opTransfer }

// reply is what a driver call returns beside its error.
type reply struct {
	lease driver.Lease        // of TryAcquire, Acquire and Transfer
	errs  []error             // of ExtendBatch
	sub   driver.Subscription // of Subscribe
}

// fault decides how one driver call reaches the backend: do performs the
// call on the inner driver with the context it is given; call returns what
// the core is told. A fault may call do later, or never, or with another
// context; a reply it does not return is dropped (a lease in it is an
// orphan, left to expire on the backend).
type fault interface {
	call(ctx context.Context, o op, do func(context.Context) (reply, error)) (reply, error)
}

// subscriptionFault is implemented by faults that also interfere with the
// wake-ups of a Notifier's subscriptions.
type subscriptionFault interface {
	subscription(s driver.Subscription) driver.Subscription
}

// withFault returns a wrapper that routes every call of a driver through f.
func withFault(f fault) func(driver.Driver) driver.Driver {
	return func(inner driver.Driver) driver.Driver {
		d := &faultDriver{Driver: inner, f: f}
		var shape int
		if _, ok := inner.(driver.Blocker); ok {
			shape |= hasBlocker
		}
		if _, ok := inner.(driver.Notifier); ok {
			shape |= hasNotifier
		}
		if _, ok := inner.(driver.Transferer); ok {
			shape |= hasTransferer
		}
		if _, ok := inner.(driver.BatchExtender); ok {
			shape |= hasBatchExtender
		}
		return shapes[shape](d)
	}
}

const (
	hasBlocker = 1 << iota
	hasNotifier
	hasTransferer
	hasBatchExtender
)

// The facets: each adds one optional interface to a faultDriver.
type (
	blockerFacet    struct{ d *faultDriver }
	notifierFacet   struct{ d *faultDriver }
	transfererFacet struct{ d *faultDriver }
	batchFacet      struct{ d *faultDriver }
)

func (f blockerFacet) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	return f.d.acquire(ctx, opAcquire, func(ctx context.Context) (driver.Lease, error) {
		return f.d.Driver.(driver.Blocker).Acquire(ctx, req)
	})
}

func (f notifierFacet) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	return f.d.subscribe(ctx, key)
}

func (f transfererFacet) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	return f.d.acquire(ctx, opTransfer, func(ctx context.Context) (driver.Lease, error) {
		return f.d.Driver.(driver.Transferer).Transfer(ctx, unwrapLease(from), to)
	})
}

func (f batchFacet) ExtendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	return f.d.extendBatch(ctx, leases, ttls)
}

// shapes builds the wrapper with exactly the optional interfaces named by
// its index (a set of has* bits). A struct that embeds *faultDriver and some
// facets has the facets' methods and faultDriver's.
var shapes = [16]func(d *faultDriver) driver.Driver{
	0: func(d *faultDriver) driver.Driver { return d },
	hasBlocker: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			blockerFacet
		}{d, blockerFacet{d}}
	},
	hasNotifier: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			notifierFacet
		}{d, notifierFacet{d}}
	},
	hasBlocker | hasNotifier: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			blockerFacet
			notifierFacet
		}{d, blockerFacet{d}, notifierFacet{d}}
	},
	hasTransferer: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			transfererFacet
		}{d, transfererFacet{d}}
	},
	hasBlocker | hasTransferer: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			blockerFacet
			transfererFacet
		}{d, blockerFacet{d}, transfererFacet{d}}
	},
	hasNotifier | hasTransferer: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			notifierFacet
			transfererFacet
		}{d, notifierFacet{d}, transfererFacet{d}}
	},
	hasBlocker | hasNotifier | hasTransferer: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			blockerFacet
			notifierFacet
			transfererFacet
		}{d, blockerFacet{d}, notifierFacet{d}, transfererFacet{d}}
	},
	hasBatchExtender: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			batchFacet
		}{d, batchFacet{d}}
	},
	hasBlocker | hasBatchExtender: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			blockerFacet
			batchFacet
		}{d, blockerFacet{d}, batchFacet{d}}
	},
	hasNotifier | hasBatchExtender: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			notifierFacet
			batchFacet
		}{d, notifierFacet{d}, batchFacet{d}}
	},
	hasBlocker | hasNotifier | hasBatchExtender: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			blockerFacet
			notifierFacet
			batchFacet
		}{d, blockerFacet{d}, notifierFacet{d}, batchFacet{d}}
	},
	hasTransferer | hasBatchExtender: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			transfererFacet
			batchFacet
		}{d, transfererFacet{d}, batchFacet{d}}
	},
	hasBlocker | hasTransferer | hasBatchExtender: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			blockerFacet
			transfererFacet
			batchFacet
		}{d, blockerFacet{d}, transfererFacet{d}, batchFacet{d}}
	},
	hasNotifier | hasTransferer | hasBatchExtender: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			notifierFacet
			transfererFacet
			batchFacet
		}{d, notifierFacet{d}, transfererFacet{d}, batchFacet{d}}
	},
	hasBlocker | hasNotifier | hasTransferer | hasBatchExtender: func(d *faultDriver) driver.Driver {
		return struct {
			*faultDriver
			blockerFacet
			notifierFacet
			transfererFacet
			batchFacet
		}{d, blockerFacet{d}, notifierFacet{d}, transfererFacet{d}, batchFacet{d}}
	},
}

// faultDriver is the part every shape shares: Driver, and the optional
// interfaces whose absence the core treats like a neutral answer.
type faultDriver struct {
	driver.Driver
	f fault
}

func (d *faultDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	return d.acquire(ctx, opTryAcquire, func(ctx context.Context) (driver.Lease, error) {
		return d.Driver.TryAcquire(ctx, req)
	})
}

func (d *faultDriver) acquire(ctx context.Context, o op, call func(context.Context) (driver.Lease, error)) (driver.Lease, error) {
	r, err := d.f.call(ctx, o, func(ctx context.Context) (reply, error) {
		l, err := call(ctx)
		return reply{lease: l}, err
	})
	if err != nil {
		return nil, err
	}
	return d.wrapLease(r.lease), nil
}

func (d *faultDriver) subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	r, err := d.f.call(ctx, opSubscribe, func(ctx context.Context) (reply, error) {
		s, err := d.Driver.(driver.Notifier).Subscribe(ctx, key)
		return reply{sub: s}, err
	})
	if err != nil {
		return nil, err
	}
	if sf, ok := d.f.(subscriptionFault); ok {
		return sf.subscription(r.sub), nil
	}
	return r.sub, nil
}

func (d *faultDriver) extendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	inner := make([]driver.Lease, len(leases))
	for i, l := range leases {
		inner[i] = unwrapLease(l)
	}
	r, err := d.f.call(ctx, opExtendBatch, func(ctx context.Context) (reply, error) {
		return reply{errs: d.Driver.(driver.BatchExtender).ExtendBatch(ctx, inner, ttls)}, nil
	})
	if err != nil {
		errs := make([]error, len(leases))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	return r.errs
}

// Features is the inner driver's, or none: the core's fallback.
func (d *faultDriver) Features() driver.Features {
	if f, ok := d.Driver.(driver.Featurer); ok {
		return f.Features()
	}
	return driver.Features{}
}

// ValidateKey is the inner driver's check, or none: the core's fallback.
func (d *faultDriver) ValidateKey(key string) error {
	if v, ok := d.Driver.(driver.Validator); ok {
		return v.ValidateKey(key)
	}
	return nil
}

// ValidateTTL is the inner driver's check, or none: the core's fallback.
func (d *faultDriver) ValidateTTL(ttl time.Duration) error {
	if v, ok := d.Driver.(driver.Validator); ok {
		return v.ValidateTTL(ttl)
	}
	return nil
}

// TokenBlock is the inner driver's, or 0, which the core ignores.
func (d *faultDriver) TokenBlock() uint64 {
	if tb, ok := d.Driver.(driver.TokenBlocker); ok {
		return tb.TokenBlock()
	}
	return 0
}

// Inspect is the inner driver's, or unsupported, as the core says without it.
func (d *faultDriver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if in, ok := d.Driver.(driver.Inspector); ok {
		return in.Inspect(ctx, key)
	}
	return driver.Info{}, errInspectUnsupported
}

var errInspectUnsupported = fmt.Errorf("conformance: inspect: %w by this driver", errors.ErrUnsupported)

// faultLease routes a lease's calls through its driver's fault.
type faultLease struct {
	driver.Lease
	d *faultDriver
}

// The shapes of a lease: as the inner lease reports losses.
type (
	notifierLease struct{ *faultLease }
	reporterLease struct{ *faultLease }
)

func (l notifierLease) OnLoss(f func(reason error)) {
	l.Lease.(driver.LossNotifier).OnLoss(f)
}

func (l reporterLease) Lost() context.Context { return l.Lease.(driver.LossReporter).Lost() }

func (d *faultDriver) wrapLease(inner driver.Lease) driver.Lease {
	l := &faultLease{Lease: inner, d: d}
	switch inner.(type) {
	case driver.LossNotifier: // the core prefers it when a lease has both
		return notifierLease{l}
	case driver.LossReporter:
		return reporterLease{l}
	}
	return l
}

func (l *faultLease) inner() driver.Lease { return l.Lease }

// unwrapLease returns the inner driver's lease of one of ours.
func unwrapLease(l driver.Lease) driver.Lease {
	if w, ok := l.(interface{ inner() driver.Lease }); ok {
		return w.inner()
	}
	return l
}

func (l *faultLease) Extend(ctx context.Context, ttl time.Duration) error {
	_, err := l.d.f.call(ctx, opExtend, func(ctx context.Context) (reply, error) {
		return reply{}, l.Lease.Extend(ctx, ttl)
	})
	return err
}

func (l *faultLease) Release(ctx context.Context) error {
	_, err := l.d.f.call(ctx, opRelease, func(ctx context.Context) (reply, error) {
		return reply{}, l.Lease.Release(ctx)
	})
	return err
}

// Uncertain is the inner lease's, or nil: the core's fallback.
func (l *faultLease) Uncertain() error {
	if u, ok := l.Lease.(driver.UncertaintyReporter); ok {
		return u.Uncertain()
	}
	return nil
}

var (
	_ driver.Featurer            = (*faultDriver)(nil)
	_ driver.Validator           = (*faultDriver)(nil)
	_ driver.TokenBlocker        = (*faultDriver)(nil)
	_ driver.Inspector           = (*faultDriver)(nil)
	_ driver.UncertaintyReporter = (*faultLease)(nil)
	_ driver.LossNotifier        = notifierLease{}
	_ driver.LossReporter        = reporterLease{}
)
