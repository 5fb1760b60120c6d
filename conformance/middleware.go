package conformance

import (
	"context"
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
// and what the core is told. The wrapper keeps the driver's capabilities, so
// that the core drives a wrapped driver exactly as it drives the bare one:
// its Capabilities are the inner driver's, with the Notifier, BatchExtender,
// Transferer and AnyAcquirer (when not nil) replaced by wrappers that route their calls
// through the fault. The Inspector is passed on as it is: operators' reads
// take no lease and no fault applies to them. A lease is wrapped so that
// Extend and Release go through the fault; its loss reports (OnLoss,
// Uncertain) are the inner lease's.

// op names a driver call.
type op int

const (
	opTry   op = iota // Acquire without Request.Block
	opBlock           // Acquire with Request.Block
	opTransfer
	opAcquireAny
	opExtend
	opExtendBatch
	opRelease
	opSubscribe
)

var opNamesForLogs = [...]string{"Acquire", "Acquire(Block)", "Transfer", "AcquireAny", "Extend", "ExtendBatch", "Release", "Subscribe"}

func (o op) String() string { return opNamesForLogs[o] }

// grants reports whether the call may grant a lock.
func (o op) grants() bool { return o == opTry || o == opBlock || o == opTransfer || o == opAcquireAny }

// reply is what a driver call returns beside its error.
type reply struct {
	lease driver.Lease        // of Acquire, Transfer and AcquireAny
	index int                 // of AcquireAny
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
		d := &faultDriver{inner: inner, f: f}
		d.innerCaps = inner.Capabilities()
		d.caps = d.innerCaps
		if d.caps.Notifier != nil {
			d.caps.Notifier = faultNotifier{d}
		}
		if d.caps.BatchExtender != nil {
			d.caps.BatchExtender = faultBatchExtender{d}
		}
		if d.caps.Transferer != nil {
			d.caps.Transferer = faultTransferer{d}
		}
		if d.caps.AnyAcquirer != nil {
			d.caps.AnyAcquirer = faultAnyAcquirer{d}
		}
		return d
	}
}

// faultDriver routes a driver's calls through a fault.
type faultDriver struct {
	inner driver.Driver
	f     fault
	// innerCaps are the inner driver's, read once; caps are the same with
	// the optional behaviours routed through the fault.
	innerCaps, caps driver.Capabilities
}

// Capabilities are the inner driver's, with its optional behaviours routed
// through the fault.
func (d *faultDriver) Capabilities() driver.Capabilities { return d.caps }

func (d *faultDriver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	o := opTry
	if req.Block {
		o = opBlock
	}
	return d.acquire(ctx, o, func(ctx context.Context) (driver.Lease, error) {
		return d.inner.Acquire(ctx, req)
	})
}

func (d *faultDriver) Close() error { return d.inner.Close() }

func (d *faultDriver) acquire(ctx context.Context, o op, call func(context.Context) (driver.Lease, error)) (driver.Lease, error) {
	r, err := d.f.call(ctx, o, func(ctx context.Context) (reply, error) {
		l, err := call(ctx)
		return reply{lease: l}, err
	})
	if err != nil {
		return nil, err
	}
	return &faultLease{Lease: r.lease, d: d}, nil
}

// The optional behaviours, routed through the fault.
type (
	faultNotifier      struct{ d *faultDriver }
	faultBatchExtender struct{ d *faultDriver }
	faultTransferer    struct{ d *faultDriver }
	faultAnyAcquirer   struct{ d *faultDriver }
)

func (n faultNotifier) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	d := n.d
	r, err := d.f.call(ctx, opSubscribe, func(ctx context.Context) (reply, error) {
		s, err := d.innerCaps.Notifier.Subscribe(ctx, key)
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

func (b faultBatchExtender) ExtendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	d := b.d
	inner := make([]driver.Lease, len(leases))
	for i, l := range leases {
		inner[i] = unwrapLease(l)
	}
	r, err := d.f.call(ctx, opExtendBatch, func(ctx context.Context) (reply, error) {
		return reply{errs: d.innerCaps.BatchExtender.ExtendBatch(ctx, inner, ttls)}, nil
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

func (tr faultTransferer) Transfer(ctx context.Context, from driver.Lease, to driver.Request) (driver.Lease, error) {
	d := tr.d
	return d.acquire(ctx, opTransfer, func(ctx context.Context) (driver.Lease, error) {
		return d.innerCaps.Transferer.Transfer(ctx, unwrapLease(from), to)
	})
}

func (a faultAnyAcquirer) AcquireAny(ctx context.Context, reqs []driver.Request) (driver.Lease, int, error) {
	d := a.d
	r, err := d.f.call(ctx, opAcquireAny, func(ctx context.Context) (reply, error) {
		l, i, err := d.innerCaps.AnyAcquirer.AcquireAny(ctx, reqs)
		return reply{lease: l, index: i}, err
	})
	if err != nil {
		return nil, 0, err
	}
	return &faultLease{Lease: r.lease, d: d}, r.index, nil
}

// faultLease routes a lease's Extend and Release through its driver's
// fault; Token, Validity, OnLoss and Uncertain are the inner lease's.
type faultLease struct {
	driver.Lease
	d *faultDriver
}

// unwrapLease returns the inner driver's lease of one of ours.
func unwrapLease(l driver.Lease) driver.Lease {
	if fl, ok := l.(*faultLease); ok {
		return fl.Lease
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

var (
	_ driver.Driver        = (*faultDriver)(nil)
	_ driver.Lease         = (*faultLease)(nil)
	_ driver.Notifier      = faultNotifier{}
	_ driver.BatchExtender = faultBatchExtender{}
	_ driver.Transferer    = faultTransferer{}
	_ driver.AnyAcquirer   = faultAnyAcquirer{}
)
