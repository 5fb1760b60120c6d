package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// errConnectionLost is the reason of a loss when the connection ended
// without a message from the server.
var errConnectionLost = errors.New("postgres: the connection holding the lock ended")

// watch reads the connection of a held lock while nothing else uses it, so
// that the end of the session is noticed at once: pg_terminate_backend, an
// idle_session_timeout, a server shutdown or a broken connection all show up
// as a FATAL message or an end of stream, whereas a heartbeat would find
// them only at the next renewal. It costs one goroutine per held lock,
// blocked in a read.
type watch struct {
	s        *session
	stopping atomic.Bool
	done     chan struct{}
	err      error // why the connection ended; nil when stopped; read after done
}

// startWatch starts watching s; onEnd is called, from the watching
// goroutine, if the connection ends before stop.
func startWatch(s *session, onEnd func(error)) *watch {
	w := &watch{s: s, done: make(chan struct{})}
	go w.run(onEnd)
	return w
}

func (w *watch) run(onEnd func(error)) {
	defer close(w.done)
	var fatal error
	for !w.stopping.Load() {
		msg, err := w.s.pg.ReceiveMessage(context.Background())
		if err != nil {
			if w.stopping.Load() && pgconn.Timeout(err) {
				break // stop interrupted the read
			}
			w.s.broken.Store(true)
			w.err = ended(fatal, err)
			onEnd(w.err)
			return
		}
		// Notices, parameter changes and notifications may come at any
		// time and change nothing; an error on an idle session is the
		// server ending it, and the end of the stream follows.
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			fatal = pgconn.ErrorResponseToPgError(e)
		}
	}
	if fatal != nil {
		w.s.broken.Store(true)
		w.err = ended(fatal, nil)
		onEnd(w.err)
	}
}

// ended says why the connection ended: the server's last error when it sent
// one (such as 57P01 "terminating connection due to administrator command"),
// else the read error.
func ended(fatal, readErr error) error {
	switch {
	case fatal != nil:
		return fmt.Errorf("%w: %w", errConnectionLost, fatal)
	case readErr != nil:
		return fmt.Errorf("%w: %w", errConnectionLost, readErr)
	default:
		return errConnectionLost
	}
}

// stop ends the watch and returns once the session is free for a statement.
// It returns why the connection ended, if it did.
func (w *watch) stop() error {
	w.stopping.Store(true)
	conn := w.s.pg.Conn()
	_ = conn.SetReadDeadline(time.Now())
	<-w.done
	if w.err == nil {
		_ = conn.SetReadDeadline(time.Time{})
	}
	return w.err
}
