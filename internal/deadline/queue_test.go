package deadline

import (
	"testing"
	"time"
)

type item struct {
	name  string
	entry Entry[*item]
}

func TestQueueCallsInOrderAndForgetsRemoved(t *testing.T) {
	fired := make(chan string, 10)
	q := NewQueue(func(it *item) { fired <- it.name })
	now := time.Now()
	a, b, c := &item{name: "a"}, &item{name: "b"}, &item{name: "c"}
	q.Schedule(&c.entry, c, now.Add(30*time.Millisecond))
	q.Schedule(&a.entry, a, now.Add(10*time.Millisecond))
	q.Schedule(&b.entry, b, now.Add(time.Hour))
	q.Schedule(&b.entry, b, now.Add(20*time.Millisecond)) // moved earlier
	if !q.Remove(&c.entry) {
		t.Fatal("Remove of a scheduled entry reported false")
	}
	if q.Remove(&c.entry) {
		t.Fatal("a second Remove reported true")
	}
	for _, want := range []string{"a", "b"} {
		select {
		case got := <-fired:
			if got != want {
				t.Fatalf("fired %s, want %s", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never fired", want)
		}
		if time.Now().Before(now.Add(10 * time.Millisecond)) {
			t.Fatal("fired before its time")
		}
	}
	if q.Remove(&a.entry) {
		t.Error("Remove of an entry that fired reported true")
	}
	if n := q.Len(); n != 0 {
		t.Errorf("Len after every entry fired or was removed: %d", n)
	}
}

func TestQueueRescheduleFromDue(t *testing.T) {
	done := make(chan struct{})
	var q *Queue[*item]
	runs := 0
	q = NewQueue(func(it *item) {
		if runs++; runs < 3 {
			q.Schedule(&it.entry, it, time.Now().Add(time.Millisecond))
			return
		}
		close(done)
	})
	it := &item{}
	q.Schedule(&it.entry, it, time.Now())
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an entry scheduled again from its function did not fire again")
	}
}
