package dlock

import (
	"testing"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// The core makes no spans and no measurements while OpenTelemetry's global
// providers are its defaults: this fails if a new OpenTelemetry moves them
// where isUnsetGlobal does not look. No test of this package installs a
// global provider in its own process (TestTelemetryAfterGlobalInstall does
// so in a child process).
func TestTelemetrySkippedWithoutProviders(t *testing.T) {
	if !isUnsetGlobal(otel.GetTracerProvider()) || !isUnsetGlobal(otel.GetMeterProvider()) {
		t.Fatalf("OpenTelemetry's default global providers not recognised: %T, %T", otel.GetTracerProvider(), otel.GetMeterProvider())
	}
	tel := newTelemetry(config{})
	if tel.traced() || tel.metered() {
		t.Errorf("with the default global providers: traced %v, metered %v; want neither", tel.traced(), tel.metered())
	}
	tel = newTelemetry(config{tracers: tracenoop.NewTracerProvider(), meters: metricnoop.NewMeterProvider()})
	if tel.traced() || tel.metered() {
		t.Errorf("with the no-op providers: traced %v, metered %v; want neither", tel.traced(), tel.metered())
	}
	if isUnsetGlobal(tracenoop.NewTracerProvider()) || isUnsetGlobal(nil) {
		t.Error("isUnsetGlobal takes other providers for the default global one")
	}
}
