package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// anyTTL is the session and lock TTL of the AcquireAny tests: they hold
// many locks without renewing them, so their TTL must outlast the test on a
// loaded machine.
const anyTTL = 30 * time.Second

// AcquireAny grants the first free lock in order, at the deepest level of
// one chained transaction and in the second transaction of a list longer
// than anyChain; the grant is the entry a plain Acquire would have made
// (its name, and its create revision as the token), plain Acquires of it
// are refused, and a refusal of a list all held writes nothing.
func TestAcquireAnyTakesFirstFree(t *testing.T) {
	cli := newCli(t)
	d1 := newTestDriver(t, cli, WithSessionTTL(anyTTL))
	d2 := newTestDriver(t, newCli(t), WithSessionTTL(anyTTL))
	base := testkit.Key(t)
	const n = anyChain + 40 // two transactions
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/permit/%d", base, i)
	}
	requests := func() []driver.Request {
		reqs := make([]driver.Request, n)
		for i, k := range keys {
			reqs[i] = testkit.Request(k, anyTTL)
		}
		return reqs
	}
	hold := func(from, to int) {
		for i := from; i < to; i++ {
			testkit.MustAcquire(t, ctxFor(t), d1, testkit.Request(keys[i], anyTTL))
		}
	}
	grant := func(want int) driver.Lease {
		t.Helper()
		reqs := requests()
		l, i, err := d2.AcquireAny(ctxFor(t), reqs)
		if err != nil {
			t.Fatalf("AcquireAny with the first %d held: %v", want, err)
		}
		if i != want {
			t.Fatalf("AcquireAny granted request %d, want %d (the first free)", i, want)
		}
		got := entries(t, cli, keys[i])
		sess, err := d2.session(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		name := namesOf(d2.prefix, keys[i]).contender(driver.Exclusive, sess.id, reqs[i].ID)
		if len(got) != 1 || string(got[0].Key) != name || uint64(got[0].CreateRevision) != l.Token() {
			t.Fatalf("entries of the granted key %v, want only %q created at the lease's token %d", got, name, l.Token())
		}
		expectHeld(t, d1, keys[i], "AcquireAny's grant must exclude a plain Acquire")
		return l
	}

	hold(0, anyChain-1)
	grant(anyChain - 1) // the last level of the first transaction
	hold(anyChain, anyChain+25)
	l := grant(anyChain + 25) // in the second transaction

	hold(anyChain+26, n)
	before := revision(t, cli)
	if _, _, err := d2.AcquireAny(ctxFor(t), requests()); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("AcquireAny with every lock held: %v, want ErrLocked", err)
	}
	if after := revision(t, cli); after != before {
		t.Errorf("a refused AcquireAny moved the revision from %d to %d: it wrote something", before, after)
	}

	// Released, the lock is a plain one again.
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	testkit.MustAcquire(t, ctxFor(t), d1, testkit.Request(keys[anyChain+25], anyTTL))
}

// kvCalls counts the requests a clientv3 client sends to etcd's KV service
// (Range, Put, DeleteRange, Txn): the round trips of lock operations.
// Lease keepalives and grants are another service, and not counted.
type kvCalls struct{ n atomic.Int64 }

func (c *kvCalls) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if strings.HasPrefix(method, "/etcdserverpb.KV/") {
		c.n.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// withoutAny is a Driver that does not declare AnyAcquirer, for the core's
// permit-by-permit tries.
type withoutAny struct{ *Driver }

func (w withoutAny) Capabilities() driver.Capabilities {
	c := w.Driver.Capabilities()
	c.AnyAcquirer = nil
	return c
}

// TryAcquire of a semaphore costs one etcd request with AcquireAny, whether
// a permit is free or not; permit by permit, a full semaphore of 4 costs 4.
func TestSemaphoreTryAcquireRoundTrips(t *testing.T) {
	server.Need(t)
	key := testkit.Key(t)
	opts := []dlock.Option{dlock.WithTTL(anyTTL), dlock.WithoutRenewal()}
	semaphore := func(d driver.Driver) dlock.Semaphore {
		c, err := dlock.New(d, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		// Start the Driver's session before counting.
		m, err := c.Mutex(testkit.Key(t), opts...)
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.TryLock(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
		s, err := c.Semaphore(key, 4, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	counted := func() (*Driver, *kvCalls) {
		calls := &kvCalls{}
		cli := testkit.Closing(t, "clientv3.New", func() (*clientv3.Client, error) {
			return clientv3.New(clientv3.Config{
				Endpoints:   endpoints(t),
				Logger:      zap.NewNop(),
				DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(calls.intercept)},
			})
		})
		return newTestDriver(t, cli, WithSessionTTL(anyTTL)), calls
	}
	try := func(s dlock.Semaphore, calls *kvCalls) (dlock.Lease, int64, error) {
		t.Helper()
		calls.n.Store(0)
		l, err := s.TryAcquire(ctxFor(t))
		return l, calls.n.Load(), err
	}

	holder := semaphore(newTestDriver(t, newCli(t), WithSessionTTL(anyTTL)))
	var held []dlock.Lease
	for range 3 {
		l, err := holder.TryAcquire(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}

	dAny, anyCalls := counted()
	sAny := semaphore(dAny)
	l, n, err := try(sAny, anyCalls)
	if err != nil {
		t.Fatalf("AcquireAny TryAcquire with 3 of 4 permits held: %v", err)
	}
	t.Logf("AcquireAny: TryAcquire with 3 of 4 permits held: %d request(s)", n)
	if n != 1 {
		t.Errorf("TryAcquire with 3 of 4 permits held cost %d requests, want 1", n)
	}
	_, n, err = try(sAny, anyCalls)
	if !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("AcquireAny TryAcquire of a full semaphore: %v, want ErrLocked", err)
	}
	t.Logf("AcquireAny: TryAcquire of a full semaphore: %d request(s)", n)
	if n != 1 {
		t.Errorf("TryAcquire of a full semaphore cost %d requests, want 1", n)
	}

	dOne, oneCalls := counted()
	sOne := semaphore(withoutAny{dOne})
	_, n, err = try(sOne, oneCalls)
	if !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("permit-by-permit TryAcquire of a full semaphore: %v, want ErrLocked", err)
	}
	t.Logf("permit by permit: TryAcquire of a full semaphore: %d request(s)", n)
	if n != 4 {
		t.Errorf("permit-by-permit TryAcquire of a full semaphore cost %d requests, want 4", n)
	}
	// The permit-by-permit client sees the AcquireAny grant as a held lock,
	// and takes it once it is released.
	if err := l.Unlock(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if _, n, err = try(sOne, oneCalls); err != nil {
		t.Fatalf("permit-by-permit TryAcquire with 3 of 4 permits held: %v", err)
	}
	t.Logf("permit by permit: TryAcquire with 3 of 4 permits held: %d request(s) (1 to 4: it starts at a random permit)", n)
	for _, l := range held {
		_ = l.Unlock(ctxFor(t))
	}
}

// errReplyLost is what lostReply returns for a transaction it let through.
var errReplyLost = errors.New("test: the reply was lost")

// lostReply is a client interceptor that, while armed, lets the next Txn
// reach etcd and then reports its reply lost: an outcome the caller cannot
// know, although etcd applied it.
type lostReply struct{ armed atomic.Bool }

func (r *lostReply) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil && method == "/etcdserverpb.KV/Txn" && r.armed.CompareAndSwap(true, false) {
		return errReplyLost
	}
	return err
}

// An AcquireAny whose grant was applied but whose reply was lost leaves
// nothing behind: it deletes every request's entry by its name before
// returning, so the lock it was granted is free again at once.
func TestAcquireAnyLostReplyLeavesNothing(t *testing.T) {
	lost := &lostReply{}
	cli := testkit.Closing(t, "clientv3.New", func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{
			Endpoints:   endpoints(t),
			Logger:      zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(lost.intercept)},
		})
	})
	d := newTestDriver(t, cli, WithSessionTTL(anyTTL))
	other := newTestDriver(t, newCli(t), WithSessionTTL(anyTTL))
	base := testkit.Key(t)
	keys := []string{base + "/permit/0", base + "/permit/1", base + "/permit/2"}
	requests := func() []driver.Request {
		var reqs []driver.Request
		for _, k := range keys {
			reqs = append(reqs, testkit.Request(k, anyTTL))
		}
		return reqs
	}
	testkit.MustAcquire(t, ctxFor(t), other, testkit.Request(keys[0], anyTTL))

	lost.armed.Store(true)
	if _, _, err := d.AcquireAny(ctxFor(t), requests()); !errors.Is(err, errReplyLost) {
		t.Fatalf("AcquireAny with its reply lost: %v, want the lost reply's error", err)
	}
	if lost.armed.Load() {
		t.Fatal("AcquireAny sent no transaction")
	}
	for _, k := range keys[1:] {
		if got := entries(t, cli, k); len(got) != 0 {
			t.Fatalf("%d entries of %q after an AcquireAny whose reply was lost, want none", len(got), k)
		}
	}
	// The next AcquireAny, under the moved fence, takes the first free lock.
	l, i, err := d.AcquireAny(ctxFor(t), requests())
	if err != nil || i != 1 {
		t.Fatalf("AcquireAny after the tidying: request %d, %v; want request 1 granted", i, err)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}

// nestingLimit is a client interceptor that refuses, as a server with a
// low --max-txn-ops does, every Txn nested deeper than max levels.
type nestingLimit struct {
	max     int
	refused atomic.Int64
}

func (n *nestingLimit) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if txn, ok := req.(*etcdserverpb.TxnRequest); ok && depth(txn) > n.max {
		n.refused.Add(1)
		return rpctypes.ErrGRPCTooManyOps
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// depth is how many transactions txn nests, itself included.
func depth(txn *etcdserverpb.TxnRequest) int {
	deepest := 0
	for _, ops := range [][]*etcdserverpb.RequestOp{txn.Success, txn.Failure} {
		for _, op := range ops {
			if inner := op.GetRequestTxn(); inner != nil {
				deepest = max(deepest, depth(inner))
			}
		}
	}
	return 1 + deepest
}

// Against a server that takes fewer nested levels than anyChain, AcquireAny
// halves its chains until they fit, and still grants the first free lock.
func TestAcquireAnyHalvesChainsTooDeep(t *testing.T) {
	limit := &nestingLimit{max: 30}
	cli := testkit.Closing(t, "clientv3.New", func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{
			Endpoints:   endpoints(t),
			Logger:      zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(limit.intercept)},
		})
	})
	d := newTestDriver(t, cli, WithSessionTTL(anyTTL))
	other := newTestDriver(t, newCli(t), WithSessionTTL(anyTTL))
	base := testkit.Key(t)
	const n, held = 100, 70
	reqs := make([]driver.Request, n)
	for i := range reqs {
		reqs[i] = testkit.Request(fmt.Sprintf("%s/permit/%d", base, i), anyTTL)
		if i < held {
			testkit.MustAcquire(t, ctxFor(t), other, testkit.Request(reqs[i].Key, anyTTL))
		}
	}
	l, i, err := d.AcquireAny(ctxFor(t), reqs)
	if err != nil || i != held {
		t.Fatalf("AcquireAny: request %d, %v; want request %d granted", i, err, held)
	}
	if limit.refused.Load() == 0 {
		t.Fatal("no transaction was deeper than the limit: the test tests nothing")
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}
