package conformance

import "time"

// testCase is one row of the suite: a rule from the documentation and the
// check of it.
type testCase struct {
	name string
	// rule is what the case checks, restated from the documentation of
	// package dlock or package driver.
	rule string
	// serial cases interfere with the whole backend (faults, or the load of
	// a contest) and run one at a time.
	serial bool
	// ttls is how many TTLs the case may take, beyond a fixed allowance.
	ttls int
	// contest cases run for as long as DLOCK_RANDOM_DEADLINES says, beyond
	// their TTLs.
	contest bool
	run     func(t *T, e *env)
}

func (c testCase) limit(ttl time.Duration) time.Duration {
	d := 30*time.Second + time.Duration(max(c.ttls, 4))*ttl
	if c.contest {
		length, _ := contestLengthFromEnv() // a bad value fails the case at once
		d += length
	}
	return d
}

// cases is the suite. The self-tests name cases from it: keep names stable.
var cases = []testCase{
	{name: "MutualExclusion", ttls: 20, run: testMutualExclusion,
		rule: "at most one holder at a time: 8 independent clients with 4 goroutines each never overlap in the guarded section, never present a stale fencing token, and lose no write"},
	{name: "WaitersServedInOrder", ttls: 10, run: testWaitersServedInOrder,
		rule: "a client's goroutines waiting for one lock all acquire it, in the order they arrived"},
	{name: "ClientsServedInOrder", ttls: 30, run: testClientsServedInOrder,
		rule: "where the harness declares ClientsServedInOrder: clients waiting for one lock, each started once the one before it is queued at the backend (the Inspector's Waiters), get it in the order they queued, with rising tokens"},
	{name: "TryLockHeld", run: testTryLockHeld,
		rule: "TryLock on a held lock returns ErrLocked at once and leaves the holder's lock untouched"},
	{name: "DoubleUnlock", run: testDoubleUnlock,
		rule: "a second Unlock of a lease returns ErrNotHeld and does not release the lock another owner took meanwhile"},
	{name: "StaleUnlock", ttls: 6, run: testStaleUnlock,
		rule: "a holder whose lease expired cannot release the lock that another client now holds (driver Release returns ErrNotHeld; core Unlock reports the loss)"},
	{name: "StaleExtend", ttls: 6, run: testStaleExtend,
		rule: "a holder whose lease expired cannot extend the lock that another client now holds: Extend returns ErrNotHeld and changes nothing"},
	{name: "ReleaseRacingExpiry", ttls: 40, run: testReleaseRacingExpiry,
		rule: "a release that reaches the backend just as the lease expires never removes the lock of the next holder"},
	{name: "ExpiryAfterHolderVanishes", ttls: 8, run: testExpiryAfterHolderVanishes,
		rule: "a lock whose holder disappears without unlocking becomes free within its TTL (plus a margin), and not before the holder's validity deadline"},
	{name: "RenewalKeepsLock", ttls: 8, run: testRenewalKeepsLock,
		rule: "with renewal on, a lock stays held across at least 3 TTLs: contenders fail, the lease stays valid and its deadline moves forward"},
	{name: "ManualExtend", ttls: 8, run: testManualExtend,
		rule: "with renewal off, Extend moves the deadline; without it the lost signal fires by the validity deadline and the lock frees within the TTL"},
	{name: "LostSignalOnDelete", ttls: 6, run: testLostOnDelete,
		rule: "when the lock is deleted behind the holder's back, the lost signal fires within a TTL and Err wraps ErrLockLost"},
	{name: "LostSignalOnOverwrite", ttls: 6, run: testLostOnOverwrite,
		rule: "when the lock is taken over behind the holder's back, the lost signal fires within a TTL, and the old holder's Unlock leaves the new owner's lock alone"},
	{name: "LossReports", ttls: 4, run: testLossReports,
		rule: "a lease's own loss report (driver.Lease.OnLoss) comes at most once and gives a reason, and a lease reports nothing once released, not even when its driver closes"},
	{name: "RenewalFailureIsolated", ttls: 8, run: testRenewalFailureIsolated,
		rule: "renewals are batched per client, and a failed renewal reaches exactly the leases it concerns: one tampered lock among 20 is lost, the other 19 stay held"},
	{name: "RenewalBlocked", ttls: 8, run: testRenewalBlocked,
		rule: "when renewal cannot reach the backend, the lease first reports Uncertain, then the lost signal fires no later than the validity deadline, and a contender gets the lock within TTL plus a margin"},
	{name: "SlowAcquireReply", ttls: 8, run: testSlowAcquireReply,
		rule: "validity is counted from the start of the acquire call: a reply delayed beyond the TTL yields no lease, and no lease's deadline is later than call start plus TTL"},
	{name: "CancelledWait", run: testCancelledWait,
		rule: "a Lock whose context ends returns exactly ctx.Err() promptly and leaves nothing behind on the backend"},
	{name: "FencingTokens", ttls: 6, run: testFencingTokens,
		rule: "fencing tokens strictly increase across release, expiry and re-acquire, on any client"},
	{name: "UseAfterClose", run: testUseAfterClose,
		rule: "Close releases held locks, wakes blocked Lock calls with ErrClosed, ends leases with ErrClosed, and every later call returns ErrClosed"},
	{name: "BadKeys", run: testBadKeys,
		rule: "bad keys get ErrInvalidKey; hostile keys (spaces, CRLF, NUL, invalid UTF-8, braces, path elements) either work as distinct locks or get ErrInvalidKey, never a panic or another key's lock"},
	{name: "BadOptions", run: testBadOptions,
		rule: "TTLs outside 10 ms to 30 days get ErrInvalidTTL, other bad option values ErrInvalidOption, and options the driver cannot honour errors.ErrUnsupported"},
	{name: "Capabilities", run: testCapabilities,
		rule: "the driver's Capabilities pass Check and are the same value on every call and every client of the backend; a TTL just outside the declared MinTTL or MaxTTL gets ErrInvalidTTL from the core, and a lock with a TTL at each declared limit is granted"},
	{name: "Reentrancy", run: testReentrancy,
		rule: "with WithOwner, the same owner re-enters at once with the same token; other owners are excluded until every entry is unlocked"},
	{name: "ReadersShare", run: testReadersShare,
		rule: "readers share a read-write lock and exclude writers until the last reader leaves; a writer excludes readers"},
	{name: "ReadWriteExclusion", ttls: 20, run: testReadWriteExclusion,
		rule: "under contention, readers overlap only readers and a writer overlaps nobody"},
	{name: "Transfer", run: testTransfer,
		rule: "a driver's Transferer hands a held exclusive lock to another request atomically, with a greater token; the former holder can no longer release, extend or transfer it, and a shared read lock is not transferred"},
	{name: "AnyAcquire", run: testAnyAcquire,
		rule: "a driver's AnyAcquirer grants the first free lock among several, as Acquire would grant it (a plain Acquire of the key is excluded, and its token continues the key's sequence); it takes one lock only, and a call refused because every lock is held, or whose context has ended, takes none"},
	{name: "TokenBlock", run: testTokenBlock,
		rule: "the grants of a driver with a TokenBlock (acquisitions and transfers) each reserve their block of fencing tokens: no later grant, on any client, gets a token inside it"},
	// Semaphores: dlock.Semaphore, built by the core over the driver's locks.
	{name: "SemaphoreBound", ttls: 20, run: testSemaphoreBound,
		rule: "a semaphore of 3 permits contended by 4 independent clients (2 goroutines each waiting in Acquire, 1 trying with TryAcquire) never has more than 3 permits trusted at once, never two holders of one permit, and each permit's tokens rise"},
	{name: "SemaphoreTryAcquire", ttls: 6, run: testSemaphoreTryAcquire,
		rule: "TryAcquire with every permit held returns ErrLocked, and an Acquire whose context ends returns exactly ctx.Err(); neither disturbs the holders nor leaves anything behind: once the permits are given back, each of the semaphore's locks is free"},
	{name: "SemaphoreClientsServedInOrder", ttls: 30, run: testSemaphoreClientsServedInOrder,
		rule: "where the harness declares ClientsServedInOrder: clients waiting for the one permit of a semaphore, the first holding the gate and each other started once the one before it is queued at the gate (the Inspector's Waiters), get the permit in the order they came, with rising tokens"},
	{name: "SemaphoreHolderVanishes", ttls: 8, run: testSemaphoreHolderVanishes,
		rule: "the permits of a holder that disappears without giving them back are granted again within their TTL (plus a margin), not before the holder's deadlines unless it was told, with rising tokens"},
	{name: "SemaphoreFrozenHolder", ttls: 12, run: testSemaphoreFrozenHolder,
		rule: "while a client that holds every permit, and waits for one more at the gate, is frozen longer than the TTL, another client gets a permit, and no more permits than the semaphore has are trusted at once, before or after the thaw"},
	{name: "SemaphorePartitionedHolder", ttls: 12, run: testSemaphorePartitionedHolder,
		rule: "a client holding every permit cut off from the backend past the TTL loses them: another client gets a permit within the TTL plus a margin, never before the holder's deadline without it being told, the holder's lost signals fire by their deadlines, and once the link is back its Unlocks leave the new holder's permit alone"},
	// Elections: dlock.Election, built by the core over one exclusive lock
	// per key and the value the driver stores with the hold.
	{name: "ElectionOneLeader", ttls: 20, run: testElectionOneLeader,
		rule: "8 candidates on 4 independent clients campaigning over and over never lead at once (no two leaderships trusted at once), terms strictly rise from one leadership to the next, and no Deadline is later than the TTL after Campaign returned"},
	{name: "ElectionLeaderReports", ttls: 8, run: testElectionLeaderReports,
		rule: "with Capabilities.Values, Leader on another client reports exactly the leader's value and its Lease.Token (values up to MaxValueLen bytes of printable UTF-8), ErrNoLeader when nobody leads, and a leader that vanishes without resigning is followed within the TTL (plus a margin) by another candidate with a greater term, not before its deadline unless it was told"},
	{name: "ElectionObserve", ttls: 10, run: testElectionObserve,
		rule: "with Capabilities.Values, an observer on another client reports the leader at the start, then each leader that holds until it was reported, in order, with strictly rising terms, never a value and term that no leader had, and the vacancy once nobody leads"},
	{name: "ElectionCampaignCancelled", run: testElectionCampaignCancelled,
		rule: "a Campaign whose context ends while another candidate leads returns exactly ctx.Err() promptly, disturbs no leader, and leaves nothing behind: once the leader resigns, a candidate of a third client wins at once (no entry of the cancelled one is left first in a backend's line), and then the cancelled candidate too"},
	{name: "ElectionPartitionedLeaderLoses", ttls: 12, run: testElectionPartitionedLeaderLoses,
		rule: "a leader cut off from the backend stops leading by its deadline, which its unanswered renewals do not move (its lost signal fires, Err wraps ErrLockLost); another candidate wins within the TTL plus a margin, never before that deadline without the old leader being told, with a greater term; and once the link is back the old leader's Resign leaves the new leader alone"},
	{name: "RandomDeadlines", serial: true, ttls: 10, contest: true, run: testRandomDeadlines,
		rule: "under Lock and Unlock deadlines from a tenth of a round trip to several (3 clients x 4 goroutines on one key), no two leases are trusted at once (granted, not yet unlocking, before their deadline, not reported lost), fencing tokens strictly rise in grant order, no Deadline is later than the TTL after its Lock returned, and no Extend or Unlock finds the lock gone (ErrLockLost) before the lease's Deadline"},
	{name: "AppliedAfterTimeout", serial: true, ttls: 10, contest: true, run: testAppliedAfterTimeout,
		rule: "requests that reach the backend late, some after their caller was told its context ended (Acquire, with and without Block, Transfer, Extend, Release), break neither mutual exclusion nor token order nor the Deadline promise, and a lock granted to a caller that is gone is free again within the TTL"},
	{name: "SemaphoreAppliedAfterTimeout", serial: true, ttls: 14, contest: true, run: testSemaphoreAppliedAfterTimeout,
		rule: "requests that reach the backend late, some after their caller was told its context ended (a driver's AcquireAny, or each permit's Acquire, and the gate's), break no semaphore promise (3 independent clients x 3 goroutines taking 3 permits with TryAcquire and Acquire under random deadlines never have more than 3 permits trusted at once, never two holders of one permit, each permit's tokens rise), and once every late request has landed each of the semaphore's locks is free again within the TTL: a permit granted to a caller that is gone, or that the driver may have been granted as its caller gave up (requirement 2: AcquireAny releases every request's ID), lapses or is given back"},
	{name: "FrozenWaiter", ttls: 12, run: testFrozenWaiter,
		rule: "a client frozen longer than the TTL while three of its goroutines wait (every driver call and wake-up stalled) comes out with no lapsed grant: no two leases are trusted at once, tokens rise, and no Deadline is later than the TTL after its Lock returned"},
	{name: "FrozenHolder", ttls: 12, run: testFrozenHolder,
		rule: "while a client that holds a lock is frozen longer than the TTL (every driver call and wake-up stalled), another client gets the lock, and the frozen client hands no lapsed hold to its waiting goroutine: no two leases are trusted at once and tokens rise"},
	{name: "LateNotifications", serial: true, ttls: 12, contest: true, run: testLateNotifications,
		rule: "wake-ups held back, duplicated and out of step with the lock are hints only: the contest of RandomDeadlines keeps mutual exclusion and token order, and a waiter still gets a released lock promptly"},
	{name: "GrantCancelRace", ttls: 30, run: testGrantCancelRace,
		rule: "a Lock or TryLock whose context is cancelled as the backend grants it returns a valid lease or exactly context.Canceled, and after the latter the lock is free again within the TTL plus a margin"},
	{name: "BackendPaused", serial: true, ttls: 12, run: testBackendPaused,
		rule: "a backend paused beyond the TTL makes the holder's lost signal fire by its deadline, and after the pause at most one client holds the lock; a short pause changes nothing"},
	{name: "BackendRestarted", serial: true, ttls: 12, run: testBackendRestarted,
		rule: "after a backend restart the holder learns of a lost lock at the next renewal, and tokens never go backwards"},
	{name: "LockWaitsThroughRestart", serial: true, ttls: 16, run: testLockWaitsThroughRestart,
		rule: "a Lock waiting while the backend restarts, and while it is paused, rides out the outage: it is granted once the backend is back and the lock free, with no error, inside its context"},
	// Partitions: one client cut off from the backend (Harness.NewLinkedDriver).
	{name: "PartitionedHolder", ttls: 12, run: testPartitionedHolder,
		rule: "a holder cut off from the backend past its TTL (renewal on) loses the lock: another client gets it within the TTL plus a margin, never before the holder's deadline without the holder being told, the holder's lost signal fires by its deadline, and once the link is back its Unlock and Extend (core and driver) change nothing and tokens rise"},
	{name: "SilentHolder", ttls: 8, run: testSilentHolder,
		rule: "a holder whose renewals and the driver's own heartbeats and keep-alives stop reaching the backend, its process and connections alive, has its locks freed by the backend within the TTL plus a margin, and the new holders keep them, also once the silent holder's late messages arrive"},
}
