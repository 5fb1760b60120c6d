// Package etcd is dlock's driver for etcd, a strongly consistent backend:
// the open counterpart of Google's Chubby lock service. It works with etcd
// 3.4 and later through the 3.5 client, and is tested with Debian's etcd
// 3.4.
//
// Importing it registers the URL scheme "etcd" with dlock.Open:
//
//	import _ "github.com/dlock-go/dlock/drivers/etcd"
//
//	client, err := dlock.Open(ctx, "etcd://host1:2379,host2:2379,host3:2379/myapp?session_ttl=15s")
//
// An application that already has a clientv3 client passes it to [New]
// instead, and keeps owning it:
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints})
//	...
//	d, err := etcd.New(cli, etcd.WithSessionTTL(15*time.Second))
//	...
//	client, err := dlock.New(d)
//
// # How a lock works
//
// Each Driver has one session: an etcd lease of the session TTL, granted at
// its first lock and kept alive in the background (a keepalive every TTL/3,
// more often while they fail). Every lock the Driver holds or waits for is a
// key under that lease, so a process that dies or is cut off loses all its
// locks when etcd expires the lease. When the session is lost, the Driver
// grants a new one for its next locks.
//
// A request for a lock puts a key of its own, named after the session and the
// request, in the lock's queue; the key with the lowest create revision holds
// the lock. A try (Acquire without Request.Block) puts its key only if no key
// it would wait for exists (one transaction comparing the whole range), so a
// refusal costs one round trip and writes nothing. A blocking Acquire puts
// its key and reads the keys just ahead of it in one transaction, then
// watches only the key just ahead (no herd), with a watch that starts at
// etcd's current revision, and once etcd has set it up reads the state again,
// which covers what happened in between. A watch asked to start at a past
// revision (etcd's concurrency.Mutex starts at the revision of its read) is
// parked by etcd until its resync loop, every 100 ms, catches it up, whenever
// anything was written meanwhile, which under contention is always; etcd 3.4
// may park even a watch started at the current revision, when a write commits
// while it registers the watch, so while that may have happened the waiter
// also reads at growing intervals until the resync loop must have run. When
// the key ahead was the holder, its deletion grants the lock without another
// read; otherwise one local read (serializable, at the revision of the
// deletion) finds the next key to wait for. A waiting request whose context
// ends deletes its key before returning.
//
// Nothing is left behind. The session lease lives as long as the Driver, so
// a key under it that nobody owns would block its lock for as long; hence
// every key the driver writes is, at every moment, either owned by a lease
// of this Driver, with the driver's own deadline (a lock not extended
// within its TTL is deleted by the Driver, revision-checked: see
// Guarantees), or tidied by the request that wrote it, before that request
// returns and then in the background until done or the session is gone: a
// waiter that gives up deletes its key by its revision, and a request whose
// outcome is unknown (its context ended or its reply was lost in flight)
// deletes its key by name in a transaction that also moves the session's
// fence key, PREFIX/%/fence/LEASE. Every transaction that creates a key
// under the session requires the fence to be where the Driver last saw it,
// so such a request, should etcd apply it after its tidying, writes
// nothing (a new reentrant hold is fenced likewise by revoking its lease).
// A grant whose caller is gone is a lease like any other: its TTL frees
// it. So a lock that nobody renews is free within its TTL plus a round
// trip, as with a lease-key backend, and within the session TTL when the
// holder's process dies or is cut off.
//
// Read-write locks follow etcd's recipe: readers and writers queue in one
// order, a reader waits only for the last writer ahead of it, and a writer
// for the last key ahead of it of either kind. Readers that arrive while a
// writer waits queue behind it, so writers are not starved.
//
// # Capabilities
//
// Capabilities: Shared, Reentrant, Blocking (server-side waiting in FIFO
// order), MaxTTL (the session TTL, below), BatchExtender (one read-only
// transaction checks up to 120 locks), AnyAcquirer (one transaction tries
// up to 120 locks in order, each as a non-blocking Acquire would, each try
// nested in the Else of the one before), Inspector and Values (a request's
// value is the value of its queue entry, written by the put that creates
// the entry and so grants the entry's fencing token; Inspect reads the
// holder's entry, value and token, at one revision). Leases report losses
// (Lease.OnLoss) and uncertainty (Lease.Uncertain).
//
// A mutex's TTL may not exceed the Driver's session TTL (ErrInvalidTTL when
// the Mutex is made): etcd keeps a lock only as long as the session lease,
// so a longer TTL could not be promised. A shorter one can: when the core
// does not renew a lock within its TTL (renewal off, or renewals failing),
// the driver deletes the lock's key itself, revision-checked, so a live
// holder that stops renewing loses the lock after its TTL, as with a
// lease-key backend. A holder that dies keeps its locks until the session
// lease expires: up to the session TTL after its last keepalive, plus up to
// 0.5 s of etcd's expiry check. etcd lease TTLs are whole seconds, and a
// server grants at least 1.5 election timeouts (2 s with etcd's default
// timing): a shorter session TTL is raised by the server, and locks of dead
// holders last accordingly longer.
//
// Reentrancy: requests that name the same owner (dlock.WithOwner), in the
// same mode, on any clients, share one hold: a queue key named after the
// owner, under a lease of its own that every client taking part keeps
// alive, with a member key per request under its client's session. The
// first request creates the hold; later ones join it at once when it holds
// the lock (TryLock joins only then; Lock also joins a hold still waiting,
// and waits with it). Every member gets the hold's fencing token. The last
// member to leave deletes the hold, in the same transaction that checks no
// other member is left; a join succeeds only while the hold exists, so a
// join and a last leave never both succeed. An owner holding the write lock
// who asks for a read lock (or the reverse) queues behind itself: there is
// no upgrade or downgrade.
//
// # Guarantees
//
// At most one writer, or any number of readers, hold a lock at any time as
// etcd judges it (linearizable reads and transactions through the Raft
// leader), whatever happens to clients and members, as long as a quorum of
// members keeps its data. A holder is told by its lease's loss report, and
// by its validity deadline, before etcd can let another client in:
//
//   - Validity is counted from the start of the call that confirmed the
//     lock, and ends at the earliest of the TTL and the session lease's
//     expiry as this client knows it (the start of its latest confirmed
//     keepalive plus the lease's TTL). A lock obtained by waiting is
//     confirmed when the wait ends, so its validity may exceed the TTL
//     counted from the start of a blocking Acquire, by the time spent
//     waiting.
//   - When keepalives fail, the lease is uncertain (Lease.Uncertain) at
//     once, and lost when its expiry passes unconfirmed, or at once when
//     etcd says the lease is gone. A lost session's lease is then revoked
//     (best effort), so that its keys do not outlive what holders were told.
//   - Extend confirms, in one read-only transaction, that the lock's key
//     still has the create and mod revision of the grant (so a key deleted,
//     re-created or overwritten since is not taken for ours), and that a
//     keepalive of the session was confirmed within the last third of its
//     TTL (sending one if needed). Release deletes the key only under the
//     same comparison, so a late or retried release never deletes a newer
//     lock, even one of the same session.
//   - A waiter whose session is lost stops with an error wrapping
//     [ErrSessionLost] instead of waiting on for a key that is gone. That
//     error is transient (it has a Transient method that returns true), as
//     are etcd's Unavailable errors (a connection refused or broken, no
//     leader, a request timed out in the server): a waiting dlock Lock
//     rides them out, queueing again under a new session once etcd is
//     back. A call whose context has ended returns exactly the context's
//     error, whatever etcd answered.
//
// Fencing tokens are the create revision of the holder's key (of the hold's
// key, for reentrant holds): etcd's revision counter, which every write in
// the cluster advances, so tokens strictly increase across all grants of all
// keys, with gaps, for as long as the cluster keeps its data, restarts
// included. Restoring a snapshot rewinds the revision unless it is restored
// with a bumped revision (etcdutl snapshot restore --bump-revision, in
// recent 3.5 releases and 3.6); otherwise tokens may repeat. Readers holding together
// get distinct tokens, each greater than that of every writer before them.
//
// Close does not release locks and does not revoke the session: its locks
// stay until the session lease expires, as if the process had died. The
// dlock Client's Close releases its locks first.
//
// # Keys
//
// A dlock key K is any byte string of 1 to 1024 bytes; this driver accepts
// every one. Its etcd names all start with PREFIX/S/, where PREFIX is the
// Driver's prefix ("dlock" unless [WithKeyPrefix] or the URL says otherwise)
// and S is K escaped: printable ASCII other than '/', '%' and space stays
// as it is, every other byte becomes %XX (upper-case hex), and a K of "."
// or ".." becomes "%2E" or "%2E%2E". S therefore contains no '/', cannot
// climb out of PREFIX/ for tools that read names as paths, and the escape
// is injective, so two keys never share a name. Under PREFIX/S/:
//
//	q/w/LEASE-ID      an exclusive request (LEASE: the session lease, in
//	q/r/LEASE-ID      a shared request      unsigned hex; ID: the request ID,
//	                                        escaped)
//	q/w/@OWNER        a reentrant hold of OWNER (escaped), exclusive
//	q/r/@OWNER        the same, shared
//	e/HOLD/LEASE-ID   a member of the reentrant hold whose lease is HOLD
//
// Beside them, each session has one fence key, PREFIX/%/fence/LEASE (see
// "How a lock works"), under the session lease; "%" alone is never an
// escaped key, so the fence is outside every lock's names.
//
// The keys carry no value. "reports/nightly" queues under
// "dlock/reports%2Fnightly/q/".
//
// # URLs
//
//	etcd://[user:password@]host[:port][,host[:port]...][/prefix][?session_ttl=15s]
//
// Endpoints are separated by commas; the port defaults to 2379; an IPv6
// address must be in brackets. net/url, which parses the URL first, reads
// whatever follows the last ':' as a port, so in a list either give every
// endpoint its port or leave out all but the last one's; and it cannot parse
// more than one bracketed IPv6 endpoint: give such lists to [New] through a
// clientv3 client. The
// path, without its leading '/', is the prefix (a prefix starting with '/'
// is written with two, "etcd://host//locks"); it must not end with '/'. The
// query parameter session_ttl sets the session TTL, as [WithSessionTTL] does
// (whole seconds, at least 1 s; default [DefaultSessionTTL], 15 s); its
// former name ttl is still read but deprecated, since the session's TTL is
// not the locks'. A user name and password authenticate
// with etcd's auth. TLS is not configured from URLs: use [New] with a
// client that has it. Open checks that the cluster answers a linearizable
// read, bounded by its context and the connect timeout (connect_timeout=, or
// dlock.DefaultConnectTimeout): the client dials lazily and retries in the
// background, so the read is what tells a cluster that answers from an
// address where nothing does; on failure Open closes the client. The client
// it makes sends gRPC keepalive pings every 5 s (so a connection that died
// silently is found in seconds), logs only to log/slog at Debug, and is
// closed by the Driver's Close. Errors about the URL
// wrap dlock.ErrInvalidURL and never contain the password.
package etcd
