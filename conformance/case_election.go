package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// The election cases: dlock's Election, which the core builds over one
// exclusive lock per key and the value the driver stores with it, keeps its
// promises on every driver. Leadership is a lease, so the cases judge it as
// the lock cases judge leases; what the backend reports of its leader
// (Leader, Observe) is checked against the leaderships the candidates won.

func testElectionOneLeader(t *T, e *env) {
	const clients, candidates, rounds = 4, 2, 4
	key := e.key("election")
	var hs holds
	var wg sync.WaitGroup
	for client := range clients {
		c := e.client(t)
		for cand := range candidates {
			// Each candidate is an Election of its own; two share a client,
			// as two components of one process would.
			el := e.election(t, c, key)
			value := fmt.Sprintf("client %d candidate %d", client, cand)
			wg.Go(func() {
				for round := range rounds {
					start := time.Now()
					l, err := el.Campaign(t.Context(), value)
					if err != nil {
						t.Errorf("%s: Campaign: %v", value, err)
						return
					}
					w := watch(l, client, cand, start)
					// The leader's work, while the others campaign.
					time.Sleep(e.ttl / 100)
					give := l.Unlock
					if round%2 == 0 {
						give = el.Resign
					}
					endLeadership(t, &hs, w, give)
				}
			})
		}
	}
	wg.Wait()
	hs.mu.Lock()
	v := judge(t, e, hs.all)
	t.Logf("%d leaderships: %d overlaps, %d term regressions, %d deadlines past Campaign's return+TTL", len(hs.all), v.overlaps, v.regressions, v.late)
	hs.mu.Unlock()
}

func testElectionLeaderReports(t *T, e *env) {
	e.needValues(t)
	key := e.key("election-leader")
	follower := e.election(t, e.client(t), key)
	expectNoLeader(t, follower, "nobody has campaigned")

	ea := e.election(t, e.client(t), key)
	va := "candidate a"
	la := campaign(t, ea, va)
	expectLeader(t, follower, va, la, "A leads")
	resign(t, ea)
	expectNoLeader(t, follower, "A resigned and nobody else campaigned")

	// B leads on a client that then vanishes: its driver is closed under
	// it, and nothing gives the leadership up.
	db := e.driver(t)
	cb, err := dlock.New(db, dlock.WithTTL(e.ttl))
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	t.Cleanup(func() { _ = cb.Close(t.Context()) })
	eb := e.election(t, cb, key)
	vb := "candidate b · 10.0.0.2:7000" // a space, punctuation and a non-ASCII rune
	lb := campaign(t, eb, vb)
	expectTermAbove(t, lb, la, "B, after A resigned")
	expectLeader(t, follower, vb, lb, "B leads")
	vanished := time.Now() // every renewal of B's was sent before now
	_ = db.Close()

	ec := e.election(t, e.client(t), key)
	vc := strings.Repeat("c", dlock.MaxValueLen) // the longest value a candidate may have
	lc := campaignWithin(t, ec, vc, time.Until(vanished.Add(e.ttl+e.slack)), "another candidate's Campaign after the leader vanished")
	select {
	case <-lb.Done():
	default:
		if time.Now().Before(lb.Deadline()) {
			t.Errorf("two leaders: C won %v before the vanished leader's deadline, and the vanished leader was not told", time.Until(lb.Deadline()))
		}
	}
	expectTermAbove(t, lc, lb, "C, after B vanished")
	expectLeader(t, follower, vc, lc, "C leads after B vanished")
	resign(t, ec)
	expectNoLeader(t, follower, "C resigned")
}

func testElectionObserve(t *T, e *env) {
	e.needValues(t)
	const leaders, clients = 5, 3
	key := e.key("election-observe")
	cands := make([]dlock.Election, clients)
	for i := range cands {
		cands[i] = e.election(t, e.client(t), key)
	}
	had := map[dlock.Leadership]bool{} // every leadership won so far
	won := func(value string, l dlock.Lease) dlock.Leadership {
		ld := dlock.Leadership{Value: value, Term: l.Token()}
		had[ld] = true
		return ld
	}
	first := won("observed 0", campaign(t, cands[0], "observed 0"))
	if first.Term == 0 {
		resign(t, cands[0])
		t.Skipf("the driver issues no fencing tokens: an observer has no terms to order leaders by")
	}

	ctx, cancel := context.WithCancel(t.Context())
	ch, err := e.election(t, e.client(t), key).Observe(ctx)
	if err != nil {
		cancel()
		t.Fatalf("Observe: %v", err)
	}
	defer func() {
		cancel()
		for range ch { // the observer ends once it sees ctx end
		}
	}()
	var highest uint64 // the greatest term reported
	// next returns the observer's next report, checked: the vacancy, or a
	// leadership some candidate won, with a term above every earlier one.
	next := func(awaiting string) dlock.Leadership {
		timer := time.NewTimer(observeWait(e))
		defer timer.Stop()
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatalf("Observe closed its channel while %s was awaited", awaiting)
			}
			if r == (dlock.Leadership{}) {
				return r
			}
			if !had[r] {
				t.Fatalf("the observer reported %s, which no leader had, while %s was awaited", fmtLeadership(r), awaiting)
			}
			if r.Term <= highest {
				t.Fatalf("the observer reported %s after term %d: terms must rise", fmtLeadership(r), highest)
			}
			highest = r.Term
			return r
		case <-timer.C:
			t.Fatalf("the observer reported nothing for %v while %s was awaited", observeWait(e), awaiting)
		case <-t.Context().Done():
			t.Fatalf("the observer: case ran out of time while %s was awaited", awaiting)
		}
		return dlock.Leadership{}
	}
	// await reads reports until want's, each leader holding until then.
	await := func(want dlock.Leadership) {
		for {
			if r := next(fmtLeadership(want)); r == want {
				return
			}
		}
	}

	if r := next("the leader at the start"); r != first {
		t.Errorf("the observer's first report: got %s, want the leader at the start, %s", fmtLeadership(r), fmtLeadership(first))
	}
	resign(t, cands[0])
	for i := 1; i < leaders; i++ {
		el := cands[i%clients]
		value := fmt.Sprintf("observed %d", i)
		ld := won(value, campaign(t, el, value))
		await(ld)
		resign(t, el)
	}
	// With nobody left campaigning, the vacancy is reported.
	await(dlock.Leadership{})
}

func testElectionCampaignCancelled(t *T, e *env) {
	key := e.key("election-cancel")
	ea, eb := e.election(t, e.client(t), key), e.election(t, e.client(t), key)
	la := campaign(t, ea, "leader")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if l, err := eb.Campaign(ctx, "cancelled"); err != context.Canceled {
		if err == nil {
			_ = l.Unlock(t.Context())
		}
		t.Errorf("Campaign with a cancelled context: got %v, want exactly context.Canceled", err)
	}

	const wait = 100 * time.Millisecond
	ctx, cancel = context.WithTimeout(t.Context(), wait)
	start := time.Now()
	l, err := eb.Campaign(ctx, "cancelled")
	cancel()
	if err != context.DeadlineExceeded {
		if err == nil {
			_ = l.Unlock(t.Context())
		}
		t.Fatalf("Campaign past its deadline while another leads: got %v, want exactly context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > wait+e.slack {
		t.Errorf("Campaign returned %v after its deadline, want promptly", took-wait)
	}

	ctx, cancel = context.WithCancel(t.Context())
	timer := time.AfterFunc(wait, cancel)
	l, err = eb.Campaign(ctx, "cancelled")
	timer.Stop()
	cancel()
	if err != context.Canceled {
		if err == nil {
			_ = l.Unlock(t.Context())
		}
		t.Fatalf("Campaign cancelled while another leads: got %v, want exactly context.Canceled", err)
	}

	if err := la.Extend(t.Context()); err != nil {
		t.Errorf("the leader's Extend after the cancelled campaigns: %v; they must not disturb the leader", err)
	}
	if e.caps.Values {
		expectLeader(t, eb, "leader", la, "the cancelled campaigns must not disturb the leader")
	}

	// Nothing of the cancelled campaigns is left on the backend: once the
	// leader resigns, a candidate of a third client wins at once (a waiter's
	// entry left in a backend's queue would put the cancelled candidate's
	// client first in line); nor in the Election: the cancelled candidate
	// then wins at once too.
	resign(t, ea)
	ec := e.election(t, e.client(t), key)
	lc := campaignWithin(t, ec, "third", e.slack, "a third client's Campaign, with nobody leading and the other candidate's campaigns cancelled")
	expectTermAbove(t, lc, la, "the next leader")
	resign(t, ec)
	lb := campaignWithin(t, eb, "next", e.slack, "the cancelled candidate's next Campaign, with nobody leading")
	expectTermAbove(t, lb, lc, "the next leader")
	resign(t, eb)
	expectFree(t, e.mutex(t, e.client(t), key), "every leader resigned, and the cancelled campaigns must leave nothing behind")
}

// testElectionPartitionedLeaderLoses cuts a leader off from the backend:
// it must stop believing it leads by its deadline, which the cut-off
// renewals must not move, and another candidate wins after it, with a
// greater term; once the link is back, the old leader's Resign leaves the
// new leader alone.
func testElectionPartitionedLeaderLoses(t *T, e *env) {
	e.needLinks(t)
	key := e.key("election-partitioned")
	ca, link := e.linkedClient(t)
	ea := e.election(t, ca, key)
	eb := e.election(t, e.client(t), key)
	probe := e.client(t)
	la := campaign(t, ea, "cut-off leader")
	time.Sleep(e.ttl / 2) // lead long enough for a renewal to go through
	cutAt := cut(t, link)

	lb := campaignWithin(t, eb, "next leader", time.Until(cutAt.Add(e.ttl+e.slack)), "another candidate's Campaign while the leader is cut off")
	won := time.Now()
	select {
	case <-la.Done():
	default:
		if deadline := la.Deadline(); won.Before(deadline) {
			t.Errorf("two leaders: another candidate won (term %d) %v before the cut-off leader's deadline (term %d), and the cut-off leader was not told", lb.Token(), deadline.Sub(won), la.Token())
		}
	}
	within(t, la.Done(), time.Until(cutAt.Add(e.ttl))+e.slack, "the cut-off leader's lost signal")
	if over := la.Deadline().Sub(cutAt.Add(e.ttl)); over > 0 {
		t.Errorf("the cut-off leader's deadline is %v past the cut plus the TTL: a renewal that never reached the backend moved it", over)
	}
	if err := la.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("Err of the cut-off leader's lease: got %v, want ErrLockLost", err)
	}
	expectTermAbove(t, lb, la, "the leader after the cut")

	restore(t, link)
	actx, acancel := e.afterRestore(t)
	defer acancel()
	if err := ea.Resign(actx); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("the cut-off leader's Resign after the link came back: got %v, want ErrLockLost", err)
	}
	expectLocked(t, e.mutex(t, probe, key), "the cut-off leader's Resign after the link came back must leave the new leader alone", lb)
	if err := lb.Err(); err != nil {
		t.Errorf("the new leader's lease ended once the cut-off leader's link came back: %v", err)
	}
	if e.caps.Values {
		expectLeader(t, e.election(t, probe, key), "next leader", lb, "the new leader leads after the cut-off leader's link came back")
	}
	resign(t, eb)
}
