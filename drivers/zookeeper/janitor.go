package zookeeper

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// The janitor finishes, in the background, the removals that could not be
// done when they were due: the node of a request whose context ended while
// its create was in flight (found by the request ID in its name, pattern 7
// of the reference's broken ZooKeeper locks), a release whose reply was lost
// or whose context had ended, the node of a lease that lapsed. It works while
// the client is connected, and drops a job once the session its nodes belong
// to has ended, since ZooKeeper removed them then.

// job is one removal: of the node at path, or of every node of dir named with
// request ID id, or of lease's hold.
type job struct {
	path  string
	dir   string
	id    string
	lease *lease
	sid   int64 // the session whose ephemeral nodes these are; 0: unknown
}

// enqueue adds a job and wakes the janitor.
func (d *Driver) enqueue(j job) {
	d.mu.Lock()
	d.jobs = append(d.jobs, j)
	d.mu.Unlock()
	d.wakeJanitor()
}

func (d *Driver) wakeJanitor() {
	select {
	case d.jobWake <- struct{}{}:
	default:
	}
}

// janitor runs until Close.
func (d *Driver) janitor() {
	defer d.bg.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-d.closing:
			return
		case <-d.jobWake:
		case <-retry.C:
		}
		if d.liveSession() == 0 {
			continue // the monitor wakes us when the session is back
		}
		if d.sweep(d.SessionTTL()) {
			retry.Reset(d.SessionTTL() / 4)
		}
	}
}

// sweep runs every pending job once, each bounded by limit, and reports
// whether some must be tried again.
func (d *Driver) sweep(limit time.Duration) bool {
	d.mu.Lock()
	jobs := d.jobs
	d.jobs = nil
	d.mu.Unlock()
	var again []job
	for _, j := range jobs {
		if j.sid != 0 && d.conn.SessionID() != j.sid {
			continue // the session ended, and its nodes with it
		}
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		err := d.run(ctx, j)
		cancel()
		if err != nil && !errors.Is(err, driver.ErrNotHeld) && (transient(err) || errors.Is(err, context.DeadlineExceeded)) {
			again = append(again, j)
		}
	}
	if len(again) == 0 {
		return false
	}
	d.mu.Lock()
	d.jobs = append(d.jobs, again...)
	d.mu.Unlock()
	return true
}

func (d *Driver) run(ctx context.Context, j job) error {
	switch {
	case j.lease != nil:
		return j.lease.remove(ctx, true)
	case j.path != "":
		err := d.call(ctx, func() error { return d.conn.Delete(j.path, -1) })
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	}
	// Make sure the server has applied every request of ours that was in
	// flight before we look for the node.
	var children []string
	err := d.call(ctx, func() error {
		if _, err := d.conn.Sync(j.dir); err != nil {
			return err
		}
		var err error
		children, _, err = d.conn.Children(j.dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range children {
		if n, ok := parseNode(name); ok && n.id == j.id && !n.foreign {
			p := j.dir + "/" + name
			err := d.call(ctx, func() error { return d.conn.Delete(p, -1) })
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
	}
	return nil
}
