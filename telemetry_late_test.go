package dlock_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/drivers/memory"
)

// lateInstallEnv makes TestTelemetryAfterGlobalInstall do its work: set in
// the child process it starts, as installing a global provider cannot be
// undone and would reach every later test of the process.
const lateInstallEnv = "DLOCK_TEST_LATE_OTEL"

// An application may install its OpenTelemetry SDK after it made the
// Client: the Client's spans and metrics reach it from then on, although
// the Client made none before, and dlock.held does not go below zero for a
// lease taken before and released after.
func TestTelemetryAfterGlobalInstall(t *testing.T) {
	if os.Getenv(lateInstallEnv) == "" {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestTelemetryAfterGlobalInstall$", "-test.count=1")
		cmd.Env = append(os.Environ(), lateInstallEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child process: %v\n%s", err, out)
		}
		return
	}
	c, err := dlock.New(memory.New(memory.NewBackend()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	m, _ := c.Mutex("orders/3")
	before := mustLock(t, m) // taken with no SDK installed

	tp := &spanNames{}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)

	if err := before.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := mustLock(t, m)
	if got, want := tp.started(), []string{"dlock.lock"}; !slices.Equal(got, want) {
		t.Errorf("spans started: %v, want %v", got, want)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	var held int64
	acquired := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "dlock.held":
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					held += p.Value
				}
			case "dlock.acquire.duration":
				acquired = true
			}
		}
	}
	if held != 1 || !acquired {
		t.Errorf("after the SDK was installed: dlock.held %d (want 1, the lease taken since), dlock.acquire.duration reported %v", held, acquired)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}
