package hazelcast

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hazelcast/hazelcast-go-client"
	"github.com/hazelcast/hazelcast-go-client/logger"
	"github.com/hazelcast/hazelcast-go-client/types"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// Scheme is the URL scheme this package registers with dlock.Open:
// "hazelcast://member1:5701,member2:5701/cluster-name".
const Scheme = "hazelcast"

// DefaultPort is the port of a member given without one.
const DefaultPort = 5701

// DefaultCluster is the cluster name of a URL without a path, Hazelcast's
// own default.
const DefaultCluster = "dev"

// The URL's query options, besides connect_timeout, which
// urlparams.Opener takes. Every other one is refused, so that a typo does
// not pass unnoticed.
const (
	paramMap              = "map"
	paramWaitSlice        = "wait_slice"
	paramUnisocket        = "unisocket"
	paramTLS              = "tls"
	paramHeartbeatTimeout = "heartbeat_timeout"
	paramLogLevel         = "log_level"
)

var params = []string{paramMap, paramWaitSlice, paramUnisocket, paramTLS, paramHeartbeatTimeout, paramLogLevel}

// defaultLogLevel passes the client library's errors, and nothing less, to
// slog (at Debug: see log.go): dlock reports what matters to its caller
// through errors and lost leases.
const defaultLogLevel = logger.ErrorLevel

var logLevels = []logger.Level{logger.OffLevel, logger.FatalLevel, logger.ErrorLevel, logger.WarnLevel, logger.InfoLevel, logger.DebugLevel, logger.TraceLevel}

func init() { dlock.Register(Scheme, open) }

// open is the dlock.OpenFunc of the scheme.
var open = urlparams.Opener(urlparams.Parsed(parseURL, start))

// start connects the scheme (see urlparams.Opener): it starts a client from
// u, waits until it is connected (bounded by ctx, within which the client
// retries its first connection), and returns a Driver that owns it. A
// connect_timeout also bounds each connection attempt of the client's, then
// and later (the client's ConnectionTimeout).
func start(ctx context.Context, u *url.URL, cfg hazelcast.Config, o options, timeout time.Duration) (driver.Driver, error) {
	return startWith(ctx, u, cfg, o, timeout, nil)
}

// startWith is start, with configure (when not nil) amending the client's
// configuration before the client starts: the doctor listens to the
// membership events with it.
func startWith(ctx context.Context, u *url.URL, cfg hazelcast.Config, o options, timeout time.Duration, configure func(*hazelcast.Config)) (driver.Driver, error) {
	if timeout > 0 {
		cfg.Cluster.Network.ConnectionTimeout = types.Duration(timeout)
	}
	cfg.Logger = newLogger(cfg.Logger.Level)
	// Listen before the client starts, so that no lifecycle event is missed.
	s := newSession()
	cfg.AddLifecycleListener(s.onLifecycle)
	ng := newNagle(cfg.Cluster.Network.Addresses)
	cfg.AddMembershipListener(ng.onMember)
	if configure != nil {
		configure(&cfg)
	}
	client, err := hazelcast.StartNewClientWithConfig(ctx, cfg)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("hazelcast: connect to %s: %w", urlparams.Display(u), err)
	}
	d, err := connect(ctx, client, o, s)
	if err != nil {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = client.Shutdown(shutdown)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
	d.owned = true
	d.nagle = ng
	ng.now()
	return d, nil
}

// parseURL turns u into a client configuration and the driver's options. Its
// errors wrap dlock.ErrInvalidURL and never contain the password.
func parseURL(u *url.URL) (hazelcast.Config, options, error) {
	cfg := hazelcast.NewConfig()
	o := defaultOptions()
	bad := func(format string, args ...any) (hazelcast.Config, options, error) {
		return cfg, o, urlparams.Invalid(u, format, args...)
	}
	if !strings.EqualFold(u.Scheme, Scheme) {
		return bad("scheme %q: want %s://", u.Scheme, Scheme)
	}
	if u.Opaque != "" {
		return bad("want %s://[user:password@]host[:port][,host[:port]...][/cluster]", Scheme)
	}
	members, err := parseMembers(u.Host)
	if err != nil {
		return bad("%v", err)
	}
	cfg.Cluster.Network.SetAddresses(members...)

	cluster := strings.TrimPrefix(u.Path, "/")
	if strings.Contains(cluster, "/") {
		return bad("the path is the cluster name, one segment: got %q", u.Path)
	}
	if cluster == "" {
		cluster = DefaultCluster
	}
	cfg.Cluster.Name = cluster

	if u.User != nil {
		cfg.Cluster.Security.Credentials.Username = u.User.Username()
		cfg.Cluster.Security.Credentials.Password, _ = u.User.Password()
	}

	cfg.Logger.Level = defaultLogLevel
	q := u.Query()
	for _, name := range params {
		v, ok, err := urlparams.Take(q, name)
		if err != nil {
			return bad("%v", err)
		}
		if !ok {
			continue
		}
		switch name {
		case paramMap:
			err = WithMap(v)(&o)
		case paramWaitSlice:
			var d time.Duration
			if d, err = time.ParseDuration(v); err == nil {
				err = WithWaitSlice(d)(&o)
			}
		case paramUnisocket:
			cfg.Cluster.Unisocket, err = strconv.ParseBool(v)
		case paramTLS:
			cfg.Cluster.Network.SSL.Enabled, err = strconv.ParseBool(v)
		case paramHeartbeatTimeout:
			cfg.Cluster.HeartbeatTimeout, err = positiveDuration(v)
		case paramLogLevel:
			if i := slices.Index(logLevels, logger.Level(v)); i >= 0 {
				cfg.Logger.Level = logLevels[i]
			} else {
				err = fmt.Errorf("want one of %v", logLevels)
			}
		}
		if err != nil {
			return bad("option %s=%q: %v", name, v, err)
		}
	}
	if err := urlparams.Unknown(q, params...); err != nil {
		return bad("%v", err)
	}
	return cfg, o, nil
}

// parseMembers splits a URL's host part into member addresses, each
// host:port, with DefaultPort where the port is missing.
func parseMembers(hosts string) ([]string, error) {
	if hosts == "" {
		return nil, fmt.Errorf("no member address; want %s://host[:port][,host[:port]...]/cluster", Scheme)
	}
	members, err := urlparams.Hosts(hosts, strconv.Itoa(DefaultPort))
	if err != nil {
		return nil, fmt.Errorf("member %w", err)
	}
	return members, nil
}

func positiveDuration(v string) (types.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d <= 0 {
		err = fmt.Errorf("must be positive")
	}
	return types.Duration(d), err
}
