package memcache

import (
	"errors"
	"strconv"
	"sync"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
)

// The line of waiters (see "Waiting in line" in the package documentation).
// memcached cannot queue a request or wake anyone, so the driver keeps a
// ticket counter ("next") and a served counter ("served") beside each lock,
// and tells a waiter that has a ticket to poll soon when its turn is near and
// late when it is far. Tickets only pace the polling: the lock is still
// granted by the add of its item alone.
const (
	// window is how many tickets past the last served one poll fast and
	// try the add: more than one, so that a ticket whose Driver has gone
	// does not hold the lock free until its absence is noticed, and so that
	// a release is seen by one of them sooner than by a lone poller.
	window = 3

	// fastRetry is the RetryAfter of a waiter inside the window: the core
	// then polls a millisecond later (it never sleeps more than one
	// millisecond past a reported RetryAfter). Any more and a timer
	// that fires on a coarse tick (about 1.08 ms on the test machines)
	// waits two ticks.
	fastRetry = time.Microsecond

	// backStep and backMax bound the RetryAfter of a waiter beyond the
	// window, which grows with its distance (see turn.retryAfter), so that
	// the waiters far back poll rarely and read only the counters, without
	// trying the add.
	backStep = time.Millisecond
	backMax  = 100 * time.Millisecond

	// stallAfter and stallPolls bound how long a waiter beyond the window
	// defers to the tickets ahead of it: once served has not moved for
	// stallAfter, or over stallPolls of its polls in a row, it tries the add
	// at each poll as well, so that tickets whose Drivers left (closed,
	// crashed, or gave up waiting) never keep a free lock idle for longer.
	stallAfter = 100 * time.Millisecond
	stallPolls = 8

	// ticketIdle is how long a Driver keeps a ticket it does not use: a
	// ticket unused for that long (its waiter gave up: nothing tells the
	// Driver so, see driver.Request.Wait) is forgotten, and the next
	// refused attempt of a waiting Lock takes a new one at the back of the
	// line.
	ticketIdle = time.Second

	// courtesy is how long after a grant taken with a ticket, while others
	// held tickets behind it, the Driver's next attempt on that lock joins
	// the line before it tries the add: a holder that unlocks and locks
	// again at once would otherwise take the lock back before the waiters
	// polled.
	courtesy = 200 * time.Millisecond

	// counterSeconds is the expiry of the two counters, in seconds: they
	// are rewritten (served) or touched (next) by the grants that use them,
	// so a lock nobody waits for leaves them to expire.
	counterSeconds = 600
	// touchEvery is how often at most a Driver touches a "next" counter.
	touchEvery = time.Minute

	// maxPlaces bounds the Drivers' table of places, as maxHints does the
	// hints.
	maxPlaces = 4096
)

// place is what a Driver knows of its turn at one lock.
type place struct {
	ticket  uint64        // the Driver's ticket, 0 for none
	used    time.Time     // when the ticket was last used by an attempt
	served  uint64        // the served counter as last read (0: missing)
	next    uint64        // the ticket counter as last read
	moved   time.Time     // when served was last seen to change
	still   int           // polls in a row that found served unchanged
	near    bool          // the ticket was seen inside the window
	gap     time.Duration // the time per ticket served, averaged, 0 until known
	polite  time.Time     // until when a new attempt joins the line first
	touched time.Time     // when this Driver last refreshed the "next" counter
}

// places is a Driver's table of places, per lock item name.
type places struct {
	mu sync.Mutex
	m  map[string]*place
}

// get returns the place for name, made when missing. The caller holds mu.
func (p *places) get(name string, now time.Time) *place {
	if pl, ok := p.m[name]; ok {
		return pl
	}
	if p.m == nil {
		p.m = make(map[string]*place)
	}
	if len(p.m) >= maxPlaces {
		for k, pl := range p.m {
			if now.Sub(pl.used) > ticketIdle && now.After(pl.polite) {
				delete(p.m, k)
			}
		}
		if len(p.m) >= maxPlaces {
			clear(p.m)
		}
	}
	pl := &place{}
	p.m[name] = pl
	return pl
}

// turn is a Driver's view of its turn, taken before an attempt.
type turn struct {
	ticket uint64        // 0: no ticket, the attempt behaves as without a line
	pos    uint64        // the ticket's distance from the last served one (1: next)
	tryAdd bool          // the attempt should try the add
	gap    time.Duration // the time one ticket was seen to take, when known
}

// retryAfter is the RetryAfter of a refused attempt with this turn: beyond
// the window, half the time the line should take to bring the ticket into
// it, by the time a ticket was seen to take (so that the window is refilled
// about as soon as a ticket leaves it), at least backStep and up to backMax.
func (t turn) retryAfter() time.Duration {
	if t.ticket == 0 || t.pos <= window {
		return fastRetry
	}
	return min(max(time.Duration(t.pos-window)*t.gap/2, backStep), backMax)
}

// checkIn returns the turn of an attempt on n: with the Driver's ticket when
// it has one that is not stale (or takes one when the Driver just let go of
// the lock while others waited), and the counters read. Errors reading or
// taking counters are not returned: the attempt then behaves as without a
// line.
func (d *Driver) checkIn(n names) turn {
	now := time.Now()
	d.places.mu.Lock()
	pl, seen := d.places.m[n.lock]
	if !seen {
		// No line seen on this lock: the uncontended path, as before.
		d.places.mu.Unlock()
		return turn{tryAdd: true}
	}
	if pl.ticket != 0 && now.Sub(pl.used) > ticketIdle {
		pl.ticket = 0
	}
	ticket := pl.ticket
	if ticket != 0 && pl.near {
		// Inside the window it stays (served only grows): try the add
		// without reading the counters again.
		pl.used = now
		d.places.mu.Unlock()
		return turn{ticket: ticket, pos: 1, tryAdd: true}
	}
	join := ticket == 0 && now.Before(pl.polite)
	pl.polite = time.Time{}
	d.places.mu.Unlock()
	if ticket == 0 && !join {
		return turn{tryAdd: true}
	}
	if ticket == 0 {
		if ticket = d.takeTicket(n); ticket == 0 {
			return turn{tryAdd: true}
		}
	}
	served, next, ok := d.readCounters(n)
	now = time.Now()
	d.places.mu.Lock()
	defer d.places.mu.Unlock()
	pl = d.places.get(n.lock, now)
	if pl.ticket == 0 || pl.ticket > ticket {
		pl.ticket, pl.moved, pl.still, pl.near = ticket, now, 0, false
	}
	ticket = pl.ticket
	pl.used = now
	if !ok || next < ticket {
		// The counters are gone or were started again since the ticket
		// was taken: the line is lost, and the attempt goes as without.
		pl.ticket = 0
		return turn{tryAdd: true}
	}
	if served != pl.served {
		if pl.served != 0 && served > pl.served {
			// Since served was last seen to move: an upper bound, by
			// up to one poll, on the time per ticket.
			gap := now.Sub(pl.moved) / time.Duration(served-pl.served)
			if pl.gap == 0 {
				pl.gap = gap
			} else {
				pl.gap = (3*pl.gap + gap) / 4
			}
		}
		pl.served, pl.moved, pl.still = served, now, 0
	} else {
		pl.still++
	}
	pl.next = next
	// Without "served", nobody was served with a ticket since "next" was
	// started (at 1), or it was lost: count from 0, and let the stall rule
	// below bound the cost of the second case.
	t := turn{ticket: ticket, pos: 1, gap: pl.gap}
	if ticket > served {
		t.pos = ticket - served
	}
	pl.near = t.pos <= window
	t.tryAdd = pl.near || now.Sub(pl.moved) >= stallAfter || pl.still >= stallPolls
	return t
}

// refused records a refused attempt of a waiting Lock without a ticket: the
// Driver takes one, so that its following attempts wait in line.
func (d *Driver) refused(n names) {
	now := time.Now()
	d.places.mu.Lock()
	pl := d.places.get(n.lock, now)
	has := pl.ticket != 0
	d.places.mu.Unlock()
	if has {
		return
	}
	ticket := d.takeTicket(n)
	if ticket == 0 {
		return
	}
	now = time.Now()
	d.places.mu.Lock()
	defer d.places.mu.Unlock()
	pl = d.places.get(n.lock, now)
	if pl.ticket == 0 {
		pl.ticket, pl.used, pl.moved, pl.still, pl.near = ticket, now, now, 0, false
	}
}

// admitted records a grant taken in turn t: it raises served to the ticket,
// so that the tickets behind it move up, and, when others held tickets behind
// it, makes the Driver's next attempt on the lock join the line first. The
// requests are made in the background, so that the grant does not wait for
// them (Close does).
func (d *Driver) admitted(n names, t turn) {
	if t.ticket == 0 {
		return
	}
	now := time.Now()
	d.places.mu.Lock()
	pl := d.places.get(n.lock, now)
	pl.ticket, pl.near = 0, false
	if pl.next > t.ticket {
		// As last read: the background read below may find more.
		pl.polite = now.Add(courtesy)
	}
	touch := now.Sub(pl.touched) >= touchEvery
	if touch {
		pl.touched = now
	}
	d.places.mu.Unlock()
	done, ok := d.inflight.Enter()
	if !ok {
		return
	}
	go func() {
		defer done()
		d.serve(n, t.ticket, now)
		if touch {
			_, _ = d.call(func() error { return d.mc.Touch(n.next, counterSeconds) })
		}
	}()
}

// serve raises the served counter of n to ticket, granted at, by a
// compare-and-swap on the value read, so that it never goes down however
// the raises of successive holders interleave; it starts the counter when
// missing. The write refreshes its expiry. It also learns from "next"
// whether tickets were taken behind ticket, for the courtesy.
func (d *Driver) serve(n names, ticket uint64, at time.Time) {
	for range 3 {
		var items map[string]*gomemcache.Item
		_, err := d.call(func() (err error) { items, err = d.mc.GetMulti([]string{n.served, n.next}); return err })
		if err != nil {
			return
		}
		if next, ok := counterValue(items[n.next]); ok && next > ticket {
			d.places.mu.Lock()
			if pl := d.places.get(n.lock, at); pl.ticket == 0 && pl.polite.Before(at.Add(courtesy)) {
				pl.polite = at.Add(courtesy)
			}
			d.places.mu.Unlock()
		}
		it := items[n.served]
		cur, known := counterValue(it)
		value := strconv.AppendUint(nil, ticket, 10)
		switch {
		case it == nil:
			err = d.mc.Add(&gomemcache.Item{Key: n.served, Value: value, Expiration: counterSeconds})
		case !known, cur >= ticket:
			return
		default:
			it.Value, it.Expiration = value, counterSeconds
			err = d.mc.CompareAndSwap(it)
		}
		if !errors.Is(err, gomemcache.ErrNotStored) && !errors.Is(err, gomemcache.ErrCASConflict) {
			return
		}
	}
}

// takeTicket draws a ticket from the "next" counter, starting it when
// missing; it returns 0 when that fails.
func (d *Driver) takeTicket(n names) uint64 {
	for range 2 {
		var v uint64
		_, err := d.call(func() (err error) { v, err = d.mc.Increment(n.next, 1); return err })
		switch {
		case err == nil:
			return v
		case !errors.Is(err, gomemcache.ErrCacheMiss):
			return 0
		}
		item := &gomemcache.Item{Key: n.next, Value: []byte("1"), Expiration: counterSeconds}
		_, err = d.call(func() error { return d.mc.Add(item) })
		switch {
		case err == nil:
			return 1
		case !errors.Is(err, gomemcache.ErrNotStored):
			return 0
		}
	}
	return 0
}

// readCounters reads "served" (0 when missing) and "next" together, one
// request per server holding them; ok is false when "next" is missing or the
// read failed.
func (d *Driver) readCounters(n names) (served, next uint64, ok bool) {
	var items map[string]*gomemcache.Item
	_, err := d.call(func() (err error) { items, err = d.mc.GetMulti([]string{n.served, n.next}); return err })
	if err != nil {
		return 0, 0, false
	}
	next, ok = counterValue(items[n.next])
	if !ok {
		return 0, 0, false
	}
	served, _ = counterValue(items[n.served])
	return served, next, true
}

// counterValue parses a counter item.
func counterValue(it *gomemcache.Item) (uint64, bool) {
	if it == nil {
		return 0, false
	}
	v, err := strconv.ParseUint(string(it.Value), 10, 64)
	return v, err == nil
}
