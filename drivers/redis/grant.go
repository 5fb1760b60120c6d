package redis

import (
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Grants by release: a release that frees a lock grants it at once to the
// Driver at the head of the lock's waiters' queue, and its message says so
// (see pass in scripts.go). The head's Driver then hands the lock to its
// waiting goroutine without a request of its own: a handoff between
// processes costs the release and the message, not a third trip.
//
// A grant is trusted only for the stay in the queue it was made for: each
// stay has an epoch, sent with every attempt that renews the entry, and
// carried by the grant's message. A stay ends when the Driver is granted
// the lock or leaves the queue (its last waiter gave up, and leaveScript
// passes a grant it was made meanwhile to the next head), so a message that
// arrives later names an epoch the Driver no longer has, and is dropped.
//
// The grant lasts until the head's queue entry would have lapsed: the
// server's time of the attempt that last renewed it, plus the entry's
// lifetime. The Driver counts that from the start of the attempt, which was
// no later, so it never believes in a grant longer than the server keeps it.

// stay is the Driver's current stay in one lock's queue.
type stay struct {
	epoch    uint64
	since    time.Time     // start of the attempt that last renewed the entry
	life     time.Duration // the entry's lifetime then
	token    uint64        // a grant the queue announced for this stay, or 0
	inflight int           // attempts of this stay under way, which may take the grant themselves
}

// enterQueue returns the epoch of the Driver's stay in n's queue, starting
// one when it has none, for an attempt that attempted must follow.
func (d *Driver) enterQueue(n names) uint64 {
	d.queuedMu.Lock()
	defer d.queuedMu.Unlock()
	st := d.queued[n.lock]
	if st == nil {
		st = &stay{epoch: d.epochs.Add(1)}
		d.queued[n.lock] = st
	}
	st.inflight++
	return st.epoch
}

// attempted records the outcome of an attempt of the stay epoch that
// started at since: granted ends the stay; refused renews its entry for
// life; failed (the outcome unknown) forgets an announced grant, which the
// attempt may have taken (and TryAcquire then gave back): the next attempt
// takes it, if it is still there, through the script.
func (d *Driver) attempted(n names, epoch uint64, since time.Time, life time.Duration, granted, failed bool) {
	d.queuedMu.Lock()
	defer d.queuedMu.Unlock()
	st := d.queued[n.lock]
	if st == nil || st.epoch != epoch {
		return
	}
	st.inflight--
	switch {
	case failed:
		st.token = 0
	case granted:
		delete(d.queued, n.lock)
	default:
		st.since, st.life = since, life
	}
}

// leaveQueue ends the Driver's stay in n's queue, and returns its epoch,
// and whether it had one: whether it may be in the queue, or have a grant
// from it that it has not taken.
func (d *Driver) leaveQueue(n names) (uint64, bool) {
	d.queuedMu.Lock()
	defer d.queuedMu.Unlock()
	st := d.queued[n.lock]
	delete(d.queued, n.lock)
	if st == nil {
		return 0, false
	}
	return st.epoch, true
}

// announced records a grant that a release announced on channel, for the
// stay epoch of this Driver.
func (d *Driver) announced(channel string, token, epoch uint64) {
	lock, ok := strings.CutSuffix(channel, channelSuffix)
	if !ok {
		return
	}
	d.queuedMu.Lock()
	defer d.queuedMu.Unlock()
	if st := d.queued[lock]; st != nil && st.epoch == epoch {
		st.token = token
	}
}

// takeGrant returns the lease of a grant announced for the Driver's stay in
// n's queue, ending the stay, or nil when there is none with validity left
// at now. While an attempt of the stay is under way it takes nothing: that
// attempt may take the grant itself (the acquire script does, for its own
// stay), and a grant must have one taker.
func (d *Driver) takeGrant(n names, req driver.Request, now time.Time) *lease {
	d.queuedMu.Lock()
	defer d.queuedMu.Unlock()
	st := d.queued[n.lock]
	if st == nil || st.token == 0 || st.since.IsZero() || st.inflight > 0 {
		return nil
	}
	validity := st.since.Add(st.life).Sub(now)
	if validity <= 0 || req.TTL <= 0 {
		st.token = 0 // lapsed: the next attempt finds out what is left
		return nil
	}
	delete(d.queued, n.lock)
	l := &lease{d: d, names: n, id: grantID(d.self, st.epoch, st.token), token: st.token}
	l.validity.Store(int64(min(validity, req.TTL)))
	return l
}

// grantID is the hold ID of a grant by release to the Driver named self, in
// its stay epoch (pass in scripts.go).
func grantID(self string, epoch, token uint64) string {
	return "q:" + self + ":" + strconv.FormatUint(epoch, 10) + ":" + strconv.FormatUint(token, 10)
}

// parseGrant reads a release's message "NAME TOKEN EPOCH" (pass in
// scripts.go); ok is false for any other message.
func parseGrant(payload string) (name string, token, epoch uint64, ok bool) {
	name, rest, ok := strings.Cut(payload, " ")
	if !ok {
		return "", 0, 0, false
	}
	tok, ep, ok := strings.Cut(rest, " ")
	if !ok {
		return "", 0, 0, false
	}
	token, err1 := strconv.ParseUint(tok, 10, 64)
	epoch, err2 := strconv.ParseUint(ep, 10, 64)
	if err1 != nil || err2 != nil || token == 0 {
		return "", 0, 0, false
	}
	return name, token, epoch, true
}
