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

// ownedOpener returns the dlock.OpenFunc of a kind of Redis URL whose
// Driver owns one go-redis client (see urlparams.Opener): parse turns the
// URL into the client's options O and the driver's own, newClient makes the
// client, and the Driver is returned once the client answers (openOwned).
// Each of checks, if any, runs first, bounded by Open's context.
func ownedOpener[O any](parse func(*url.URL) (O, options, error), newClient func(O) goredis.UniversalClient, checks ...func(context.Context, *url.URL, O) error) dlock.OpenFunc {
	return urlparams.Opener(func(ctx context.Context, u *url.URL, _ time.Duration) (driver.Driver, error) {
		opt, o, err := parse(u)
		for _, check := range checks {
			if err == nil {
				err = check(ctx, u, opt)
			}
		}
		if err != nil {
			return nil, err
		}
		return openOwned(ctx, u, newClient(opt), o)
	})
}

// nodeSchemeOf checks that u is a hierarchical URL of the scheme plain or
// tls (in any case), and returns that scheme in lower case and the scheme
// of a single server of the same transport: Scheme or SchemeTLS. form is
// the URL's shape after "scheme://", for the error about an opaque URL.
// Its errors wrap dlock.ErrInvalidURL.
func nodeSchemeOf(u *url.URL, plain, tls, form string) (scheme, nodeScheme string, err error) {
	scheme = strings.ToLower(u.Scheme)
	switch {
	case scheme != plain && scheme != tls:
		return "", "", urlparams.Invalid(u, "scheme %q: want %s:// or %s://", u.Scheme, plain, tls)
	case u.Opaque != "":
		return "", "", urlparams.Invalid(u, "want %s://%s", scheme, form)
	case scheme == tls:
		return scheme, SchemeTLS, nil
	}
	return scheme, Scheme, nil
}
