// Package deadline runs a function for each of many items when the item's
// time comes, on one timer for them all.
//
// A held lock has deadlines (its validity, a driver's own TTL), and a
// client may hold thousands of locks: a time.Timer each would cost more
// heap than the rest of a held lock. A Queue keeps them in a heap instead,
// ordered by time, with one timer for the earliest.
package deadline

import (
	"container/heap"
	"sync"
	"time"
)

// Queue calls its function for each scheduled Entry once the Entry's time
// has come, in a goroutine of its timer, without holding the Queue's lock:
// the function may schedule or remove entries, its own included. An entry
// is unscheduled before its function is called; whoever needs it again
// schedules it again.
//
// Make one with NewQueue. It is safe for concurrent use, and needs no
// stopping: its timer is stopped whenever no entry is scheduled.
type Queue[T any] struct {
	due func(T)

	mu    sync.Mutex
	heap  entries[T]
	timer *time.Timer
	armed time.Time // when the timer fires; zero while stopped
}

// Entry is an item's place in a Queue. The item keeps it (a field of its
// own) and hands it to Schedule and Remove. The zero Entry is unscheduled.
// An Entry belongs to one Queue at a time.
type Entry[T any] struct {
	at   time.Time
	pos  int // 1 + the index in the heap; 0 when unscheduled
	item T
}

// NewQueue returns a Queue that calls due(item) when an item's time comes.
func NewQueue[T any](due func(T)) *Queue[T] {
	return &Queue[T]{due: due}
}

// Schedule makes item due at at, moving e if it was scheduled already.
func (q *Queue[T]) Schedule(e *Entry[T], item T, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e.at, e.item = at, item
	if e.pos > 0 {
		heap.Fix(&q.heap, e.pos-1)
	} else {
		heap.Push(&q.heap, e)
	}
	q.arm()
}

// Remove unschedules e. It reports whether e was scheduled: false when it
// was not, or when its time came and its function has been or is about to
// be called.
func (q *Queue[T]) Remove(e *Entry[T]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e.pos == 0 {
		return false
	}
	heap.Remove(&q.heap, e.pos-1)
	var zero T
	e.item = zero // let the item go; it may be all that refers to it
	q.arm()
	return true
}

// Len returns how many entries are scheduled.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.heap)
}

// arm sets the timer for the earliest entry, or stops it when there is
// none. Callers hold q.mu.
func (q *Queue[T]) arm() {
	if len(q.heap) == 0 {
		if q.timer != nil {
			q.timer.Stop()
		}
		q.armed = time.Time{}
		return
	}
	at := q.heap[0].at
	if at.Equal(q.armed) {
		return // most changes move entries behind the earliest
	}
	q.armed = at
	wait := time.Until(at)
	if q.timer == nil {
		q.timer = time.AfterFunc(wait, q.fire)
	} else {
		q.timer.Reset(wait)
	}
}

// fire unschedules every entry whose time has come and calls the function
// for each, earliest first.
func (q *Queue[T]) fire() {
	now := time.Now()
	var items []T
	q.mu.Lock()
	q.armed = time.Time{} // fired
	for len(q.heap) > 0 && !q.heap[0].at.After(now) {
		e := heap.Pop(&q.heap).(*Entry[T])
		items = append(items, e.item)
		var zero T
		e.item = zero
	}
	q.arm()
	q.mu.Unlock()
	for _, item := range items {
		q.due(item)
	}
}

// entries is a heap of entries by time, each knowing its position.
type entries[T any] []*Entry[T]

func (h entries[T]) Len() int           { return len(h) }
func (h entries[T]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h entries[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i+1, j+1
}
func (h *entries[T]) Push(x any) {
	e := x.(*Entry[T])
	*h = append(*h, e)
	e.pos = len(*h)
}
func (h *entries[T]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.pos = 0
	return e
}
