// Package redis is dlock's driver for a single Redis server (5.0 or later;
// tested with 7.0).
//
// Importing it registers the URL schemes "redis" and "rediss" (TLS) with
// dlock.Open:
//
//	import _ "github.com/dlock-go/dlock/drivers/redis"
//
//	client, err := dlock.Open(ctx, "redis://localhost:6379/0")
//
// An application that already has a go-redis client passes it to [New]
// instead, and keeps owning it:
//
//	rdb := goredis.NewClient(&goredis.Options{Addr: "localhost:6379"})
//	d, err := redis.New(rdb)
//	...
//	client, err := dlock.New(d)
//
// Every operation is one Lua script (EVALSHA, falling back to EVAL), so each
// is atomic on the server and costs one round trip.
//
// # Capabilities
//
// Exclusive locks, fencing tokens and release notifications
// (driver.Notifier, by Redis pub/sub), and the backend's key and TTL rules
// (driver.Validator). Read-write locks and reentrant locks are not
// implemented: the driver does not implement driver.Featurer, so dlock
// refuses them with an error wrapping errors.ErrUnsupported. There is no
// server-side waiting queue (driver.Blocker): waiters are woken by the
// release's PUBLISH and retry, and the core polls beside the notifications,
// so a lost message costs latency, never correctness. A lock that expires
// instead of being released publishes nothing; the core's polling never
// sleeps past the holder's remaining TTL, which TryAcquire reports.
//
// Each Driver keeps one pub/sub connection, opened on the first Subscribe and
// shared by every key it watches; it subscribes a key's channel for its first
// waiter and unsubscribes it 2 s after the last one left, unless a waiter came
// back meanwhile (the core subscribes for every Lock call, so a hot key would
// otherwise cost a SUBSCRIBE and an UNSUBSCRIBE per Lock). A channel that
// (re)subscribes also wakes its waiters, once the server confirms it: a
// release that happened before the subscription took effect is then found by
// the retry instead of being missed, so Subscribe never has to wait for the
// confirmation. The connection is pinged when idle and re-established (and
// its channels resubscribed) when it breaks; one that dies silently, with no
// reset from the peer, is found by TCP keep-alive, and waiters poll meanwhile.
//
// # Guarantees
//
// A lock is the key written by SET NX PX with a value of 128 random bits (the
// request ID); Extend and Release act only when that value is still there, so
// a holder whose lease expired never extends or deletes the next holder's
// lock. TTLs are rounded up to whole milliseconds (Redis PX), so a lease is
// never shorter than asked.
//
// Fencing tokens come from a counter key per lock, stored without expiry and
// advanced in the same script as the grant, to max(counter+1, the server's
// clock in microseconds since 1970). They therefore strictly increase per
// grant for as long as Redis keeps the counter, and keep increasing across a
// restart that lost the data (no persistence, FLUSHALL, an evicted counter
// key) as long as the server's clock did not step back meanwhile. Tokens are
// exact integers below 2^53 (until the year 2255); a counter that cannot be
// advanced exactly refuses new grants with an error. Because the counter never
// expires, every distinct key ever locked leaves one small string on the
// server: mind that when keys are made per request rather than per resource.
// With an allkeys-* eviction policy Redis may evict counters; tokens then
// rise by the clock alone, as after a restart.
//
// The lock lives on one server. If that server fails over to a replica,
// replication is asynchronous: a grant or a counter advance that had not
// reached the replica is lost, so a second client may be granted the same
// lock while the first still holds it, with a token that the replica's clock
// keeps from going backwards only if it is not behind the old primary's.
// Restarts without persistence free every lock at once, and holders learn of
// it at their next renewal. Use several independent servers (RedLock, a
// later version of this driver) or a consensus backend when that window
// matters, and check fencing tokens at the resource either way.
//
// # Keys
//
// A dlock key K is a byte string (the core limits it to 1 to 1024 bytes; this
// driver accepts every such key). The driver stores one lock under three
// Redis names, whose common hash tag keeps them in one Cluster hash slot:
//
//	PREFIX{T}           the lock: a string holding the holder's request ID
//	PREFIX{T}:fence     the fencing counter
//	PREFIX{T}:released  the pub/sub channel the release publishes on
//
// where PREFIX is the key prefix ("dlock:" unless [WithKeyPrefix] says
// otherwise) and T is K with every '%', '{' and '}' byte replaced by "%25",
// "%7B" and "%7D". All other bytes, including CR, LF, NUL and invalid UTF-8,
// are kept as they are: Redis names are binary safe. The escape makes T free
// of braces, so that "{T}" is exactly the hash tag whatever K contains, and it
// is injective (each escaped byte becomes a sequence starting with '%', and
// '%' itself is escaped), so two different keys never share a name. Keys
// without those three bytes appear unchanged, which keeps them readable in
// redis-cli: "reports/nightly" is stored as "dlock:{reports/nightly}".
//
// # URLs
//
//	redis://[[user]:password@]host[:port][/db][?option=value&...]
//	rediss://...   (TLS)
//
// The URL is parsed by go-redis's ParseURL, so its query options (dial_timeout,
// read_timeout, pool_size, max_retries, skip_verify, ...) apply. The host
// defaults to localhost and the port to 6379; an IPv6 address must be in
// brackets ("redis://[::1]:6379"). One option is this driver's own:
// key_prefix sets the prefix of every Redis name (default "dlock:"), as
// [WithKeyPrefix] does. Open pings the server once, bounded by its context,
// so that a wrong address or password fails there. The client it makes honours
// context deadlines (go-redis's ContextTimeoutEnabled), and the Driver closes
// it on Close. Errors about the URL wrap dlock.ErrInvalidURL and never contain
// the password.
package redis
