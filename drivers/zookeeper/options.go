package zookeeper

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/driveropt"
)

// DefaultBasePath is the node under which a Driver keeps its locks unless
// [WithBasePath] (or the URL's path) names another.
const DefaultBasePath = "/dlock"

// DefaultSessionTTL is the session TTL (ZooKeeper's session timeout) that
// [Dial] and dlock.Open ask for unless [WithSessionTTL] (or the URL's
// session_ttl) says otherwise. The server may grant another (see "Sessions and TTLs" in the
// package documentation).
const DefaultSessionTTL = 10 * time.Second

// Option configures a Driver made by [New] or [Dial]. An Option returns an
// error wrapping dlock.ErrInvalidOption when given a value it does not
// accept.
type Option func(*options) error

type options struct {
	base       string
	acl        []zk.ACL
	sessionTTL time.Duration
}

func defaultOptions() options {
	return options{
		base:       DefaultBasePath,
		acl:        zk.WorldACL(zk.PermAll),
		sessionTTL: DefaultSessionTTL,
	}
}

// apply applies opts to o, in order.
func (o *options) apply(opts []Option) error { return driveropt.Apply(o, opts) }

// WithBasePath sets the node under which the Driver keeps its locks (see
// "Keys" in the package documentation): an absolute path such as
// "/apps/billing/locks", created (with its parents) on first use. It must
// not be "/" or inside /zookeeper. Drivers contend for the same lock only
// when they use the same base path. Default: [DefaultBasePath] ("/dlock").
func WithBasePath(path string) Option {
	return driveropt.Checked("zookeeper", checkBase(path), func(o *options) { o.base = path })
}

// WithACL sets the ACL of the nodes the Driver creates. The session must be
// allowed to create, read and delete children of the base path, and to read,
// write and delete the lock nodes of other clients of the same base path
// (release of a reentrant lock may fall to any of its holders). Default:
// world:anyone with every permission.
func WithACL(acl []zk.ACL) Option {
	return func(o *options) error {
		if len(acl) == 0 {
			return fmt.Errorf("%w: zookeeper: empty ACL", dlock.ErrInvalidOption)
		}
		o.acl = acl
		return nil
	}
}

// WithSessionTTL sets the session TTL, which ZooKeeper calls the session
// timeout, that [Dial] asks the server for; the server grants a value between its minSessionTimeout and
// maxSessionTimeout (by default 2 and 20 ticks), and the Driver uses the
// granted one. It bounds how long a crashed holder keeps its locks, and the
// TTLs the Driver accepts (see "Sessions and TTLs" in the package
// documentation). Only [Dial] and dlock.Open use it: [New] is told the
// timeout of the caller's session directly. Default: [DefaultSessionTTL]
// (10 s).
func WithSessionTTL(d time.Duration) Option {
	return func(o *options) error {
		if d < 10*time.Millisecond || d > time.Duration(1<<31-1)*time.Millisecond {
			return fmt.Errorf("%w: zookeeper: session TTL %v is outside 10 ms to 24 days", dlock.ErrInvalidOption, d)
		}
		o.sessionTTL = d
		return nil
	}
}

// Reasons for losses and failures that the Driver reports. Leases report the
// first two through dlock's Lease.Err (wrapped in dlock.ErrLockLost); the
// third is what a renewal returns while the client is cut off.
var (
	// ErrSessionExpired: the ZooKeeper session that held the lock ended (it
	// expired, or the ensemble closed it), and its ephemeral nodes with it.
	ErrSessionExpired = errors.New("zookeeper: session expired, its lock nodes are gone")

	// ErrSessionClosed: the Driver was closed while it held the lock; its
	// session was closed (or, over a caller's connection, its lock nodes
	// deleted), so the lock is free for others.
	ErrSessionClosed = errors.New("zookeeper: driver closed while holding the lock")

	// ErrDisconnected: the client is not connected to the ensemble at the
	// moment. The session may still be alive: the lock is uncertain, not
	// lost, until the lease's validity (at most one session timeout) passes.
	ErrDisconnected = errors.New("zookeeper: disconnected from the ensemble, the session may still be alive")
)

// errLapsed is the reason a lease gives when it went unconfirmed past its
// validity: the Driver then removes its node, as a TTL lock would expire.
var errLapsed = errors.New("zookeeper: lease not renewed within its validity; its node was removed")
