package redis

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Grants by release. When a Driver's queued attempt allows it, the release
// that frees the lock grants it to that attempt's request ID and says so in
// the message on the Driver's personal channel (lua/release.lua); the
// Driver's next Acquire for the key then takes the lock from the message,
// with no request. This file keeps what that needs, per lock: the attempts
// the Driver sent (their request IDs and the local time each was sent), and
// a mailbox holding the grant a message brought until an Acquire claims it.
//
// What keeps it safe (see "Guarantees" in the package documentation):
//   - a grant is claimed only for an attempt this Driver sent, whose reply
//     has come back as a queued refusal (so no other outcome of that
//     request is pending: an attempt whose outcome is unknown is released
//     by its ID, never claimed), and only once: the attempt's state moves
//     to claimed under grants.mu;
//   - the claimed lease's validity is the hold's TTL less the time since
//     the attempt was sent: the server processed the attempt before the
//     grant (the grant names the attempt the queue recorded), so it keeps
//     the hold at least that long from the send. A message that comes late
//     leaves little or no validity, and is not claimed then;
//   - an ID whose grant the Driver will not claim (a waiter gave up, an
//     attempt failed, the claim came too late) is given back: released by
//     its ID, or named to the server as one the next attempt may take over
//     (lua/acquire.lua, "Take-over"), after it was marked unclaimable.
//
// A lost message costs latency: the waiter's next attempt (it comes back
// within a third of its queue entry's lifetime) names the unclaimed ID and
// takes the hold over, or the hold lapses with the entry.

// attemptState is where one queued attempt stands.
type attemptState uint8

const (
	inflight   attemptState = iota // sent, no reply yet: not claimable
	pending                        // refused and queued: its grant is claimable
	claimed                        // its grant became a lease, or its own reply granted it
	superseded                     // named for take-over, or replaced: never claimed
	abandoned                      // nobody will claim it: a grant for it is released
	// leaving: abandoned while in flight. A grant for it waits in the
	// mailbox for the reply: released if the reply is a refusal, never if
	// it is a grant (a resend of the request that found the hold), and
	// left to Acquire's own release when the outcome is unknown.
	leaving
)

// attempt is one queued attempt the Driver sent.
type attempt struct {
	id    string
	ttl   time.Duration // the request's; a claim must ask for the same
	sent  time.Time     // local, taken before the send
	state attemptState
}

// grantMsg is a grant a release's message brought.
type grantMsg struct {
	id      string
	token   uint64
	hold    time.Duration // how long the server keeps the hold from the grant
	seq     uint64        // the attempt it grants
	arrived time.Time     // local; only the test-only broken variant reads it
}

// lockGrants is the state of one lock, by its name (names.lock).
type lockGrants struct {
	next uint64
	// attempts holds the attempts something may still come of: an
	// attempt that becomes claimed or superseded is forgotten at once
	// (retire), since a message for it is then ignored whether it is
	// known or not; so under contention, where every critical section
	// adds an attempt, begin's scan stays short instead of covering every
	// attempt of the last keepAttempts.
	attempts map[uint64]*attempt
	box      *grantMsg // unclaimed, for an attempt still pending
	touched  time.Time
}

// grants is a Driver's state for grants by release, over all its locks.
type grants struct {
	d  *Driver
	mu sync.Mutex
	// locks holds the locks the Driver queued for lately; sweep forgets
	// the idle ones.
	locks   map[string]*lockGrants
	sweepAt time.Time
	// gives counts the releases of unclaimed grants under way, which
	// close waits for; closed (guarded by mu) stops new ones.
	gives  sync.WaitGroup
	closed bool

	// Test hooks (grants_test.go): intercept, when set, receives each
	// grant message with the function that delivers it, so that a test
	// can hold it back or deliver it twice; fromArrival makes the claim
	// count validity from the message's arrival, the deliberately broken
	// variant a test must catch.
	intercept   func(g grantMsg, deliver func())
	fromArrival bool
}

// keepAttempts is how long an attempt is remembered. Past it a message for
// it is ignored (its hold lapses by itself): the hold lasts at most a
// queue entry's lifetime after the grant, and the grant comes within one
// after the attempt, so such a message could not be claimed with any
// validity left, and a hold it would name is gone or about to be.
const keepAttempts = 3*maxQueueLife + time.Second

// minClaim is the least part of a grant's hold that must be left for a
// claim (validity ≥ hold/minClaim): less, and the lease would be lost
// almost at once, so the Driver asks again instead (take-over).
const minClaim = 4

func newGrants(d *Driver) *grants {
	return &grants{d: d, locks: map[string]*lockGrants{}}
}

// lock returns the state of the lock named name (names.lock), made when
// missing. Callers hold g.mu.
func (g *grants) lock(name string, now time.Time) *lockGrants {
	lg := g.locks[name]
	if lg == nil {
		lg = &lockGrants{attempts: map[uint64]*attempt{}}
		g.locks[name] = lg
	}
	lg.touched = now
	return lg
}

// retire forgets attempt seq, which has just become claimed or
// superseded: nothing more comes of it. deliver ignores a message for an
// attempt in either state as it ignores one for an unknown attempt (a
// duplicate, a take-over's ID), claim takes only pending attempts, and
// finish looks up only its own attempt, which nothing else retires
// before its reply: the others retire attempts already refused (pending,
// or abandoned after a refusal). Callers hold g.mu.
func (lg *lockGrants) retire(seq uint64) { delete(lg.attempts, seq) }

// sweep forgets attempts older than keepAttempts, and locks left with
// none, at most once a second. Callers hold g.mu.
func (g *grants) sweep(now time.Time) {
	if now.Before(g.sweepAt) {
		return
	}
	g.sweepAt = now.Add(time.Second)
	for name, lg := range g.locks {
		for seq, a := range lg.attempts {
			if now.Sub(a.sent) > keepAttempts {
				delete(lg.attempts, seq)
			}
		}
		if lg.box != nil && lg.attempts[lg.box.seq] == nil {
			lg.box = nil
		}
		// Idle for as long as an attempt is kept, as before retire: a
		// lock's attempt numbers never restart while a message for an
		// earlier one may come.
		if len(lg.attempts) == 0 && lg.box == nil && now.Sub(lg.touched) > keepAttempts {
			delete(g.locks, name)
		}
	}
}

// claim takes the grant in the mailbox of n, if one is there for an
// attempt still pending that asked for ttl (so that the hold lasts no
// longer than the claiming request allows), and enough validity is left
// counted from start, the start of the Acquire call: it then returns the
// grant and its validity, and the grant can never be claimed again.
func (g *grants) claim(n names, ttl time.Duration, start time.Time) (grantMsg, time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	lg := g.locks[n.lock]
	if lg == nil || lg.box == nil {
		return grantMsg{}, 0, false
	}
	m := *lg.box
	a := lg.attempts[m.seq]
	if a == nil || a.state != pending || a.id != m.id || a.ttl != ttl {
		return grantMsg{}, 0, false
	}
	from := a.sent
	if g.fromArrival {
		from = m.arrived // broken on purpose: see intercept
	}
	validity := m.hold - start.Sub(from)
	if validity < m.hold/minClaim {
		return grantMsg{}, 0, false // left for take-over by the next attempt
	}
	a.state = claimed
	lg.retire(m.seq)
	lg.box = nil
	return m, validity, true
}

// begin records a queued attempt of request id with ttl for n before it is sent,
// and returns its number and the ID the attempt may take over (or ""):
// the latest pending attempt's, whose grant, if the server made one, is
// made unclaimable here, before the server can drop it.
func (g *grants) begin(n names, id string, ttl time.Duration) (seq uint64, takeover string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now() // before the send, as sent must be
	g.sweep(now)
	lg := g.lock(n.lock, now)
	var last uint64
	for s, a := range lg.attempts {
		if a.state == pending && s > last {
			last = s
		}
	}
	if last != 0 {
		a := lg.attempts[last]
		a.state = superseded
		lg.retire(last)
		takeover = a.id
		if lg.box != nil && lg.box.seq == last {
			lg.box = nil
		}
	}
	lg.next++
	lg.attempts[lg.next] = &attempt{id: id, ttl: ttl, sent: now, state: inflight}
	return lg.next, takeover
}

// finish records the outcome of attempt seq of n: queued (refused, and
// in the queue), granted by its own reply, or neither (its outcome is
// unknown or it failed: Acquire then releases its ID itself). It gives
// back a grant a message brought for it meanwhile if it is abandoned.
func (g *grants) finish(n names, seq uint64, queued, granted bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	lg := g.locks[n.lock]
	if lg == nil {
		return
	}
	a := lg.attempts[seq]
	if a == nil {
		return
	}
	boxed := lg.box != nil && lg.box.seq == seq
	switch {
	case granted:
		a.state = claimed // a message for the same hold is a duplicate
		lg.retire(seq)
		if boxed {
			lg.box = nil
		}
	case queued && a.state == inflight:
		a.state = pending
	case queued && a.state == leaving:
		a.state = abandoned
		if boxed {
			a.state = superseded
			lg.retire(seq)
			lg.box = nil
			g.giveBack(n.lock, a.id)
		}
	case !queued:
		// Acquire releases the ID itself (or nothing was applied).
		a.state = abandoned
		if boxed {
			lg.box = nil
		}
	}
}

// deliver handles the grant message m for the lock named name,
// from the notifier's receive goroutine: into the mailbox when a waiter
// of this Driver may claim it, released by its ID when none will, ignored
// when it was claimed already or is unknown (a duplicate, or one so late
// that the attempt was forgotten: its hold lapses).
func (g *grants) deliver(name string, m grantMsg) {
	watched := g.d.notify.watching(names{lock: name}.channel())
	g.mu.Lock()
	defer g.mu.Unlock()
	lg := g.locks[name]
	if lg == nil {
		return
	}
	a := lg.attempts[m.seq]
	if a == nil || a.id != m.id {
		return
	}
	switch a.state {
	case inflight, leaving, pending:
		if a.state == pending && !watched {
			a.state = abandoned
			g.giveBack(name, m.id)
			return
		}
		if lg.box != nil && lg.box.seq != m.seq {
			// Two grants at once cannot both be live (each frees the lock
			// for the next); keep the newest, let the other lapse.
			if old := lg.attempts[lg.box.seq]; old != nil && old.state == pending {
				old.state = superseded
				lg.retire(lg.box.seq)
			}
		}
		lg.box = &m
	case abandoned:
		a.state = superseded // released once is enough
		lg.retire(m.seq)
		g.giveBack(name, m.id)
	}
}

// abandon is called when the Driver's last waiter for n left: no grant
// of an attempt sent so far will be claimed. An unclaimed grant in the
// mailbox is released at once (synchronously, so that the lock is free
// for others when the waiter's Lock has returned), and a grant message
// still on its way is released when it comes.
func (g *grants) abandon(n names) {
	g.mu.Lock()
	lg := g.locks[n.lock]
	var give string
	if lg != nil {
		if lg.box != nil {
			if a := lg.attempts[lg.box.seq]; a != nil && a.state == pending {
				give = lg.box.id
				a.state = superseded
				lg.retire(lg.box.seq)
				lg.box = nil
			}
		}
		for _, a := range lg.attempts {
			switch a.state {
			case inflight:
				a.state = leaving // see leaving
			case pending:
				a.state = abandoned
			}
		}
	}
	g.mu.Unlock()
	if give != "" {
		g.release(n, give)
	}
}

// release releases hold id of the lock n, bounded by commandTimeout; a
// failure is left to lapse with the queue entry's lifetime.
func (g *grants) release(n names, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	_, _ = release(ctx, g.d.client, n, id, g.d.publish)
}

// giveBack releases hold id of the lock named name, in the
// background: the receive goroutine must not wait for a command. Callers
// hold g.mu.
func (g *grants) giveBack(name, id string) {
	if g.closed {
		return // the hold lapses with the queue entry's lifetime
	}
	g.gives.Add(1)
	go func() {
		defer g.gives.Done()
		g.release(names{lock: name}, id)
	}()
}

// close stops new releases of unclaimed grants and waits for those under
// way (each bounded by commandTimeout), so that none outlives Driver.Close.
func (g *grants) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.gives.Wait()
}

// parseGrant parses the payload of a message on the Driver's personal
// channel: "NAME ID TOKEN TTL ASEQ" is a grant (ok), anything else is not.
// NAME has been checked by the caller.
func parseGrant(payload string) (grantMsg, bool) {
	f := strings.Fields(payload)
	if len(f) != 5 {
		return grantMsg{}, false
	}
	token, err1 := strconv.ParseUint(f[2], 10, 64)
	ms, err2 := strconv.ParseInt(f[3], 10, 64)
	seq, err3 := strconv.ParseUint(f[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || ms <= 0 {
		return grantMsg{}, false
	}
	return grantMsg{id: f[1], token: token, hold: time.Duration(ms) * time.Millisecond, seq: seq}, true
}

// onMessage handles a grant message on the personal channel personal,
// before its waiters are woken.
func (g *grants) onMessage(personal, payload string) {
	m, ok := parseGrant(payload)
	if !ok {
		return
	}
	name := strings.TrimSuffix(strings.TrimSuffix(personal, ":"+g.d.self), ":released")
	deliver := func() {
		m.arrived = time.Now()
		g.deliver(name, m)
	}
	if g.intercept != nil {
		g.intercept(m, deliver)
		return
	}
	deliver()
}
