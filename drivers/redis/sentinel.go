package redis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
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

// openSentinel is the dlock.OpenFunc of the Sentinel schemes: a Driver that
// owns a go-redis failover client, once the master the sentinels name
// answers.
var openSentinel = ownedOpener(parseSentinelURL, func(opt *goredis.FailoverOptions) goredis.UniversalClient {
	return goredis.NewFailoverClient(opt)
}, askSentinels)

// askSentinels asks the sentinels, one after the other, for the master's
// address, on the caller's goroutine and bounded by ctx: go-redis's
// failover client asks them while it dials, in a goroutine of its pool that
// neither ctx nor Close ends, so a silent sentinel would keep that
// goroutine for seconds after a failed Open. Once one has answered, the
// failover client's own question is answered at once.
func askSentinels(ctx context.Context, u *url.URL, opt *goredis.FailoverOptions) error {
	var errs []error
	for _, addr := range opt.SentinelAddrs {
		sc := goredis.NewSentinelClient(&goredis.Options{
			Addr: addr, Username: opt.SentinelUsername, Password: opt.SentinelPassword,
			TLSConfig: opt.TLSConfig, DialTimeout: opt.DialTimeout, ReadTimeout: opt.ReadTimeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, MaintNotificationsConfig: maintOff(),
		})
		// As in pingOwned: closing the client ends a read that only ctx's
		// deadline would otherwise bound.
		stop := context.AfterFunc(ctx, func() { _ = sc.Close() })
		_, err := sc.GetMasterAddrByName(ctx, opt.MasterName).Result()
		if !stop() {
			return ctx.Err()
		}
		_ = sc.Close()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, goredis.Nil):
			err = fmt.Errorf("monitors no master named %q", opt.MasterName)
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %w", addr, err))
	}
	return fmt.Errorf("redis: %s: no sentinel named the master: %w", urlparams.Display(u), errors.Join(errs...))
}

// parseSentinelURL checks u and turns it into go-redis failover options and
// the driver's own. Its errors wrap dlock.ErrInvalidURL and never contain
// the passwords.
//
// The URL's credentials are the master's (and its replicas'), as on every
// other Redis URL; the sentinels' are parameters of their own, since
// sentinels are often run without a password when the data nodes have one.
func parseSentinelURL(u *url.URL) (*goredis.FailoverOptions, options, error) {
	scheme, nodeScheme, err := nodeSchemeOf(u, SchemeSentinel, SchemeSentinelTLS, "[[user]:password@]sentinel1[:port],sentinel2[:port],.../master[/db]")
	if err != nil {
		return nil, options{}, err
	}
	q := u.Query()
	name, db, err := sentinelPath(scheme, u.Path, q)
	if err != nil {
		return nil, options{}, urlparams.Invalid(u, "%v", err)
	}
	sentinels := urlHosts(u, q)
	if len(sentinels) == 0 {
		err = errors.New("no sentinels: list them as host1:port,host2:port,... (or addr=host:port parameters)")
	} else {
		err = checkNodes(sentinels, nodeScheme, DefaultSentinelPort, "sentinel")
	}
	var sentinelUser *url.Userinfo
	if err == nil {
		sentinelUser, err = sentinelCredentials(q)
	}
	if err != nil {
		return nil, options{}, urlparams.Invalid(u, "%v", err)
	}
	// The master's options are those of a single server: key_prefix, the
	// replica acknowledgements, the database and go-redis's own.
	master := url.URL{Scheme: nodeScheme, User: u.User, Host: sentinels[0], Path: "/" + db, RawQuery: q.Encode()}
	_, o, err := parseURL(&master)
	if err != nil { // parseURL's message is redacted already
		return nil, o, urlparams.Invalid(u, "%s", strings.TrimPrefix(err.Error(), dlock.ErrInvalidURL.Error()+": "))
	}
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
		return nil, o, urlparams.Invalid(u, "%v", err)
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

// sentinelPath returns the master's name and the database ("" for the
// default) of a Sentinel URL of scheme from its path, "/name[/db]", or from
// go-redis's master_name parameter, which it takes out of q.
func sentinelPath(scheme, path string, q url.Values) (name, db string, err error) {
	name, db, _ = strings.Cut(strings.TrimPrefix(path, "/"), "/")
	alt, ok, err := urlparams.Take(q, masterNameParam)
	switch {
	case err != nil:
		return "", "", err
	case ok && name != "":
		return "", "", fmt.Errorf("the master is named twice: by the path and by %s", masterNameParam)
	case ok:
		name = alt
	}
	if name == "" {
		return "", "", fmt.Errorf("no master name: give the name the sentinels monitor it under as the path, as in %s://host:%s/mymaster/0", scheme, DefaultSentinelPort)
	}
	return name, db, nil
}

// sentinelCredentials takes the sentinels' user and password out of q:
// nil when q has neither.
func sentinelCredentials(q url.Values) (*url.Userinfo, error) {
	user, _, err := urlparams.Take(q, sentinelUserParam)
	if err != nil {
		return nil, err
	}
	password, ok, err := urlparams.Take(q, sentinelPasswordParam)
	switch {
	case err != nil:
		return nil, err
	case ok:
		return url.UserPassword(user, password), nil
	case user != "":
		return nil, fmt.Errorf("%s without %s", sentinelUserParam, sentinelPasswordParam)
	}
	return nil, nil
}
