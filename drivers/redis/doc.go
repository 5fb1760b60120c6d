// Package redis is dlock's driver for Redis (5.0 or later; tested with 7.0):
// a single server, a master found through Redis Sentinel, or a Redis
// Cluster ([Driver]; a Cluster needs 7.0), and RedLock over several
// independent masters ([RedLock]).
//
// Importing it registers the URL schemes "redis" and "rediss" (TLS),
// "redis+sentinel" and "rediss+sentinel", "redis+cluster" and
// "rediss+cluster", and "redlock" and "redlocks", with dlock.Open:
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
// is atomic on the server and costs one round trip (on a RedLock, one round
// trip to every master at once, and two for an acquisition).
//
// # Capabilities
//
// Capabilities ([Driver.Capabilities]): Shared, Reentrant, Notifier,
// BatchExtender, Inspector, Values, Transferer, AnyAcquirer, TokenBlock 16;
// on [RedLock] the same but Transferer and AnyAcquirer. That is:
// exclusive, read-write and reentrant locks with fencing tokens, release notifications (Notifier, by Redis
// pub/sub), batched renewal (BatchExtender, by pipelining), inspection
// (Inspector), values stored with a hold (Values: a request's Value is
// kept beside its hold in the lock hash, a Transfer stores the new
// request's, a release or an expiry takes it with the hold, and Inspect
// reports the exclusive holder's value with that same hold's token, read
// by one script), and direct handoff: each plain exclusive grant reserves a block of 16
// fencing tokens (TokenBlock), so an Unlock hands the lock to a waiter of
// the same Client with no request at all, the waiter taking the block's
// next token; past the block, in one script (Transferer), with a new block.
// A semaphore's TryAcquire takes any free permit in one script
// (AnyAcquirer: acquire.lua's own code, run for each permit's lock in
// turn up to the first grant), or on a Cluster one script per run of
// permits in one slot, since a script touches one slot only. A RedLock has
// none: each master would pick its own free permit, and no majority need
// agree on one.
// There are no key or TTL rules beyond the core's. Waiting is not Blocking:
// waiters are woken by the release's PUBLISH and retry, and the core polls
// beside the notifications, so a lost message costs latency, never
// correctness.
//
// Waiting is fair across clients: a Driver whose Lock is refused joins a
// FIFO queue of Drivers kept beside the lock (PREFIX{T}:waiters); a free
// lock goes only to the queue's head, and the release publishes on the
// head's personal channel (the lock's channel, ':', the Driver's name),
// which that Driver alone subscribes to beside the lock's channel, so only
// its waiters wake. When the head's queued attempt was a plain exclusive
// wait (no owner, no value, and no replica acknowledgements), the release
// grants the lock to that attempt's request ID itself, exactly as the
// acquire script would (a new token, its block reserved), takes the head
// out of the queue, and its message carries the grant; the head's next
// Acquire then takes the lock from the message with no request (see
// "Guarantees" for when it may). Otherwise the head acquires with a
// request of its own. A handoff between processes costs the release and
// one delivered message (and that request, when there is one) however
// many processes wait, where waking every waiter would
// cost a request each, and publishing on a channel every waiting Driver
// subscribes to would cost the server a delivery, and each of those
// processes a wake-up, per waiting Driver. A release with nobody queued
// publishes on the lock's channel, to every waiter. A queued Driver renews
// its entry at each attempt, whatever refused it (a holder, or a
// stranger's value at the lock's name), and comes back at least every
// third of its lifetime (the lock's TTL, at most 2 s); its refusal says so
// (driver.LockedError.Queued), and the core then does not poll sooner,
// since the release wakes it when its turn comes (64 Drivers polling with
// the core's backoff from 2 ms cost 7 requests per critical section). The
// entry of a Driver that crashed lapses, so it holds the queue up for at
// most that lifetime. TryLock, read locks and
// reentrant requests do not queue, and TryLock is refused a free lock while
// Drivers are queued for it. A lock that expires instead of being released
// publishes nothing; the core's polling never sleeps past the holder's
// remaining TTL, which a refused Acquire reports.
//
// Reentrant locks follow the owner → count design of a Redis hash, with one
// field per entry instead of a count: a request whose Owner already holds
// the lock in the same mode enters again at once, from any client, with the
// same fencing token (a re-entry is not a new grant); every entry is a lease
// of its own, renewed and expiring on its own, and the lock is free when the
// last entry is released or has expired. A release by anyone else changes
// nothing and returns ErrNotHeld. An owner cannot change mode while it
// holds the lock: its write request is refused while it reads (an upgrade
// would wait for itself), and its read request while it writes.
//
// Read-write locks give every reader a field of its own, with its own expiry
// (the single `read` field of the well-known hash design lets one reader
// erase another's). The write lock is the exclusive lock: a Mutex and an
// RWMutex's Lock on one key exclude each other. Writers are preferred: a
// writer refused because readers hold the lock marks the lock, and new
// readers are refused until the writer gets in, so a stream of readers
// cannot starve it. The mark lasts the writer's TTL, at most 1 s; a waiting
// writer renews it at every attempt (the refusal tells the core to come
// back within a third of it), and the writer's grant clears it. Readers
// that re-enter as an owner already reading pass the mark, since the
// writer waits for them. A writer that gives up (a refused TryLock, a
// cancelled Lock) leaves its mark to lapse: new readers may then be refused
// for up to that 1 s although no writer waits. This is the one way a
// refused Acquire leaves something behind (driver.Driver asks for
// nothing); it never holds the lock, and it is bounded.
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
// On a Redis Cluster ([New] over a *goredis.ClusterClient, or a
// redis+cluster:// URL) every name of a lock shares one hash slot (see
// "Keys"), so each script runs on the one master that owns it; go-redis's
// ClusterClient finds that master and follows MOVED and ASK redirections,
// and pipelined renewals are split by node. Notifications use sharded
// pub/sub: the release script publishes with SPUBLISH, which reaches the
// lock's shard only (a PUBLISH would be broadcast to every node of the
// cluster), and waiters SSUBSCRIBE there. A sharded connection serves the
// slots of one node, so each watched channel has a pub/sub connection of
// its own (still shared by the Driver's waiters for that key, and kept for
// the same 2 s linger); when the server ends a subscription because its
// slot moved, or a subscription reaches a node that no longer owns it, the
// channel is subscribed again on the slot's new master. Inspect counts
// waiters on that master (PUBSUB SHARDNUMSUB).
//
// # Guarantees
//
// One invariant keeps a lock from two holders, on a single server, a Cluster
// and RedLock alike: a lease exists only for a hold that the server (on
// RedLock, each master of a majority) granted to this Driver, confirmed
// either in its reply to a request or (single server and Cluster) in a
// release's grant message naming a request ID this Driver queued with and
// whose own reply came back as a refusal; its validity is counted from
// the moment a request was sent that the server processed before the
// grant (that request itself, or for a grant by release the queued
// attempt the message names, whose send time the Driver kept), never from
// when a reply or message arrived, so the holder's deadline comes before
// the server lets the hold go; and each grant is claimed at most once. A
// grant by release lasts no longer than the head's queue entry would have
// (at most 2 s); the claim takes that TTL less the time since the attempt
// was sent, and is not made when less than a quarter of it is left. So a
// lost grant message costs latency (the waiter's next try, within a third
// of its entry's lifetime, names the attempt's ID and the acquire script
// hands the unclaimed hold to that new request, which the Driver made sure
// nobody claims; or the hold lapses with the entry), a duplicated one is
// ignored (claimed once), and a late one finds its validity gone. A grant
// the Driver will not claim (its last waiter gave up, the attempt's
// outcome was unknown) is released by its ID when it comes. Messages with
// the name alone, the lock's channel, the waiters' queue and the core's
// polling only say when to ask again. A
// request whose outcome is unknown (its context ended, its connection broke
// after it was sent) may have been applied, so it is released by its ID
// before the caller sees the error (on RedLock, on every master, as is a
// grant short of a majority or of validity); a resend of it by go-redis
// finds its hold by the ID and renews it, and a hold whose release fails
// belongs to nobody and expires by its TTL. A Cluster's MOVED and ASK
// replies say the script did not run, and the scripts fail before their
// first write, so only the loss of a reply leaves an outcome unknown. Extend
// and Release act only on the hold of their own ID, so a holder whose lease
// expired never touches its successor's. Token blocks follow the same rule:
// the script that makes a grant reserves its 16 tokens (on RedLock a
// majority's counters are past the block before the grant is reported), so the
// core's handoff to the Client's other goroutines uses tokens no other grant
// gets, over the same hold and under the same deadline.
//
// A lock is one hash, whose holds (a grant, a reentrant entry, a reader) are
// fields named by the request ID, 128 random bits: Extend and Release act
// only on the field of their own request, in one script, so a holder whose
// lease expired never extends or deletes the next holder's lock. Each hold
// carries its expiry, from the server's clock; the scripts ignore and prune
// holds past it, and the key itself expires with its latest hold. TTLs are
// rounded up to whole milliseconds, so a lease is never shorter than asked.
// Hold expiries are read from the server's wall clock (TIME), as Redis's own
// key expiries are: a server clock stepping forward ends leases early (the
// holder learns of it at its next renewal), one stepping back lengthens
// them.
//
// Fencing tokens come from a counter key per lock, stored without expiry and
// advanced in the same script as each new grant (a writer's, or each
// reader's; not a re-entry): the grant's token is max(counter+1, the
// server's clock in microseconds since 1970), and the counter moves to the
// end of its block (15 tokens further for a plain exclusive grant, which
// its Client may hand to its other goroutines; none for the others). They therefore strictly increase per
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
// The lock lives on one server: the single server, or on a Cluster the
// master that owns its slot. If that server fails over to a replica (by
// Sentinel, or by the Cluster promoting a replica), replication is
// asynchronous: a grant, renewal or counter advance that the master
// acknowledged but had not yet sent to the replica is lost. The window is
// the replication lag at the moment of the failure (usually well under a
// millisecond, unbounded under load or a slow link); a client that was
// granted the lock in it no longer holds it on the promoted replica, so a
// second client may be granted the same lock while the first still acts on
// it, until the first learns of the loss at its next renewal (at most a
// third of the TTL later). [WithReplicaAcks] (replica_acks= in the URL)
// closes that window for a failover to any replica that acknowledged: see
// "Replica acknowledgements". Fencing tokens survive the failover as long as the promoted
// replica's clock is not behind the old master's by more than the time the
// failover took (seconds: a Cluster waits cluster-node-timeout, 15 s by
// default): the counter then restarts from the replica's clock, above every
// lost token. Restarts without persistence free every lock at once, and
// holders learn of it at their next renewal. Use several independent servers (RedLock, below)
// or a consensus backend when that window matters, and check fencing tokens
// at the resource either way.
//
// # Replica acknowledgements
//
// [WithReplicaAcks] (URL parameters replica_acks=N and, optionally,
// replica_ack_timeout=) makes every grant, transfer and renewal of a
// Driver wait until N replicas have acknowledged it: the script and a
// WAIT N timeout go in one pipeline, on one connection, since WAIT counts
// the writes of its own connection (a refused attempt waits as well, for
// whatever it wrote to the waiters' queue: at once while the replicas keep
// up). A grant that fewer replicas
// acknowledged is released before Acquire returns, with an error wrapping
// [ErrNotReplicated] (transient: a waiting Lock keeps trying until enough
// replicas are back); a renewal that fewer acknowledged fails with it, and
// the core treats it as any failed renewal: the lease is uncertain, and
// lost at its deadline unless a later renewal is acknowledged. With N the
// number of replicas, a failover to any of them keeps every lock whose
// Lock returned: Sentinel promotes a replica, not necessarily one that
// acknowledged, so N below the number of replicas only narrows the window.
// WAIT makes the replicas' copy durable against a failover, not against a
// replica that restarts without persistence and is promoted before it
// resynchronised. The option applies to a single server and to Sentinel; a
// Cluster refuses it (WAIT counts one node's replicas) and RedLock refuses
// the URL parameter.
//
// Releases do not wait: a release a failover loses only keeps the lock
// until its TTL. N equal to the number of replicas trades availability
// for it: after a failover the new master has one replica fewer until the
// old master rejoins as its replica (or another is added), and grants fail
// meanwhile; a smaller N keeps granting but only narrows the window.
//
// Measured on a 2-core machine (a master, 2 replicas and 3 sentinels in
// containers on loopback; TestSentinelDoubleGrants with
// DLOCK_SENTINEL_TRIALS=5), one client taking new locks at about 400 a
// second through a forced failover (SENTINEL FAILOVER), and a client of the
// new master then trying each lock the first still held: without
// acknowledgements, 345 to 2,564 double grants per failover (5,686 of the
// 30,989 grants made during the 5 failovers), since every grant the old
// master makes between the promotion and the clients' switch to the new
// master (+switch-master, seconds later) is lost; with replica_acks=2, none
// (of 447 grants, the others refused with ErrNotReplicated until the old
// master rejoined). The median Lock+Unlock of one client (500 rounds) went
// from 405 µs to 433 µs.
//
// # RedLock
//
// [RedLock] holds a lock on a majority (N/2+1) of N independent masters,
// each with the same scripts and layout as a single server, so it has the
// same capabilities (read-write, reentrant, notifications, batched renewal,
// inspection). An acquisition sends the acquire script to every master at
// once, each request bounded by a per-master timeout far below the TTL
// ([WithNodeTimeout]; default a tenth of the TTL, from 2 ms to 100 ms), so a
// master that is down or hung costs little of the lease. It succeeds only
// with a majority of grants and only if validity is left: TTL − elapsed −
// drift > 0, the drift being 1% of the TTL plus 2 ms. Otherwise the request
// is released on every master that granted it or did not answer (one that
// timed out may have applied it; one that refused holds nothing of it) and
// refused: with ErrLocked when masters refused it because another owner
// holds the lock there, and otherwise with an error naming the masters'
// failures, or saying that the validity ran out (a TTL too short for the
// masters fails loudly instead of waiting forever).
// Extension succeeds with a majority within the validity, and reports
// ErrNotHeld once so many masters refuse it that no majority can hold it;
// release removes the hold everywhere. The lease's Validity is the TTL
// counted from the start of the call, as the core counts it: the time the
// masters took is thereby subtracted, and the core also subtracts the drift
// allowance, so the loss signal fires by TTL − elapsed − drift after the
// reply. Waiters subscribe on every master and are woken by the first
// release message from any of them.
//
// Waiting on RedLock is fair and quiet as on one server: a waiting Driver
// queues on every master, and only the queue's head is granted a free lock
// and woken by a release. Masters left to order their queues by their own
// clocks would disagree on the head and split their votes among several
// heads, none reaching a majority; so each waiter brings its place, a ticket
// (its client's clock in µs when it began waiting), which every master
// uses as its entry's order (lua/redlock_ticket.lua), and every master that
// knows the same waiters names the same head. The invariant that keeps this
// safe: the queue only ever refuses. A grant still needs a majority of
// masters, each running the same acquire script with the same exclusion
// rules, within the validity, so exclusion and fencing rest on the argument
// above whatever the queues hold; masters that disagree on the head (an
// entry lapsed on one, a leave that reached only some) can only delay a
// grant, until the head's next attempt rewrites its entry where it is
// missing or the stale entry lapses. (A grant takes the head out of a
// master's queue, so the release of a failed attempt writes its entry back
// first: lua/redlock_requeue.lua.) Likewise a queued attempt that a
// majority refused is not sent again until enough of the masters that
// refused it have sent a release's message (or their subscription took
// effect) to make a majority with the others, or the masters' "come back"
// time passes (at most a third of an entry's lifetime): the head does not
// try at the first master's message, to be refused by masters whose
// release has not run yet. That changes when requests are sent, never
// what a master grants. Under contention a critical section then costs
// the grant's first phase and the release on every master, the refused
// queued attempt with which a contended Lock joins the queue, and the
// second phase on the masters a majority needs beside the one that issued
// the token (2 of 5): on 5 masters about 17.5 requests with 16 processes
// contending, 18.5 with 64 (TestRedLock/RequestsPerSection).
//
// The queue's order is cached, so that a release finds the head without
// reading every entry (about 2 µs of server time per waiting Driver, on the
// path from one holder to the next: a call of the script that finds the
// head took 110 to 230 µs of server time with 64 waiting, 13 to 19 µs from
// the cache; BenchmarkQueueHead, on a loaded machine). A full reading of the queue writes, beside the entries, the
// first 16 live ones in order (by SEQ, the server's clock or RedLock's
// ticket, then by name), each with its SEQ; later readings take the first
// of them still live with that SEQ as the head. Safety does not rest on it:
// the cache only chooses which waiter is the head, and a lock is granted,
// by a release or an acquisition, only when it is free, exactly as without
// it. Liveness does, on RedLock above all, where masters that name
// different heads grant a free lock to no majority: the cached head is the
// head a full reading would name because of the cache's invariant, that
// every live entry is either named in it with its SEQ or comes after the
// last one named. A full reading makes it true; an entry renewed in place
// keeps its SEQ; and whenever a waiter's entry is written with a SEQ the
// cache does not name (a new entry, a lapsed one renewed, a waiter back
// with a new ticket), the write drops the cache unless that SEQ comes after
// the last one named. On one server a new SEQ is the server's clock and
// comes after every cached one, so the cache is kept; a RedLock ticket may
// reach a master after later ones did (tickets come from the clients), and
// then the cache there is dropped. A reading that finds no cached name live
// with its SEQ, or no cache, reads the whole queue and writes the cache
// again. (The first version of the cache named no SEQs and kept no bound:
// a late ticket, or a waiter back with a new one, left masters naming
// different heads, and TestRedLock/NoDoubleGrantUnderRandomDeadlines found
// the lock granted to nobody for 20 s; TestQueueHeadCacheUnderClientTickets
// and TestRedLock/LateTicketIsHead build those states.)
//
// Fencing tokens across masters. Each master has its own counter, so the
// highest token of one majority says nothing by itself about the next,
// which may be granted by other masters. RedLock therefore acquires in two
// phases: the token T is the highest the granting majority issued, and
// before the grant is reported a majority of masters must have counters at
// the end of T's block of 16, T+15, or beyond. A master that issued T (or
// more) reserved that block with its grant; T is written back to as many
// other granting masters as a majority still needs (their counters raised
// to T+15, their holds given T), one at least, and the grant stands when
// those acknowledge it; when some do not, the other granting masters are
// written to in a second round. Any later majority shares a master with
// that majority, whose counter is at least T+15, and so issues more:
// tokens strictly increase across grants, on any masters, for as long as
// no master loses its counter, and the Client may hand the lock to its own
// goroutines with T+1 … T+15 and no request (TokenBlock). A re-entry keeps
// the token of the entry it joins: a re-entry needs a majority of masters
// holding the entry, and so one whose hold has T (fewer than a majority
// hold it with a lower token, unwritten to). The second phase costs one
// more round trip per acquisition (in parallel, on 2 of 5 masters when all
// grant); renewal and release cost one.
//
// Inspecting across masters. A grant's first phase leaves each master a
// hold with a token of its own, marked pending; the second phase gives
// the hold the token T of the lease and settles it (lua/fence.lua) on the
// masters it writes to, and the others keep their pending hold, with T on
// the master that issued it and lower tokens elsewhere. The masters are
// read one by one, not at one instant, so Inspect reports a holder only by
// this rule: a quorum of the masters that answered must report the same
// hold, the same holder and value, settled on one of them at least with a
// token T that the others' pending holds do not exceed (or all hold a
// stranger's key), and then Info gives that hold's holder, its settled
// token T and value, with a TTL that a quorum of them still promise. A
// holder with two different settled holds among the masters has no
// pending hold counted for either. Otherwise, pending holds only (a grant
// between its phases, or one being given back) or masters that name
// different holds, the lock is reported free: a hold is never reported
// with a token other than the one its lease has (a settled hold's token is
// the one the second phase chose), nor before the second phase settled it
// somewhere, and an election's follower then sees no leader yet rather
// than a wrong term. A pending hold does not hide a
// settled one of the same owner (a re-entry under way). A holder is named
// by its acquisition's ID, which no other acquisition has, except when a
// Mutex has a reentrant owner (WithOwner; elections refuse one): then one
// exception remains, found in review and not tested. A settled hold that a
// release whose reply was lost left on one master lives until its TTL, and
// the same owner's next acquisition, between its phases, can add pending
// holds that count for it on masters whose tokens were below the earlier
// token, which needs masters' clocks apart by more than the time between
// the two acquisitions; Inspect then reports the earlier token. As on a single
// server, a grant reported by that rule whose acquisition still fails (its
// validity ran out, the acknowledgements were lost) is reported until
// the acquisition gives it back, before returning its error.
//
// What RedLock cannot promise. It is safe only under timing assumptions: the
// masters' clocks must run at nearly the same rate (the drift allowance),
// and a holder must not act after its deadline (the core's loss signal; a
// process paused past it is what fencing tokens are for). A master that
// restarts without persistence forgets its holds and its counter: a lock
// held by a bare majority that includes it can then be granted to a second
// client, and the master's counter restarts from its clock, below T if its
// clock is behind the highest token issued. dlock cannot prevent that from
// the client; run the masters with appendfsync always, or keep a restarted
// master out for one maximum TTL (the "delayed restart" of the RedLock
// description), and check tokens at the resource. A master is never
// counted twice: Open refuses a list that names one server twice (same
// host and port, "localhost" and loopback addresses alike, names resolved)
// and compares the servers' run IDs; [NewRedLock] compares addresses.
//
// # Keys
//
// A dlock key K is a byte string (the core limits it to 1 to 1024 bytes; this
// driver accepts every such key). The driver stores one lock under four
// Redis names, whose common hash tag keeps them in one Cluster hash slot
// (the channel included: sharded pub/sub hashes channel names as keys):
//
//	PREFIX{T}           the lock: a hash (see below)
//	PREFIX{T}:fence     the fencing counter
//	PREFIX{T}:released  the pub/sub channel the release publishes on
//	PREFIX{T}:waiters   the queue of Drivers waiting for the lock (a hash)
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
// The lock hash has a field "mode" ("x" exclusive, "s" shared) while held,
// one field "h:ID" per hold whose value is "EXPIRY TOKEN OWNER" (EXPIRY in
// milliseconds of the server's clock, OWNER the reentrant owner, possibly
// empty), a field "v:ID" beside a hold whose request carried a value, a
// field "p:ID" while a RedLock grant is between its phases, and a field
// "wait" while a writer keeps new readers out. A value of another shape at
// the lock's name (a string written by an older version of this driver, or
// by an operator) is treated as a lock held by a stranger: refused, never
// overwritten, extended or deleted. Older versions likewise see a hash as
// held (one with "v:" or "p:" fields as a stranger's), so old and new
// clients exclude each other during an upgrade, and share the fencing
// counter.
//
// # URLs
//
//	redis://[[user]:password@]host[:port][/db][?option=value&...]
//	rediss://...   (TLS)
//	redis+sentinel://[[user]:password@]sentinel1[:port],sentinel2[:port],.../master[/db][?option=value&...]
//	rediss+sentinel://...   (TLS, to the sentinels and the master)
//	redis+cluster://[[user]:password@]host1[:port],host2[:port],...[/][?option=value&...]
//	rediss+cluster://...   (TLS)
//	redlock://[[user]:password@]host1[:port],host2[:port],...[/db][?option=value&...]
//	redlocks://... (TLS)
//
// The URL is parsed by go-redis's ParseURL, so its query options (dial_timeout,
// read_timeout, pool_size, max_retries, skip_verify, ...) apply. The host
// defaults to localhost and the port to 6379; an IPv6 address must be in
// brackets ("redis://[::1]:6379"). One option is this driver's own:
// key_prefix sets the prefix of every Redis name (default "dlock:"), as
// [WithKeyPrefix] does; connect_timeout, which go-redis never sees, bounds
// Open (see dlock.DefaultConnectTimeout). Open pings the server once, bounded
// by its context and the connect timeout, so that a wrong address or
// password fails there. go-redis's process-wide logger goes to log/slog at
// Debug once this package is imported. The client it makes honours
// context deadlines (go-redis's ContextTimeoutEnabled), runs without go-redis's
// maintenance notifications (a Redis Enterprise and Cloud feature whose
// per-client machinery dlock does not need: a server that moves drops its
// connections, which a waiting Lock rides out), and the Driver closes it on
// Close. Errors about the URL wrap dlock.ErrInvalidURL and never contain
// the password.
//
// Replies that mean "not now" rather than "no" are transient errors, which
// a waiting Lock rides out: CLUSTERDOWN, TRYAGAIN, LOADING and MASTERDOWN
// from a server, and go-redis's pool timeout. They still match what they
// wrap (errors.Is, errors.As).
//
// A Sentinel URL lists sentinels, comma-separated (or as addr=host:port
// parameters; the port defaults to 26379), and names the master by the name
// they monitor it under, as the path's first segment (or go-redis's
// master_name parameter); the database follows it. The URL's credentials
// are the master's and its replicas'; the sentinels' own, if they have
// any, are the parameters sentinel_password and sentinel_username. The
// other options are a single server's: go-redis's (dial_timeout,
// read_timeout, ...), key_prefix, connect_timeout, and replica_acks and
// replica_ack_timeout (see "Replica acknowledgements"); go-redis's options
// that read from replicas (replica_only, route_randomly) are refused, since
// a lock must be read where it is written. The client is go-redis's
// failover client: it asks the sentinels for the master at every new
// connection and drops its connections when they announce a new one
// (+switch-master). Open pings the master the sentinels name. During a
// failover, commands fail or time out until the client follows it; those
// errors, and READONLY from a master just turned into a replica, are
// transient, so a waiting Lock rides them out, and a renewal that fails
// leaves the lease uncertain until one succeeds (see "Guarantees" for what a
// failover can lose, and "Replica acknowledgements" for how to keep it).
//
// A Cluster URL names some of the cluster's nodes, comma-separated (or as
// addr=host:port parameters): go-redis discovers the others from them. It
// has no database (a Cluster has database 0 only, so "/0" is accepted and
// nothing else), and takes go-redis's cluster options (dial_timeout,
// read_timeout, max_redirects, ...; see its ParseClusterURL) and key_prefix.
// Open pings the cluster.
//
// A RedLock URL lists its masters, comma-separated, in place of the host;
// the credentials, database and query options apply to each of them.
// Masters may also be given as addr=host:port parameters, which is the way
// to give IPv6 masters (net/url refuses a list of bracketed addresses). Its
// own options are key_prefix and node_timeout (a Go duration, as
// [WithNodeTimeout]). Open succeeds when a majority of the masters answer,
// and refuses masters that are the same server (see "RedLock").
package redis
