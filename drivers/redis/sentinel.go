package redis

import (
	"context"
	"net/url"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/urlparams"
)

// The URL schemes of a master found through Redis Sentinel.
const (
	// SchemeSentinel names the sentinels over plain TCP, and the master by
	// the name they monitor it under:
	// "redis+sentinel://host1:26379,host2:26379/mymaster/0".
	SchemeSentinel = "redis+sentinel"
	// SchemeSentinelTLS is the same over TLS, to the sentinels and the
	// master alike: "rediss+sentinel://...".
	SchemeSentinelTLS = "rediss+sentinel"
)

// DefaultSentinelPort is the port of a sentinel address that has none.
const DefaultSentinelPort = "26379"

// Query parameters of Sentinel URLs, beside go-redis's, key_prefix and the
// replica acknowledgements.
const (
	sentinelUserParam     = "sentinel_username" // the sentinels' ACL user
	sentinelPasswordParam = "sentinel_password" // the sentinels' requirepass
	masterNameParam       = "master_name"       // go-redis's spelling of the path's name
)

func init() {
	dlock.Register(SchemeSentinel, openSentinel)
	dlock.Register(SchemeSentinelTLS, openSentinel)
}

// openSentinel is the dlock.OpenFunc of the Sentinel schemes.
var openSentinel = urlparams.Opener(connectSentinel)

// connectSentinel opens the Sentinel schemes (see urlparams.Opener): it
// makes a go-redis failover client from u, checks that the master the
// sentinels name answers, and returns a Driver that owns the client.
func connectSentinel(ctx context.Context, u *url.URL, _ time.Duration) (driver.Driver, error) {
	opt, o, err := parseSentinelURL(u)
	if err != nil {
		return nil, err
	}
	return openOwned(ctx, u, goredis.NewFailoverClient(opt), o)
}

// parseSentinelURL checks u and turns it into go-redis failover options and
// the driver's own. Its errors wrap dlock.ErrInvalidURL and never contain
// the passwords.
//
// The URL's credentials are the master's (and its replicas'), as on every
// other Redis URL; the sentinels' are parameters of their own, since
// sentinels are often run without a password when the data nodes have one.
func parseSentinelURL(u *url.URL) (*goredis.FailoverOptions, options, error) {
	o := defaultOptions()
	bad := func(format string, args ...any) (*goredis.FailoverOptions, options, error) {
		return nil, o, urlparams.Invalid(u, format, args...)
	}
	scheme := strings.ToLower(u.Scheme)
	nodeScheme := Scheme
	switch scheme {
	case SchemeSentinel:
	case SchemeSentinelTLS:
		nodeScheme = SchemeTLS
	default:
		return bad("scheme %q: want %s:// or %s://", u.Scheme, SchemeSentinel, SchemeSentinelTLS)
	}
	if u.Opaque != "" {
		return bad("want %s://[[user]:password@]sentinel1[:port],sentinel2[:port],.../master[/db]", scheme)
	}
	q := u.Query()
	name, db, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if alt, ok, err := urlparams.Take(q, masterNameParam); err != nil {
		return bad("%v", err)
	} else if ok && name != "" {
		return bad("the master is named twice: by the path and by %s", masterNameParam)
	} else if ok {
		name = alt
	}
	if name == "" {
		return bad("no master name: give the name the sentinels monitor it under as the path, as in %s://host:%s/mymaster/0", scheme, DefaultSentinelPort)
	}
	sentinels := urlHosts(u, q)
	if len(sentinels) == 0 {
		return bad("no sentinels: list them as host1:port,host2:port,... (or addr=host:port parameters)")
	}
	if err := checkNodes(sentinels, nodeScheme, DefaultSentinelPort, "sentinel"); err != nil {
		return bad("%v", err)
	}
	var sentinelUser *url.Userinfo
	user, _, err := urlparams.Take(q, sentinelUserParam)
	if err != nil {
		return bad("%v", err)
	}
	if password, ok, err := urlparams.Take(q, sentinelPasswordParam); err != nil {
		return bad("%v", err)
	} else if ok {
		sentinelUser = url.UserPassword(user, password)
	} else if user != "" {
		return bad("%s without %s", sentinelUserParam, sentinelPasswordParam)
	}
	// The master's options are those of a single server: key_prefix, the
	// replica acknowledgements, the database and go-redis's own.
	master := url.URL{Scheme: nodeScheme, User: u.User, Host: sentinels[0], Path: "/" + db, RawQuery: q.Encode()}
	_, mo, err := parseURL(&master)
	if err != nil { // parseURL's message is redacted already
		return bad("%s", strings.TrimPrefix(err.Error(), dlock.ErrInvalidURL.Error()+": "))
	}
	o.prefix, o.acks = mo.prefix, mo.acks
	// go-redis's own parser then reads the same options for a failover
	// client: userinfo is the sentinels' there, and the master's
	// credentials are parameters.
	fq := url.Values{}
	for k, v := range q {
		if k != prefixParam && k != acksParam && k != ackTimeoutParam {
			fq[k] = v
		}
	}
	fq.Set(masterNameParam, name)
	fq[addrParam] = sentinels[1:]
	if u.User != nil {
		fq.Set("username", u.User.Username())
		if p, ok := u.User.Password(); ok {
			fq.Set("password", p)
		}
	}
	failover := url.URL{Scheme: nodeScheme, User: sentinelUser, Host: sentinels[0], Path: "/" + db, RawQuery: fq.Encode()}
	opt, err := goredis.ParseFailoverURL(failover.String())
	if err != nil {
		return bad("%v", err)
	}
	if opt.TLSConfig != nil {
		// go-redis names the first sentinel as the server of every TLS
		// connection; left empty, each connection checks the certificate
		// of the host it dials, sentinel or master.
		opt.TLSConfig.ServerName = ""
	}
	// As for a single server: contexts bound the commands they send.
	opt.ContextTimeoutEnabled = true
	return opt, o, nil
}
