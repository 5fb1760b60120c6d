// Package hazelcast is dlock's driver for a Hazelcast cluster (5.x members,
// the open-source edition), over the entry locks of a distributed map
// (IMap.lock and its variants), with hazelcast-go-client v1.6.
//
// Importing it registers the URL scheme "hazelcast" with dlock.Open:
//
//	import _ "github.com/dlock-go/dlock/drivers/hazelcast"
//
//	client, err := dlock.Open(ctx, "hazelcast://member1:5701,member2:5701/prod")
//
// An application that already has a Hazelcast client passes it to [New]
// instead, and keeps owning it:
//
//	import hzlock "github.com/dlock-go/dlock/drivers/hazelcast"
//
//	hz, err := hazelcast.StartNewClientWithConfig(ctx, cfg)
//	...
//	d, err := hzlock.New(ctx, hz)
//	...
//	client, err := dlock.New(d)
//
// The driver is tested against a Hazelcast 5.5.0 member (the open-source jar
// from Maven Central, in a container built by testenv/setup): the conformance
// suite with its fault cases, and a 3-member cluster test of what
// "What map locks do not promise" below says about partitions and member
// loss.
//
// # Capabilities
//
// Capabilities ([Driver.Capabilities]): Blocking, BatchExtender, Inspector,
// MinTTL 2 s. That is: exclusive locks with fencing tokens (see Guarantees),
// waiting on the member (Blocking), batched renewal (BatchExtender: Extends
// run many at a time), inspection of whether a lock is held and of its
// latest fencing token (Inspector; see Inspection), and TTLs of at least
// [MinTTL], 2 s (MinTTL, with the reason in TTLReason). Leases report their
// loss on disconnection (Lease.OnLoss). Being Blocking, the driver has no
// handoff inside a Client (no Transferer, no TokenBlock). It stores no
// value with a hold (no Values), so dlock's elections campaign and resign
// over it, but their Leader and Observe return an error wrapping
// errors.ErrUnsupported: see Inspection for why.
//
// Lock waits in the member's own queue of lock requests: it asks for the
// lock with tryLock(key, wait, lease), where wait is a slice of at most
// [DefaultWaitSlice] (250 ms; [WithWaitSlice]), half of what the lease is
// sure to last, and what is left of the caller's context, and asks again
// when a slice ends without the lock. Slices exist because cancelling a Go
// context sends nothing to the member: a lock request already queued there
// can be granted after its caller gave up. A Lock whose context ends
// therefore waits for the answer to the slice under way (at most a slice,
// plus a round trip) and releases a lock granted meanwhile before it
// returns the context's error; nothing is left queued or held. A request
// re-enters the member's queue at each slice, so waiters of different
// processes are not served first come, first served (the waiters of one dlock
// client are: the core queues them, and only the first asks the member).
// While the client is disconnected, Lock waits for it to reconnect and
// TryLock fails at once.
//
// Read-write locks and reentrant locks are not implemented; dlock refuses
// them with an error wrapping errors.ErrUnsupported. Map locks have no shared
// mode. They are reentrant, but per lock owner, and a lock owner is a lock
// context of one client (the client's UUID and a lock ID): dlock's reentrant
// locks (dlock.WithOwner) let the same owner re-enter from any client, which
// two Hazelcast clients cannot share.
//
// Costs: a grant is two round trips of two requests each (the tryLock beside
// a read of the fencing counter, then a second entry beside the counter's
// compare-and-set); a refused TryLock is one round trip of two requests; a
// renewal is three round trips (four requests); a release is one (two
// requests). Holding n locks with TTL t costs about 12n/t requests per second
// in renewals.
//
// hazelcast-go-client v1.6.0 turns Nagle's algorithm on for its
// connections, so a request the client writes while another of its requests
// waits unanswered in a member's lock queue can be held back until the
// member's delayed acknowledgement, about 40 ms: a handoff between two Locks
// of one dlock Client took 43.7 ms that way. A Driver made from a URL owns its
// client and turns the algorithm off on the client's connections (it
// finds them among the process's sockets, on Linux; see nagle.go), which
// brought that handoff under a millisecond. A Driver over a caller's client
// ([New]) leaves the client as the caller made it; such a client can be
// given the same treatment only by its owner.
//
// # Guarantees
//
// Ownership. Every acquisition locks with a lock context of its own
// (hazelcast.NewLockContext), used for that lock and nothing else, and every
// later call on the lock (renew, release) uses it again. The client's default
// lock context (a context without a lock ID, shared by every caller of the
// client) is never used for a lock, so no other caller of the same client can
// unlock, re-enter or extend a dlock lock. Unlocks are owner-checked by the
// member: one by an owner that does not hold the lock is refused, so a lease
// that expired never releases the next holder's lock.
//
// Leases. A lock is taken with a lease of the TTL, rounded up to whole
// milliseconds, after which the member frees it by itself. Members schedule
// lease ends in groups of whole seconds, per map and partition, so a lock is
// freed up to about a second before its lease ends and up to two seconds
// after (about one when every client's TTL is whole seconds). The driver
// therefore promises the core the TTL less one second (Lease.Validity), which
// is why TTLs must be at least 2 s, and a lock whose holder vanished may stay
// taken for up to two seconds beyond its TTL.
//
// Renewal. Hazelcast cannot extend a lease in place; entering the lock again
// (it is reentrant) sets the lease anew from now. But an owner whose lock has
// lapsed (its lease ran out, or an operator force-unlocked it) and that
// nobody took since gets it back by entering it, as if nothing had happened.
// So a lease holds its lock twice, and Extend enters once, leaves twice, and
// enters once more: a lapsed lock is found (the second leave is refused),
// left free as it was, and reported with driver.ErrNotHeld, and a lock
// another owner holds refuses the first entry. An Extend that takes longer
// than the lease is sure to last is reported as a loss, since the lease may
// have run out within it. Release leaves twice.
//
// Calls whose outcome matters are not abandoned when the caller's context
// ends: each is bounded by the TTL (at least 1 s) instead, and the caller's
// context is checked between calls. A call that gets no answer in that time
// leaves the lease's state unknown: its next Extend reports it lost, and its
// Release leaves the lock until the member refuses. An acquisition whose
// outcome is unknown is undone the same way, or ends by its lease.
//
// Loss. The core ends a lease at its validity deadline (the start of the
// last confirmed acquisition or renewal, plus the validity, minus a margin)
// unless a renewal confirms it first, and at once when a renewal is refused.
// Members also release every lock of a client that disconnects, once no
// member has had a connection from it for
// hazelcast.client.cleanup.timeout.millis (120 s by default, checked every
// 10 s; operators may lower it). A disconnected client cannot know when that
// happens, so the driver reports every lease granted before a disconnection
// lost as soon as the client reports it (the lifecycle events Disconnected,
// ChangedCluster, ShuttingDown and ShutDown), and when the Driver closes. A
// client that does not notice it is cut off (a frozen member, a silent
// network) notices at its heartbeat timeout (60 s by default; the URL's
// heartbeat_timeout); until then the validity deadline is what ends the
// lease.
//
// Fencing tokens. Hazelcast map locks issue none, and the CP Subsystem's
// FencedLock is neither in the Go client nor, since Hazelcast 5.5, in the
// open-source member. The driver keeps one counter per key in a second map,
// the fencing map (the lock map's name plus [FenceSuffix]), and advances it
// by compare-and-set at every grant, while the lock is held, to the greater
// of the counter plus one and this process's clock in microseconds since
// 1970. Tokens therefore strictly increase per grant of a key for as long as
// the cluster keeps the fencing map; they keep increasing after the map was
// lost (a restart without persistence, an evicted or deleted entry) provided
// the clocks of the clients that take the lock next are not behind the last
// token issued. Do not configure eviction, expiry or a map store on the
// fencing map; each key ever locked leaves one entry in it.
//
// What map locks do not promise. Hazelcast's data structures outside the CP
// Subsystem favour availability: in a network partition, both sides of the
// split keep serving, each side's members take over the partitions whose
// owners they lost, and a lock can be granted on both sides at once (see
// Jepsen's analysis of Hazelcast and Hazelcast's documentation of split-brain
// protection and recovery). The cluster tests show it on 3 members of
// Hazelcast 5.5.0: with one member cut off from the other two, a client of
// each side is granted the same lock and both renew it; the later grant's
// token is the greater (tokens follow the clients' clocks, each side having
// its own counter), so a resource that checks fencing tokens refuses the
// earlier holder once the later one has written; when the partition heals,
// the smaller side merges into the larger, whose lock is kept, and the
// smaller side's holder finds its lock gone at its next renewal. Nor does a
// lock surely survive the loss of a member other than its client's, although
// it lives in its partition's primary replica and a synchronous backup: with
// one of 3 members frozen until the others removed it, anywhere from none to
// all of 24 locks held through a client of another member were free again
// (runs vary). The next renewal of a lock lost so reports it (the core ends
// the lease), and a later grant's token is greater. Lease ends follow each
// member's wall clock. Use fencing tokens at the protected resource, or a
// consensus backend (ZooKeeper, etcd), when two holders at once must never
// happen.
//
// # Inspection
//
// [Driver.Inspect] (dlock inspect) reports whether a lock is held, by
// anyone (IMap.isLocked), and the latest fencing token issued at that
// moment: it reads the fencing counter before and after, and reports it
// when both reads agree. That token is the holder's once its grant is
// settled, and the previous holder's for the round trip between a grant
// and the counter's advance. It reports no owner, no time left and no
// waiters: the member keeps a lock's owner (the holding client's UUID and
// lock ID) and its lease to itself, and no call of the client protocol
// reads them. An inspection is three reads, one after the other.
//
// Values. The driver does not store Request.Value, and declares no Values,
// because no read can tie a stored value to the hold that is current when
// it is read, as Capabilities.Values requires. A value (with its token)
// would be an entry the holder writes after its grant and deletes before
// its release, beside a lock whose holder no read names. When a lease runs
// out on the member, no entry changes: the next holder, once granted,
// writes its own a round trip later, and a read in between finds the
// lapsed holder's value and token on a held lock, as though it still led.
// An entry TTL that ended the value before the lease cannot be set
// exactly either: it counts from the write's arrival, which a delay or a
// retry of the client can put after the lease's end; and no map write of
// the open-source member is refused to an owner that no longer holds the
// lock (a put on a free key goes through), so a late write of a lapsed
// holder would stand. An exact Values needs code on the member that reads
// the lock and the entry together (an entry processor, which the Go client
// cannot deploy), or a lock that carries data (the CP Subsystem's
// FencedLock, which is in neither the Go client nor the open-source 5.5
// member).
//
// # Limitations
//
// hazelcast-go-client v1.6.0 reconnects with no time limit on signing in to
// a new connection, and a connection that closes at once, before the
// client has sent its sign-in, can leave that sign-in waiting for good:
// the client fails the requests of a closed connection once, when it
// handles the close, and a sign-in it queues after that is never answered
// nor failed. The client then never reconnects: the Driver stays
// disconnected, and every Lock waits until its context ends. A load
// balancer or port proxy in front of the members does this when it accepts
// a connection for a member that is down or still starting and then closes
// it; Docker's port proxy does, and about one member restart in ten behind
// it left a client stuck so in this project's tests.
// Close the Driver and open a new one when a Lock keeps timing out while
// the members are up; replacing a client stuck this way inside the driver
// is future work.
//
// The tests restart the member under live clients (the conformance cases
// BackendRestarted and LockWaitsThroughRestart, and a Driver that must
// reconnect and lock again) with the clients reaching the member through a
// proxy in the test process rather than through Docker's port proxy. While
// the member is down, and until it answers a client again, that proxy
// refuses connections, as the member's own host does; so what the tests
// measure is the driver's reconnection to a member that went down and came
// back, not the accept-then-close of a proxy in front of it, which they do
// not cover.
//
// # Keys
//
// A dlock key K (1 to 1024 bytes, any bytes) is the key of one entry of the
// lock map ([DefaultMap], "dlock", unless [WithMap] or the URL's map option
// says otherwise): the lock is that entry's lock, held whether or not the
// entry has a value, and the map holds no values. The same key in the
// fencing map holds the counter. The map key is K as a string, except that
// every byte of an invalid UTF-8 sequence is written "%XX" (two upper-case
// hex digits) and '%' is written "%25", so that keys stay valid Java strings
// and two keys never share an entry; other keys, including spaces, control
// bytes and NUL, are unchanged. Clients that must exclude each other use the
// same cluster and map name.
//
// # URLs
//
//	hazelcast://[user[:password]@]host[:port][,host[:port]...][/cluster][?option=value&...]
//
// The hosts are the members the client first connects to (it then learns the
// others); a port defaults to [DefaultPort] (5701), and an IPv6 address is
// written in brackets ("[::1]:5701"). Net/url, which dlock.Open uses, checks
// the list as if it were one host: it refuses a list whose last member has
// no port while another has one, and an IPv6 member anywhere but alone, so
// give a port to every member or to none, and make clients of IPv6 members
// with New. The path is the cluster name ([DefaultCluster], "dev", when
// absent). A user and password are the client's credentials, for members
// with security enabled. Options:
//
//	map=NAME                    the lock map's name (default "dlock")
//	wait_slice=DURATION         the longest server-side wait (default 250ms; 1ms to 1m)
//	unisocket=BOOL              one connection, to the given members only, instead of one per member
//	tls=BOOL                    TLS to the members, verified against the system's roots
//	connect_timeout=DURATION    bounds Open's connecting (see dlock.DefaultConnectTimeout) and each connection attempt
//	heartbeat_timeout=DURATION  how long a silent connection lasts (default 60s)
//	log_level=LEVEL             the client library's lines passed to log/slog, at Debug (default error; off to trace)
//
// Any other option is refused. Open starts a client and waits until it has
// connected to the cluster, bounded by its context and the connect timeout
// (dlock.DefaultConnectTimeout), so that a wrong address or cluster name fails there; the
// client reconnects by itself afterwards, for as long as it takes. (A failed
// Open leaves one goroutine of hazelcast-go-client v1.6.0 behind, and now and
// then a second one, stuck for good on a mutex the library leaves locked
// when its start gives up; the library gives no way to stop either.) The
// Driver shuts that client down on Close. Errors about the URL wrap
// dlock.ErrInvalidURL and never contain the password.
package hazelcast
