package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock/driver"
)

// connector makes a new connection: by dialling (a Driver made from a URL or
// a config) or by taking one out of the caller's pool for good.
type connector func(ctx context.Context) (*pgconn.PgConn, error)

// sessions is the Driver's own set of connections: the idle ones, kept for
// the next acquisition, and those in use by a lease or an acquisition. It
// bounds how many are open at once; an acquisition that finds them all in use
// waits, first come first served, for one to be given back or closed.
type sessions struct {
	connect connector
	setup   func(ctx context.Context, s *session) error // once per new session
	// restore restores an idle session's own idle_session_timeout (see
	// put).
	restore     func(ctx context.Context, s *session) error
	maxIdleTime time.Duration
	max         int
	dials       atomic.Int64 // connections made, for tests and diagnostics

	// life bounds the dials that no caller waits for any more (see make):
	// close ends it, so that a Driver closed while one runs, such as that
	// of an Open given up on, leaves no goroutine behind.
	life context.Context
	end  context.CancelFunc

	mu      sync.Mutex
	closed  bool
	open    int                   // sessions open or being made
	idle    []*session            // most recently used last
	inUse   map[*session]struct{} // handed out, not yet put back or dropped
	waiters []chan *session       // gets waiting for a session; nil means "make one"
}

func newSessions(connect connector, setup, restore func(context.Context, *session) error, o options) *sessions {
	life, end := context.WithCancel(context.Background())
	return &sessions{
		life:        life,
		end:         end,
		connect:     connect,
		setup:       setup,
		restore:     restore,
		maxIdleTime: o.maxIdleTime,
		max:         o.maxConns,
		inUse:       map[*session]struct{}{},
	}
}

// get returns an idle session, or a new one when none is idle. While
// MaxConns are open it waits for one, or, unless wait is set, fails at once
// with an error wrapping ErrConnLimit.
func (p *sessions) get(ctx context.Context, wait bool) (*session, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, driver.ErrClosed
	}
	stale := p.pruneLocked()
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.inUse[s] = struct{}{}
		s.stopRestore()
		p.mu.Unlock()
		p.closeAll(stale)
		s.reused = true
		return s, nil
	}
	if p.open < p.max {
		p.open++
		p.mu.Unlock()
		p.closeAll(stale)
		return p.make(ctx)
	}
	if !wait {
		p.mu.Unlock()
		p.closeAll(stale)
		return nil, fmt.Errorf("%w (%d)", ErrConnLimit, p.max)
	}
	turn := make(chan *session, 1)
	p.waiters = append(p.waiters, turn)
	p.mu.Unlock()
	p.closeAll(stale)

	select {
	case s := <-turn:
		return p.granted(ctx, s)
	case <-ctx.Done():
		p.mu.Lock()
		i := slices.Index(p.waiters, turn)
		if i >= 0 {
			p.waiters = slices.Delete(p.waiters, i, i+1)
		}
		p.mu.Unlock()
		if i < 0 {
			// Something was handed over meanwhile: pass it on.
			if s := <-turn; s != nil {
				p.put(s)
			} else {
				p.release()
			}
		}
		return nil, ctx.Err()
	}
}

// granted completes a get that waited: it was handed a session, or (nil) a
// slot to make one in.
func (p *sessions) granted(ctx context.Context, s *session) (*session, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		if s != nil {
			p.drop(s)
		}
		return nil, driver.ErrClosed
	}
	if s == nil {
		return p.make(ctx)
	}
	s.reused = true
	return s, nil
}

// pruneLocked takes the sessions idle for longer than maxIdleTime off the
// idle list, for the caller to close. Callers hold p.mu.
func (p *sessions) pruneLocked() []*session {
	now := time.Now()
	var stale []*session
	for len(p.idle) > 0 && now.Sub(p.idle[0].idleSince) > p.maxIdleTime {
		p.idle[0].stopRestore()
		stale = append(stale, p.idle[0])
		p.idle = p.idle[1:]
	}
	return stale
}

// closeAll closes sessions taken off the idle list, and frees their slots.
func (p *sessions) closeAll(stale []*session) {
	for _, s := range stale {
		s.close()
		p.release()
	}
}

// make makes a new session in a slot already counted in p.open. The
// connection is made with a context of its own, so that a caller who gives
// up (a cancelled Lock, a short TryLock deadline) does not waste it: it goes
// to the idle list for the next acquisition. Close ends that context.
func (p *sessions) make(ctx context.Context) (*session, error) {
	type dialed struct {
		s   *session
		err error
	}
	var (
		mu      sync.Mutex
		waiting = true
		made    = make(chan dialed, 1)
	)
	go func() {
		dctx, cancel := context.WithTimeout(p.life, dialTimeout)
		s, err := p.dial(dctx)
		cancel()
		mu.Lock()
		if waiting {
			made <- dialed{s, err}
			mu.Unlock()
			return
		}
		mu.Unlock()
		p.adopt(s, err)
	}()
	select {
	case r := <-made:
		if r.err != nil {
			p.release()
			return nil, r.err
		}
		return p.register(r.s)
	case <-ctx.Done():
		mu.Lock()
		waiting = false
		mu.Unlock()
		select {
		case r := <-made: // it finished just now
			p.adopt(r.s, r.err)
		default:
		}
		return nil, ctx.Err()
	}
}

// dialTimeout bounds the making of a connection that its caller no longer
// waits for.
const dialTimeout = 30 * time.Second

// dial makes and sets up a new session.
func (p *sessions) dial(ctx context.Context) (*session, error) {
	p.dials.Add(1)
	pg, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	s, err := setupSession(ctx, pg)
	if err == nil {
		err = p.setup(ctx, s)
	}
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = pg.Close(closeCtx)
		cancel()
		return nil, err
	}
	return s, nil
}

// register records a new session as in use, or closes it after Close.
func (p *sessions) register(s *session) (*session, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		s.close()
		p.release()
		return nil, driver.ErrClosed
	}
	p.inUse[s] = struct{}{}
	p.mu.Unlock()
	return s, nil
}

// adopt takes the result of a dial whose caller gave up.
func (p *sessions) adopt(s *session, err error) {
	if err != nil {
		p.release()
		return
	}
	if _, err := p.register(s); err == nil {
		p.put(s)
	}
}

// put gives a session back: to the first waiting get, or to the idle list.
// A session that cannot be reused is dropped.
func (p *sessions) put(s *session) {
	if !s.healthy() {
		p.drop(s)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.drop(s)
		return
	}
	if len(p.waiters) > 0 {
		w := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.mu.Unlock()
		w <- s // stays in inUse, now the waiter's
		return
	}
	delete(p.inUse, s)
	s.idleSince = time.Now()
	p.idle = append(p.idle, s)
	if s.idle != "" && s.applied != s.idle {
		// A released lease left its TTL as the session's
		// idle_session_timeout: the server would end the session after
		// that long idle. Restore the session's own value after half of
		// it, unless the session is used again before.
		s.restoreGen++
		gen := s.restoreGen
		s.restore = time.AfterFunc(s.restoreDelay(), func() { p.restoreIdle(s, gen) })
	}
	p.mu.Unlock()
}

// restoreIdle restores the own idle_session_timeout of s, an idle session,
// unless it has been taken (or closed) since put armed the restore of
// generation gen, and puts it back on the idle list.
func (p *sessions) restoreIdle(s *session, gen uint64) {
	p.mu.Lock()
	i := slices.Index(p.idle, s)
	if p.closed || i < 0 || s.restoreGen != gen {
		p.mu.Unlock()
		return
	}
	p.idle = slices.Delete(p.idle, i, i+1)
	p.inUse[s] = struct{}{}
	s.restore = nil
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.life, cancelGrace)
	err := p.restore(ctx, s)
	cancel()
	if err != nil {
		p.drop(s)
		return
	}
	p.put(s)
}

// drop closes a session handed out by get, and frees its slot.
func (p *sessions) drop(s *session) {
	p.mu.Lock()
	_, ok := p.inUse[s]
	delete(p.inUse, s)
	p.mu.Unlock()
	if !ok {
		return // Close dropped it already
	}
	s.close()
	p.release()
}

// release frees a slot: the first waiting get may make a session in it.
func (p *sessions) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiters) > 0 && !p.closed {
		w := p.waiters[0]
		p.waiters = p.waiters[1:]
		w <- nil // the slot passes to the waiter
		return
	}
	p.open--
}

// close closes every idle session, and breaks those in use: their holders'
// and waiters' statements fail, and their locks end with the connections.
// Later gets return ErrClosed, and so do those waiting.
func (p *sessions) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.end()
	idle := p.idle
	p.idle = nil
	p.open -= len(idle)
	for _, s := range idle {
		s.stopRestore()
	}
	busy := make([]*session, 0, len(p.inUse))
	for s := range p.inUse {
		busy = append(busy, s)
	}
	waiters := p.waiters
	p.waiters = nil
	p.mu.Unlock()
	for _, s := range idle {
		s.close()
	}
	for _, s := range busy {
		// Another goroutine may be using it: only the network connection
		// may be touched here. Its user drops it when it notices.
		s.abort()
	}
	for _, w := range waiters {
		close(w)
	}
}
