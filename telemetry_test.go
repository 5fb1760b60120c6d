package dlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/drivers/memory"
)

func TestTelemetryReportsAcquisitionsAndLosses(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	b := memory.NewBackend()
	c, err := dlock.New(memory.New(b), dlock.WithMeterProvider(mp), dlock.WithLogger(logger), dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	m, _ := c.Mutex("orders/1")
	l := mustLock(t, m)
	if _, err := m.TryLock(t.Context()); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("TryLock: %v", err)
	}
	b.Tamper("orders/1", false)
	<-l.Done()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = true
		}
	}
	for _, name := range []string{"dlock.acquire.duration", "dlock.hold.duration", "dlock.held", "dlock.losses"} {
		if !got[name] {
			t.Errorf("metric %s not reported; got %v", name, got)
		}
	}
	for _, want := range []string{"dlock: acquired", "dlock: lock lost", "key=orders/1", "reason=backend"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

func TestClientOptionsRefusedOnMutex(t *testing.T) {
	c, err := dlock.New(memory.New(memory.NewBackend()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	if _, err := c.Mutex("k", dlock.WithLogger(slog.Default())); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("Mutex with WithLogger: got %v, want ErrInvalidOption", err)
	}
}

// spanNames is a TracerProvider that records the names of the spans started
// through it, and otherwise does nothing.
type spanNames struct {
	noop.TracerProvider
	mu    sync.Mutex
	names []string
}

func (p *spanNames) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return namingTracer{Tracer: p.TracerProvider.Tracer(name, opts...), p: p}
}

func (p *spanNames) started() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.names)
}

type namingTracer struct {
	trace.Tracer
	p *spanNames
}

func (t namingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	t.p.mu.Lock()
	t.p.names = append(t.p.names, name)
	t.p.mu.Unlock()
	return t.Tracer.Start(ctx, name, opts...)
}

func TestTracerProviderGetsAcquisitionSpans(t *testing.T) {
	tp := &spanNames{}
	c, err := dlock.New(memory.New(memory.NewBackend()), dlock.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	m, _ := c.Mutex("orders/2")
	l := mustLock(t, m)
	if _, err := m.TryLock(t.Context()); !errors.Is(err, dlock.ErrLocked) {
		t.Fatalf("TryLock: %v", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := tp.started(), []string{"dlock.lock", "dlock.trylock"}; !slices.Equal(got, want) {
		t.Errorf("spans started: %v, want %v", got, want)
	}
	if _, err := c.Mutex("k", dlock.WithTracerProvider(tp)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("Mutex with WithTracerProvider: got %v, want ErrInvalidOption", err)
	}
}
