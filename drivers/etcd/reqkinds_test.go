package etcd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// kindCounter counts the gRPC messages its clients send to etcd, by kind:
// the unary method (a Txn told apart by what it does), and each message on
// a watch or keepalive stream.
type kindCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// add counts one message of kind.
func (c *kindCounter) add(kind string) {
	c.mu.Lock()
	c.n[kind]++
	c.mu.Unlock()
}

// snapshot returns a copy of the counts.
func (c *kindCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// txnKind names a transaction by its shape: compares, and the kinds of ops
// in its branches (nested transactions included).
func txnKind(t *pb.TxnRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Txn[if%d", len(t.Compare))
	ops := func(name string, rs []*pb.RequestOp) {
		if len(rs) == 0 {
			return
		}
		b.WriteString(" " + name + ":")
		for _, r := range rs {
			switch {
			case r.GetRequestRange() != nil:
				if r.GetRequestRange().Serializable {
					b.WriteString("sget,")
				} else {
					b.WriteString("get,")
				}
			case r.GetRequestPut() != nil:
				b.WriteString("put,")
			case r.GetRequestDeleteRange() != nil:
				b.WriteString("del,")
			case r.GetRequestTxn() != nil:
				b.WriteString(txnKind(r.GetRequestTxn()) + ",")
			}
		}
	}
	ops("then", t.Success)
	ops("else", t.Failure)
	b.WriteString("]")
	return b.String()
}

// dialOptions returns the interceptors that count into c.
func (c *kindCounter) dialOptions() []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		kind := method[strings.LastIndexByte(method, '/')+1:]
		switch r := req.(type) {
		case *pb.TxnRequest:
			kind = txnKind(r)
		case *pb.RangeRequest:
			if r.Serializable {
				kind = "Range(serializable)"
			}
		}
		if !strings.Contains(method, "Health") {
			c.add(kind)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &countingStream{ClientStream: s, c: c, method: method[strings.LastIndexByte(method, '/')+1:]}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// countingStream counts the messages sent on a stream.
type countingStream struct {
	grpc.ClientStream
	c      *kindCounter
	method string
}

func (s *countingStream) SendMsg(m any) error {
	kind := s.method
	if w, ok := m.(*pb.WatchRequest); ok {
		switch {
		case w.GetCreateRequest() != nil:
			kind = "Watch.create"
		case w.GetCancelRequest() != nil:
			kind = "Watch.cancel"
		default:
			kind = "Watch.other"
		}
	}
	if !strings.Contains(s.method, "Health") {
		s.c.add(kind)
	}
	return s.ClientStream.SendMsg(m)
}

// BenchmarkRequestKinds counts, by kind, the requests per critical section
// of n independent contenders (each a Driver with a clientv3 client and a
// dlock Client of its own, 8 s session and lock TTL, as bench/peers runs
// them) locking one key as fast as they can for 3 s.
//
//	go test -run '^$' -bench RequestKinds -benchtime 1x ./drivers/etcd/
func BenchmarkRequestKinds(b *testing.B) {
	server.Need(b)
	for _, n := range []int{16, 64} {
		b.Run(fmt.Sprintf("contenders=%d", n), func(b *testing.B) {
			for b.Loop() {
				requestKinds(b, n, 3*time.Second)
			}
		})
	}
}

// requestKinds runs n contenders for d and logs the requests per section by
// kind.
func requestKinds(b *testing.B, n int, d time.Duration) {
	const ttl = 8 * time.Second
	c := &kindCounter{n: map[string]int{}}
	key := testkit.Key(b)
	var ms []dlock.Mutex
	for range n {
		cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(b), Logger: zap.NewNop(), DialOptions: c.dialOptions()})
		if err != nil {
			b.Fatal(err)
		}
		drv, err := New(cli, WithSessionTTL(ttl))
		if err != nil {
			b.Fatal(err)
		}
		dc, err := dlock.New(drv, dlock.WithTTL(ttl))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = dc.Close(context.Background())
			_ = drv.Close()
			_ = cli.Close()
		})
		m, err := dc.Mutex(key)
		if err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
	}
	// Each contender's session first, as a peer library opens it before
	// the run: its grant is not a section's cost.
	for _, m := range ms {
		l, err := m.Lock(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	before := c.snapshot()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var sections atomic.Int64
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := m.Lock(ctx)
				if err != nil {
					if ctx.Err() == nil {
						b.Error(err)
					}
					return
				}
				sections.Add(1)
				if err := l.Unlock(context.Background()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	after := c.snapshot()
	s := float64(sections.Load())
	total := 0
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		dn := after[k] - before[k]
		if dn == 0 {
			continue
		}
		total += dn
		lines = append(lines, fmt.Sprintf("  %6.2f  %s", float64(dn)/s, k))
	}
	b.Logf("%d contenders: %.0f sections in %v, %.2f requests per section:\n%s", n, s, d, float64(total)/s, strings.Join(lines, "\n"))
	b.ReportMetric(float64(total)/s, "requests/cs")
	b.ReportMetric(s/d.Seconds(), "cs/s")
}
