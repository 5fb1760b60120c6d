package dlock

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/dlock-go/dlock/driver"
)

// Observability: OpenTelemetry metrics and traces, and log/slog events. By
// default dlock uses OpenTelemetry's global providers, which do nothing
// until the application installs an SDK, and logs nothing. While a global
// provider is still OpenTelemetry's default (none installed yet), or the
// Client was given OpenTelemetry's no-op one, dlock does not make the spans
// or measurements at all: building them for nothing cost 16 of the 45
// allocations of an uncontended Lock and Unlock (BenchmarkCoreCPU). An SDK installed later, after the Client was
// made, gets them from then on: for the acquisitions, leases and waiters
// that begin after it was installed (so the up-down counters dlock.held and
// dlock.waiters never go below zero).
//
// Metrics (attributes: dlock.mode, and dlock.outcome or dlock.reason):
//   - dlock.acquire.duration (s): how long Lock, TryLock, RLock and TryRLock
//     took, by outcome (acquired, locked, canceled, closed, error);
//   - dlock.hold.duration (s): how long leases were held, until unlocked or lost;
//   - dlock.held: leases held now;
//   - dlock.waiters: goroutines waiting in Lock or RLock now;
//   - dlock.renewals: lease renewals, by outcome (ok, failed, refused);
//   - dlock.renewal.batches: renewal round trips (one per batch);
//   - dlock.losses: leases lost, by reason (refused, deadline, backend);
//   - dlock.acquire.errors: transient backend errors that waiting Lock and
//     RLock calls rode out (see WithFailFast).
//
// Traces: one span per acquisition ("dlock.lock", "dlock.trylock",
// "dlock.rlock", "dlock.tryrlock") with the key,
// mode, wait and fencing token.
//
// Logs: acquisitions and releases at Debug, failed renewals at Info, losses
// at Warn, each with the key and fencing token; transient errors that a
// waiting Lock rides out at Warn, with the key and the count of failed
// attempts in a row.

// instrumentationName names dlock's meter and tracer.
const instrumentationName = "github.com/dlock-go/dlock"

// WithMeterProvider sends dlock's metrics to mp. Default: the global
// provider (otel.GetMeterProvider), a no-op until the application sets one.
// It configures a Client; given to Client.Mutex it is refused.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		c.meters, c.clientLevel = mp, true
		return nil
	}
}

// WithTracerProvider sends dlock's spans to tp. Default: the global provider
// (otel.GetTracerProvider), a no-op until the application sets one. It
// configures a Client; given to Client.Mutex it is refused.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		c.tracers, c.clientLevel = tp, true
		return nil
	}
}

// WithLogger sends dlock's events to l. Default: no logging. It configures a
// Client; given to Client.Mutex it is refused.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger, c.clientLevel = l, true
		return nil
	}
}

// telemetry is a Client's instruments.
type telemetry struct {
	tracer       trace.Tracer
	log          *slog.Logger
	acquire      metric.Float64Histogram
	hold         metric.Float64Histogram
	held         metric.Int64UpDownCounter
	waiters      metric.Int64UpDownCounter
	renewals     metric.Int64Counter
	batches      metric.Int64Counter
	losses       metric.Int64Counter
	waitErrors   metric.Int64Counter
	modeAttrs    [2]metric.MeasurementOption // by driver.Mode
	acquireAttrs map[acquireOutcome]metric.MeasurementOption
	renewAttrs   map[string]metric.MeasurementOption
	lossAttrs    map[string]metric.MeasurementOption

	// unsetTracers and unsetMeters are OpenTelemetry's default global
	// providers, when the Client uses them (nil otherwise): while the
	// global provider is still that one, no SDK is installed, and spans
	// and measurements would go nowhere (traced, metered).
	unsetTracers trace.TracerProvider
	unsetMeters  metric.MeterProvider
	// noTraces and noMetrics: the Client was given OpenTelemetry's no-op
	// providers.
	noTraces, noMetrics bool
}

// acquireOutcome is a mode and how an acquisition ended.
type acquireOutcome struct {
	mode    driver.Mode
	outcome string
}

var (
	acquireOutcomes = []string{"acquired", "locked", "canceled", "closed", "error"}
	renewOutcomes   = []string{"ok", "failed", "refused"}
	lossReasons     = []string{"refused", "deadline", "backend"}
)

func newTelemetry(cfg config) *telemetry {
	mp, tp, log := cfg.meters, cfg.tracers, cfg.logger
	var unsetMeters metric.MeterProvider
	var unsetTracers trace.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
		if isUnsetGlobal(mp) {
			unsetMeters = mp
		}
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
		if isUnsetGlobal(tp) {
			unsetTracers = tp
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	meter := mp.Meter(instrumentationName)
	t := &telemetry{
		tracer:       tp.Tracer(instrumentationName),
		log:          log,
		acquireAttrs: map[acquireOutcome]metric.MeasurementOption{},
		renewAttrs:   map[string]metric.MeasurementOption{},
		lossAttrs:    map[string]metric.MeasurementOption{},
		unsetTracers: unsetTracers,
		unsetMeters:  unsetMeters,
	}
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		t.noTraces = true
	}
	switch mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
		t.noMetrics = true
	}
	// Instrument errors only mean a misconfigured SDK; the instruments are
	// then no-ops, which is what an application without metrics gets anyway.
	t.acquire, _ = meter.Float64Histogram("dlock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time spent acquiring a lock, by outcome."))
	t.hold, _ = meter.Float64Histogram("dlock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time leases were held, until unlocked or lost."))
	t.held, _ = meter.Int64UpDownCounter("dlock.held", metric.WithDescription("Leases held now."))
	t.waiters, _ = meter.Int64UpDownCounter("dlock.waiters", metric.WithDescription("Goroutines waiting to acquire now."))
	t.renewals, _ = meter.Int64Counter("dlock.renewals", metric.WithDescription("Lease renewals, by outcome."))
	t.batches, _ = meter.Int64Counter("dlock.renewal.batches", metric.WithDescription("Renewal batches: one driver call each (driver.BatchExtender), which the driver sends in one round trip per its batch size."))
	t.losses, _ = meter.Int64Counter("dlock.losses", metric.WithDescription("Leases lost, by reason."))
	t.waitErrors, _ = meter.Int64Counter("dlock.acquire.errors",
		metric.WithDescription("Transient backend errors that waiting Lock and RLock calls rode out, retrying."))
	for _, mode := range []driver.Mode{driver.Exclusive, driver.Shared} {
		modeAttr := attribute.String("dlock.mode", mode.String())
		t.modeAttrs[mode] = metric.WithAttributeSet(attribute.NewSet(modeAttr))
		for _, o := range acquireOutcomes {
			t.acquireAttrs[acquireOutcome{mode, o}] = metric.WithAttributeSet(attribute.NewSet(modeAttr, attribute.String("dlock.outcome", o)))
		}
	}
	for _, o := range renewOutcomes {
		t.renewAttrs[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("dlock.outcome", o)))
	}
	for _, r := range lossReasons {
		t.lossAttrs[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("dlock.reason", r)))
	}
	return t
}

// otelGlobalPkg is the package of OpenTelemetry's default global providers,
// which delegate to the ones an application installs later.
const otelGlobalPkg = "go.opentelemetry.io/otel/internal/global"

// isUnsetGlobal reports whether p, a global provider, is OpenTelemetry's
// default: none has been installed. OpenTelemetry exports no way to ask, so
// this goes by the type's package; should a new version move it, the answer
// is false and dlock instruments as it would with an SDK installed (and
// TestTelemetrySkippedWithoutProviders fails).
func isUnsetGlobal(p any) bool {
	t := reflect.TypeOf(p)
	return t != nil && t.Kind() == reflect.Pointer && t.Elem().PkgPath() == otelGlobalPkg
}

// traced reports whether spans go anywhere: the Client's tracer provider is
// not a no-op, or the global one, which it uses, has been installed since
// OpenTelemetry's default (whose tracer then delegates to it). One atomic
// load.
func (t *telemetry) traced() bool {
	return !t.noTraces && (t.unsetTracers == nil || otel.GetTracerProvider() != t.unsetTracers)
}

// metered is traced's counterpart for metrics.
func (t *telemetry) metered() bool {
	return !t.noMetrics && (t.unsetMeters == nil || otel.GetMeterProvider() != t.unsetMeters)
}

// outcomeOf classifies how an acquisition ended.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "acquired"
	case errors.Is(err, ErrLocked):
		return "locked"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.Is(err, ErrClosed):
		return "closed"
	}
	return "error"
}

// acquireRecord is what endAcquire needs of an acquisition's start: its
// span (nil when spans go nowhere) and when it started (zero when nothing
// was to be recorded).
type acquireRecord struct {
	span    trace.Span
	started time.Time
}

// startAcquire opens the record of one acquisition. With telemetry off, it
// costs neither a span nor a reading of the clock.
func (t *telemetry) startAcquire(ctx context.Context, op, key string, mode driver.Mode) (context.Context, acquireRecord) {
	traced := t.traced()
	if !traced && !t.metered() && !t.log.Enabled(ctx, slog.LevelDebug) {
		return ctx, acquireRecord{}
	}
	r := acquireRecord{started: time.Now()}
	if traced {
		ctx, r.span = t.tracer.Start(ctx, "dlock."+op, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("dlock.key", key), attribute.String("dlock.mode", mode.String())))
	}
	return ctx, r
}

// endAcquire records an acquisition that startAcquire opened. One that
// began while telemetry was off is not recorded.
func (t *telemetry) endAcquire(ctx context.Context, r acquireRecord, key string, mode driver.Mode, l *lease, err error) {
	if r.started.IsZero() {
		return
	}
	waited := time.Since(r.started)
	outcome := outcomeOf(err)
	if t.metered() {
		t.acquire.Record(ctx, waited.Seconds(), t.acquireAttrs[acquireOutcome{mode, outcome}])
	}
	if l != nil && t.log.Enabled(ctx, slog.LevelDebug) {
		t.log.LogAttrs(ctx, slog.LevelDebug, "dlock: acquired", slog.String("key", key),
			slog.String("mode", mode.String()), slog.Uint64("token", l.Token()), slog.Duration("waited", waited))
	}
	span := r.span
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("dlock.outcome", outcome), attribute.Float64("dlock.wait_seconds", waited.Seconds()))
	if l != nil {
		span.SetAttributes(attribute.Int64("dlock.token", int64(l.Token())))
	} else if outcome == "error" {
		span.RecordError(err)
	}
	span.End()
}

// heldFrom counts l as held, when metrics are on; it reports whether it
// did, so that ended takes back (and records the hold of) only what was
// counted.
func (t *telemetry) heldFrom(l *lease) bool {
	if !t.metered() {
		return false
	}
	t.held.Add(context.Background(), 1, t.modeAttrs[l.mode])
	return true
}

// waiting counts a waiter in mode, when metrics are on; it reports whether
// it did, for waited.
func (t *telemetry) waiting(ctx context.Context, mode driver.Mode) bool {
	if !t.metered() {
		return false
	}
	t.waiters.Add(ctx, 1, t.modeAttrs[mode])
	return true
}

// waited takes back a waiter in mode that waiting counted.
func (t *telemetry) waited(ctx context.Context, mode driver.Mode, counted bool) {
	if counted {
		t.waiters.Add(ctx, -1, t.modeAttrs[mode])
	}
}

// ended records the end of a lease held since acquired; reason is empty
// unless it was lost.
func (t *telemetry) ended(l *lease, reason string, err error) {
	ctx := context.Background()
	if l.counted {
		t.held.Add(ctx, -1, t.modeAttrs[l.mode])
		t.hold.Record(ctx, time.Since(l.acquired).Seconds(), t.modeAttrs[l.mode])
	}
	if reason == "" {
		if !t.log.Enabled(ctx, slog.LevelDebug) {
			return
		}
		t.log.LogAttrs(ctx, slog.LevelDebug, "dlock: released", slog.String("key", l.m.key), slog.Uint64("token", l.Token()))
		return
	}
	t.losses.Add(ctx, 1, t.lossAttrs[reason])
	t.log.LogAttrs(ctx, slog.LevelWarn, "dlock: lock lost", slog.String("key", l.m.key),
		slog.Uint64("token", l.Token()), slog.String("reason", reason), slog.Any("error", err))
}

// renewed records one lease's renewal outcome.
func (t *telemetry) renewed(l *lease, outcome string, err error) {
	if t.metered() {
		t.renewals.Add(context.Background(), 1, t.renewAttrs[outcome])
	}
	if outcome == "failed" {
		t.log.LogAttrs(context.Background(), slog.LevelInfo, "dlock: renewal failed; lease uncertain until renewed",
			slog.String("key", l.m.key), slog.Uint64("token", l.Token()), slog.Any("error", err))
	}
}

// waitedThrough records a transient error that a waiting acquisition of key
// rides out; failures counts its failed attempts in a row, this one included.
// It logs at Warn, so that a backend that stays unreachable (or an address
// that is wrong) shows while Lock keeps waiting.
func (t *telemetry) waitedThrough(ctx context.Context, key string, mode driver.Mode, failures int, err error) {
	t.waitErrors.Add(ctx, 1, t.modeAttrs[mode])
	t.log.LogAttrs(ctx, slog.LevelWarn, "dlock: backend unavailable; still waiting for the lock",
		slog.String("key", key), slog.String("mode", mode.String()), slog.Int("failures", failures), slog.Any("error", err))
}

// subscribeFailed records that subscribing to key's releases failed: the
// waiter polls instead, and subscribes again later when again is set.
func (t *telemetry) subscribeFailed(ctx context.Context, key string, again bool, err error) {
	t.log.LogAttrs(ctx, slog.LevelWarn, "dlock: subscribing to releases failed; polling instead",
		slog.String("key", key), slog.Bool("retrying", again), slog.Any("error", err))
}

// lostAtUnlock records a loss that l's Unlock found: the backend refused
// the release (or transfer) before l's deadline, the lock gone unnoticed.
func (t *telemetry) lostAtUnlock(l *lease, err error) {
	ctx := context.Background()
	t.losses.Add(ctx, 1, t.lossAttrs["refused"])
	t.log.LogAttrs(ctx, slog.LevelWarn, "dlock: lock lost", slog.String("key", l.m.key),
		slog.Uint64("token", l.Token()), slog.String("reason", "refused"), slog.Any("error", err))
}
