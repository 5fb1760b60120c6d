// Package zookeeper is dlock's driver for Apache ZooKeeper (3.5.3 or later,
// for container nodes; tested with 3.8), over github.com/go-zookeeper/zk.
//
// Importing it registers the URL scheme "zk" with dlock.Open:
//
//	import _ "github.com/dlock-go/dlock/drivers/zookeeper"
//
//	client, err := dlock.Open(ctx, "zk://zk1:2181,zk2:2181,zk3:2181/dlock?session_ttl=10s")
//
// [Dial] does the same from a server list. An application that already has a
// *zk.Conn passes it to [New] instead, with the session timeout the server
// granted it, and keeps owning it.
//
// A lock is the ZooKeeper recipe: every acquisition creates an
// EPHEMERAL_SEQUENTIAL child of the lock's node; the lowest sequence number
// holds the lock; each waiter watches only the node just ahead of its own, so
// a release wakes exactly the waiter it lets in (no herd effect), and waiters
// are served in the order they came (FIFO).
//
// # Capabilities
//
// Capabilities: Shared, Reentrant, Blocking, MinTTL and MaxTTL (one to two
// session TTLs, see "Sessions and TTLs"), BatchExtender, Inspector, and
// Values. No Notifier, which a server-side queue makes unnecessary. In
// detail:
//   - exclusive locks, and read-write locks (Shared) by the recipe's read
//     and write nodes: a reader waits for the last writer ahead of it, a
//     writer for the node just ahead of it. Readers join only while no
//     writer waits ahead of them, so writers are not starved;
//   - server-side waiting (Blocking): a blocking Acquire (Request.Block)
//     queues and waits on a watch; a try queues and, unless granted at once,
//     deletes its node and returns ErrLocked;
//   - reentrant locks (Reentrant): a request whose owner holds the lock in
//     the same mode joins that hold at once, from any client (see below);
//   - batched renewal (BatchExtender): many leases confirmed in one multi
//     (see "Sessions and TTLs");
//   - inspection (Inspector, [Driver.Inspect]) for dlock inspect and
//     dlock.Election: the holders, the waiters, and the oldest holder's
//     fencing token and owner, from a listing of the queue and a read of
//     the holder's node; and values (Values): a request's Value is written
//     into its queue node's data by the create that queues it, so the
//     holder's node gives its value and its token (the node's creating
//     zxid) in one read;
//   - fencing tokens; loss reports (Lease.OnLoss) when the session ends, and
//     uncertainty reports (Lease.Uncertain) while the client is
//     disconnected.
//
// A cancelled Acquire deletes its waiting node before it returns ctx's error.
// A create whose reply is lost on a connection drop is recovered: every node
// name carries the request ID (128 random bits), so after reconnecting (and a
// sync) the Driver finds its own node instead of waiting on itself or leaking
// it. go-zookeeper's CreateProtectedEphemeralSequential is not used: it makes
// up its own GUID, which a caller that gave up cannot look for; it retries
// only three times, takes no context, and when its recovery listing fails too
// it returns an error while the node may exist, which leaves an orphan at the
// head of the queue that blocks everyone until the session ends. Whatever
// the Driver cannot clean up at once (a request abandoned in flight, a
// release whose reply was lost) a background janitor removes once the
// client is connected again.
//
// # Sessions and TTLs
//
// One Driver is one ZooKeeper session (one *zk.Conn), shared by all its
// locks. Its TTL T, which ZooKeeper calls the session timeout (and dlock,
// as for etcd, the session TTL), is the one the server granted: [Dial] and
// dlock.Open read it from the server's connect response (the client library
// does not expose it); [New] is told it. It drives everything:
//
//   - A lease is valid for at most T after its last confirmation (the start
//     of the acquisition or renewal that confirmed it; after a wait, the
//     request that found the lock granted): a client cut off from the
//     ensemble cannot know whether its session still lives once T has
//     passed since the server last heard from it.
//   - Renewal (Lease.Extend) confirms, in one transaction through the
//     leader (a multi of version checks, so linearizable), that the session
//     is alive and the lock's node is still there. Node names carry the
//     request ID, so the check is owner-checked; a node that is gone gives
//     ErrNotHeld. While the client is disconnected renewal fails at once
//     with [ErrDisconnected], which the core counts as a failed renewal, and
//     Lease.Uncertain reports the disconnection. The core renews the leases
//     of a Driver that fall due together in one batch ([Driver.ExtendBatch],
//     the BatchExtender): one multi carries the checks of up to 1,000
//     leases (fewer with very long keys, to stay within the server's 1 MiB
//     request limit), and a missing node is reported for its own lease
//     alone while the others are still confirmed.
//   - Session expiry always loses the lock ([ErrSessionExpired]). The client
//     library learns of an expiry only when it reconnects, which may be much
//     later: dlock does not wait for that. A disconnection that lasts past
//     the lease's validity (at most T) is treated as a loss, at the validity
//     deadline; a shorter one only makes the lease uncertain.
//   - The core's TTL must lie between T and 2T (Capabilities MinTTL and
//     MaxTTL, read when the Client is made). Below T, the TTL could not be
//     honoured: a holder that crashes keeps its lock until its session
//     expires, T later. Above 2T, leases could lapse before their renewal.
//     Within the range, a lease's validity is T.
//   - A holder that stays alive but stops renewing (its renewals hang, or it
//     lets the lease lapse without renewal) would keep its node as long as
//     its session lives; so the Driver removes the node itself once the
//     lease's validity has passed unconfirmed, and the lock frees within the
//     TTL, as on a lease backend.
//
// A client's requests are served by one server of the ensemble; when it
// stops answering the client moves to another within 2T/3 and keeps its
// session. go-zookeeper waits a second before it tries the same servers
// again, so a client of a single server is disconnected for at least a second
// by any connection drop.
//
// # Guarantees
//
// ZooKeeper's writes are linearizable and its ephemeral nodes end with their
// session, so two sessions never hold one lock at once as the ensemble sees
// it. A holder may still act after it lost the lock (a process pause, a
// partition longer than its lease): check fencing tokens at the resource.
//
// The fencing token is the zxid of the transaction that created the queue
// node holding the lock (Stat.Czxid). zxids are unique and increase with
// every write across the whole ensemble (its high 32 bits are the leader's
// epoch, which every election raises), so a later grant of any lock always
// has a greater token, across leader changes and restarts, for as long as
// the ensemble keeps its data. An ensemble rebuilt from empty data starts
// its zxids again, lower: tokens then go backwards. Reentrant entries share
// the token of the hold they join.
//
// Reentrant holds: a request with Owner O joins a current holder of O in the
// same mode (and a waiting request with O joins one when it wakes). The hold
// lives in the queue node of its first entry, whose data lists the request
// IDs of its entries; each other entry also has an ephemeral entry node of
// its own session, so an entry whose client died is recognised as dead and
// dropped by the next release. Joining and leaving are versioned
// transactions. The lock is free once every live entry has left. Since the
// hold's node belongs to its first entry's session, the end of that session
// (its client crashed, or was closed) loses every entry of the hold, which
// then learn of it at their next renewal.
//
// Close of a Driver from [Dial] or dlock.Open closes its session: ZooKeeper
// deletes its nodes at once, and its held leases report [ErrSessionClosed].
// Close of a Driver over a caller's connection leaves the session open, and
// so deletes the nodes of its held locks itself (bounded by 2 s) and reports
// the same.
//
// # Keys
//
// The Driver keeps its locks under a base path (default "/dlock"; see
// [WithBasePath] and the URL's path). A dlock key K (1 to 1024 arbitrary
// bytes) is the node BASE/E, where E is K with every byte outside
// [A-Za-z0-9_~-] written as "%XX" ('%' included): so "reports/nightly" is
// /dlock/reports%2Fnightly. The escape is injective, keeps '/' out of the
// name (one key is one node, never a path of several), and never yields ".",
// "..", control characters or the other characters ZooKeeper refuses; E is
// at most 3072 bytes, well within ZooKeeper's request size limit, its only
// limit on names. The base path itself may be neither "/" nor inside
// /zookeeper. Every key is accepted.
//
// The lock's node is a container node, which ZooKeeper deletes once it has
// been empty for a while, so keys leave nothing behind. Its data stays
// empty, but every queueing writes it: the create of the queue node goes in
// one multi with that write, whose reply (the node's Mzxid, the multi's zxid)
// gives the new node's token without a read of its own; a Driver whose ACL
// does not let it write the lock's node creates alone and reads the token. Its children are
// named "w-ID-TAG-SEQ" (writers), "r-ID-TAG-SEQ" (readers) and "e-ID-ANCHOR"
// (entries of reentrant holds), where ID is the request ID, TAG a hash of the
// reentrant owner, if any, and SEQ ZooKeeper's sequence number. Children with
// other names that end in a ten-digit sequence number count as writers (a
// lock held by hand); others are ignored. Every node the Driver creates is
// ephemeral, except the base path's nodes (persistent) and the lock nodes
// (containers).
//
// # URLs
//
//	zk://host[:port][,host[:port]...][/base][?session_ttl=DURATION]
//
// The port defaults to 2181. The path is the base path (default /dlock): it
// plays the part of a chroot for dlock's nodes. session_ttl (a Go duration,
// default 10s) is the session TTL asked for, as [WithSessionTTL] sets it;
// its former name session_timeout is still read but deprecated. An IPv6
// address must be in brackets, and net/url accepts one only as a URL's
// single host: use [Dial] for a list that has one. User information is refused (use [New]
// with a connection that called AddAuth). dlock.Open waits until the session
// is established, bounded by its context and the connect timeout
// (connect_timeout=, or dlock.DefaultConnectTimeout): the client library
// retries its servers for ever, so Open closes it, and the network
// connection of a handshake a silent server never answers, when time runs
// out. Errors about the URL wrap
// dlock.ErrInvalidURL.
package zookeeper
