// Package memcached is dlock's driver for memcached (tested with 1.6.18), over
// the github.com/bradfitz/gomemcache client and memcached's text protocol.
//
// Importing it registers the URL schemes "memcache" and "memcached" with
// dlock.Open:
//
//	import _ "github.com/dlock-go/dlock/drivers/memcache"
//
//	client, err := dlock.Open(ctx, "memcache://localhost:11211")
//
// An application that already has a gomemcache client passes it to [New]
// instead, and keeps owning it:
//
//	mc := gomemcache.New("localhost:11211")
//	d, err := memcache.New(mc)
//	...
//	client, err := dlock.New(d, dlock.WithTTL(15*time.Second))
//
// # Capabilities
//
// Capabilities ([Driver.Capabilities]): BatchExtender, Inspector and
// Values (the last two when the Driver knows its client's server selector:
// see below), TokenBlock 16, MinTTL 5 s, MaxTTL 30 days. That is:
// exclusive locks with fencing tokens, and the backend's
// TTL rules (MinTTL, MaxTTL, with the reason in TTLReason). Read-write locks
// and reentrant locks are not implemented (no Shared, no Reentrant), so
// dlock refuses them with an error wrapping errors.ErrUnsupported. memcached
// cannot queue waiters or notify them, so the driver is not Blocking and has
// no Notifier: waiters poll, with the core's jittered exponential backoff
// (2 ms to 250 ms by default). A refused Acquire reports the holder's
// expected remaining time (a *driver.LockedError), read from the lock item
// and then remembered per Driver, so that a waiter never sleeps past the
// holder's expiry. Once refused, a Driver waits in a line of waiters kept
// in two counters beside the lock, which shortens or lengthens the
// RetryAfter it reports by its place, so that processes are served about in
// turn (see "Waiting in line" below). A handoff between processes takes up
// to a poll of the waiters at the head of the line (about a millisecond),
// and the requests per lock grow with the number of processes waiting; see
// the benchmarks in bench_test.go. Inside one Client, each grant reserves a
// block of 16 fencing tokens (TokenBlock), so that an Unlock hands
// the lock to the Client's next waiting goroutine at once, with no request,
// and the block's next token.
//
// A Driver that knows its client's server selector (one made from a URL, or
// by [New] with [WithSelector]) is also a BatchExtender: the core's renewal
// of many held locks reads them all with pipelined meta commands (mg, one
// round trip per server for up to 500 locks) and rewrites each one whose
// item still names its lease by a compare-and-swap on the value it read (ms
// with C), so that a batch never extends a lock that has passed to someone
// else; a swap that finds the item changed falls back to that lease's own
// Extend. Without the selector it renews one lock at a time.
//
// Such a Driver is also an Inspector ([Driver.Inspect], for dlock inspect
// and dlock.Election's Leader and Observe), and stores a hold's
// Request.Value (Values): the lock item records the holder's request ID,
// its value and its fencing token together, and one meta get (mg) reads
// them with the item's remaining TTL. An Acquire with a value draws its
// token after the add, as every grant does (see "Guarantees"), and then
// rewrites the item with it by gets and cas before it returns, two more
// round trips; an Inspect that meanwhile finds the value without its token
// reads again until it is there (and reports neither if it never comes). A lock without a value records its token
// at its first renewal, which rewrites the item anyway: until then Inspect
// reports its token as 0 (unknown). Items written by earlier versions of the
// driver, which have neither, still parse.
//
// gomemcache takes no contexts: every request is bounded by the client's
// Timeout. Acquire checks its context between requests; Extend and
// Release return as soon as their context ends, and finish in the
// background, where Close waits for them.
//
// # Guarantees
//
// A lock is a memcached item added with "add", whose value names the
// holder's request ID (128 random bits) and expires with the lease.
// Extend and Release read it with its CAS unique ("gets") and write it back
// with "cas", which the server applies only if the item is still the one
// read: so a holder whose lease expired never extends or deletes the lock of
// the next holder, not even in the instant between the read and the write.
// Release writes the item with a negative expiry, which memcached stores as
// already expired: a compare-and-delete, after which the next "add" finds
// the key free. Acquiring costs two round trips (add, incr; three when the
// fencing counter must be started; two more with a Value, see above), and
// so do Extend and Release (gets, cas): twice the requests of a bare add
// and delete, which check no owner and issue no token.
//
// A Driver that knows its client's server selector takes the same steps in
// fewer round trips, with memcached's meta commands on connections of its
// own: Acquire sends the add ("ms ... ME c", which returns the new item's
// CAS unique) and the token's "ma" (which creates a missing counter from
// the clock) in one round trip when both items live on the same server,
// and Release ("md ... C<cas>") and Extend ("ms ... C<cas> c") take one,
// so an uncontended lock and unlock costs two round trips, as add and
// delete do (a Value's rewrite takes one more). The invariant: a
// compare by CAS unique deletes or rewrites the lock item only if it is the
// very item the lease's last write stored, because the compare is sent on
// the connection that write's reply came back on, and a connection is
// served by one server process, whose CAS uniques never repeat (they start
// again from 1 after a restart, which closes the connection, and are all 0
// under -C, which the driver never uses). Whenever that proof is missing,
// the driver falls back to the read-and-compare by request ID above: the
// connection is busy or closed, the CAS unique unknown (the add's reply was
// lost: the retried add finds our own item by its ID, and an Acquire that
// fails gives the grant back by its ID), or the compare fails (the item
// was renewed by a batch, or expired and was taken by another holder, whose
// item has a CAS unique of its own: a late "md" is refused). A holder
// frozen past its TTL gains nothing either: its item has expired, so its
// compare finds no item or another one. The token is drawn by a command
// that follows the add on the same connection, so the server runs it after
// the add, as fencing requires. The proof needs the connection to end at a
// memcached server: a proxy in between (mcrouter, twemproxy, memcached's
// own proxy mode) can keep a client's connection open while the server
// behind it restarts and counts CAS uniques from 1 again, so do not give
// such a Driver a selector whose addresses are proxies (the gets and cas of
// the path without one have the same exposure, for the instant between
// them).
//
// memcached expires items in whole seconds, by a clock that a timer advances
// about once a second. The driver sends the TTL rounded up to whole seconds
// (N); the server then keeps the item for at most N seconds (plus the
// lateness of its ticks), and at least N-1 seconds in general but only N-2
// seconds when the timer's drifting phase wraps past a whole second during
// the lease (about every 25 minutes on the tested server). The lease's
// validity is therefore N seconds minus 2.1 s, and the TTL must be at least [MinTTL] (5 s, valid for 2.9 s)
// and at most [MaxTTL] (30 days: memcached reads larger expiries as Unix
// times). A lock whose holder vanished is free again at most N seconds after
// it was last granted or renewed.
//
// A server process that is frozen (SIGSTOP, docker pause, a stalled VM)
// serves the requests waiting for it on resuming before its clock catches
// up, for at most one tick: a grant or renewal served in that instant
// expires early by up to the length of the freeze. dlock cannot tell; keep
// memcached processes from being frozen for longer than the TTL's slack, or
// rely on fencing tokens.
//
// Fencing tokens come from a counter item per lock ("incr", started with
// "add"), advanced while the lock is held, so they strictly increase per
// grant for as long as memcached keeps the counter. memcached forgets it on
// a restart, an eviction, a flush or a change of the server list; the next
// grant then starts the counter again from its own clock in microseconds
// since 1970. Tokens therefore keep increasing across such a loss as long as
// the clock of the client that restarts the counter is not behind the clock
// of the one that started it last by more than the time between the two
// starts: with clocks synchronised by NTP, a loss that comes more than a few
// milliseconds after the counter was started. The counter is never started
// from zero, so a token is never small; a counter holding a value the driver
// did not write refuses grants with an error.
//
// memcached is a cache: a lock item can be lost to eviction under memory
// pressure, to a restart (nothing persists) or to a flush_all. The holder
// learns of it at its next renewal: Extend finds the item missing or not its
// own and returns driver.ErrNotHeld, and the lease's lost signal fires; in
// the meantime another client may have been granted the lock. Run the
// memcached that holds locks so that this does not happen:
//   - a dedicated instance (or at least one whose memory is not contended by
//     a cache workload), with enough memory (-m) for every lock and counter;
//   - with -M (--disable-evictions), so that a full server refuses new items
//     with an error instead of evicting old ones: a grant or a renewal then
//     fails visibly instead of a held lock disappearing;
//   - without -o idle_timeout shorter than the renewal interval (harmless
//     but costly: every renewal would reconnect).
//
// # Waiting in line
//
// Polling alone serves whoever polls first after a release: in practice the
// process that just released, whose next add comes before anyone else's
// poll, so that some processes wait for ever. The driver therefore keeps a
// line of waiters per lock in two counters: "next", from which a Driver
// whose Acquire of a waiting Lock (driver.Request.Wait) was refused draws a
// ticket ("incr"; one per Driver and lock, kept while it goes on trying),
// and "served", which a Driver granted the lock with a ticket raises to its
// ticket (after Acquire returns, by "gets" and "cas", so that it never goes
// down). The core sets Wait on every try of a waiting Lock, and never on a
// TryLock's: a TryLock neither takes a ticket nor defers to the line, and
// tries the add as it would without one.
//
// An Acquire with a ticket reads both counters (one request per server)
// and, when refused, reports a RetryAfter by its distance from served: 1 µs
// within the first 3 tickets past served (the window: the core then polls a
// millisecond later, and such a ticket tries the add at each poll without
// reading the counters again), and beyond the window, per ticket, half the
// time a ticket was seen to take (at least 1 ms in all, up to 100 ms). A ticket beyond the
// window does not try the add: the driver refuses it, so the waiters near
// the head take the lock before it (in no particular order among the
// window's), while the window's several pollers notice a release sooner
// than one would. A Driver granted the lock with a ticket
// while others held later ones lets them go first: for 200 ms, its next
// attempt on that lock draws a ticket before it tries the add. The first
// attempt of a Driver that saw no line (the uncontended path: add, incr) is
// unchanged; the line costs one request per refused attempt, one for the
// ticket, and two per grant with a ticket. The locks of a semaphore's
// permits have no line: the core tries them by TryLock (a semaphore's
// waiter takes whichever permit is free, so tickets per permit would only
// cost requests; a TryAcquire of a full semaphore of 4 costs 8 requests,
// then 4 once the holders' expiries are known), while its gate, which its
// waiters Lock, has one.
//
// Tickets are a hint for scheduling, never exclusion: a lock is granted by
// the add of its item alone, exactly as without the line, so no ticket,
// counter or clock, however wrong, lost or stale, can grant a lock twice;
// at worst it makes a waiter poll too often, too rarely, or out of turn.
//
// Nothing tells the Driver that a waiter gave up (a driver without a
// Notifier has no subscription to close), so a ticket lapses by itself. A
// ticket whose Driver left (closed, crashed, or stopped trying) is
// skipped: the other tickets in the window poll as fast, and a ticket
// beyond the window that finds served unchanged for 100 ms, or over 8 of
// its polls in a row, tries the add at each poll as well. Tickets that left
// thus keep a free lock idle for at most 100 ms plus one poll (up to 101
// ms), and a Driver forgets a ticket it has not used for 1 s. The counters
// expire 10 minutes after they were last started or written (grants
// rewrite "served", and touch "next" at most once a minute per Driver), so
// a lock nobody waits for leaves nothing behind. When "next" is lost
// (expiry, eviction, restart), the attempts that find it gone or started
// again behave as without a line until a Driver is refused anew; when only
// "served" is, the line counts from 0 and the stall rule bounds the wait
// until the next grant starts it again.
//
// # Several servers
//
// A client with several servers puts each item on the one server its
// selector picks for the item's name (gomemcache hashes the name, CRC-32
// modulo the number of servers), with no replication: every process that
// locks a key must list the same servers in the same order. A server that
// fails loses its locks (signalled to their holders at their next renewal)
// and its counters (see fencing tokens above). Changing the server list moves
// items between servers: a lock whose name moves is free at once on its new
// server while its holder still believes it holds it, until its next
// renewal finds it gone. Change the list only when no lock is held, or
// accept that window and check fencing tokens at the resource. The lock item
// and its counter may live on different servers.
//
// # Keys
//
// A dlock key K is a byte string (the core limits it to 1 to 1024 bytes; this
// driver accepts every such key). memcached keys are at most 250 bytes of
// printable ASCII without spaces, so the driver names the items of one lock
//
//	PREFIX + R + "#" + base64url(SHA-256(K))   the lock item
//	PREFIX + R + "#" + base64url(SHA-256(K)) + ".fence"   its fencing counter
//	PREFIX + R + "#" + base64url(SHA-256(K)) + ".next"    its line's ticket counter
//	PREFIX + R + "#" + base64url(SHA-256(K)) + ".served"  its line's served counter
//
// where PREFIX is the key prefix ("dlock:" unless [WithKeyPrefix] says
// otherwise), R is the first 64 bytes of K with every byte other than
// A-Z, a-z, 0-9 and ". _ / : -" replaced by '_', and the hash is 43
// characters of unpadded base64url. "reports/nightly" is stored as
// "dlock:reports/nightly#lxC1LHb9nLJf...". Every name is at most 179 bytes of
// printable ASCII, so no key, whatever bytes it holds (spaces, CR LF followed
// by a command, NUL, invalid UTF-8), can make the driver send anything but
// the command it means. Different keys get different names unless SHA-256
// collides: R only helps people reading the server's keys.
//
// # URLs
//
//	memcache://host[:port][,host[:port]...][?option=value&...]
//	memcached://...   (the same)
//
// The port defaults to 11211. An IPv6 address must be in brackets
// ("memcache://[::1]:11211"); net/url accepts brackets only in a URL that
// names a single server. Servers are resolved once, by Open, and answer a
// "version" command before Open returns. The URL takes no user information
// (the text protocol has no authentication) and no path. Options:
//
//	timeout=DURATION     bounds each request (default 500ms)
//	max_idle_conns=N     idle connections kept per server (default 8)
//	key_prefix=PREFIX    the prefix of every item name (default "dlock:")
//	connect_timeout=DURATION  bounds Open, as on every backend (see dlock.DefaultConnectTimeout)
//
// Errors about the URL wrap dlock.ErrInvalidURL. The Driver closes the
// client it made on Close. Clients with TLS or a custom server selector are
// made by the caller and passed to [New].
package memcache
