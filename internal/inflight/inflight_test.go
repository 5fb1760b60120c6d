package inflight

import (
	"testing"
	"time"
)

func TestCloseWaitsAndRefuses(t *testing.T) {
	var g Group
	done, ok := g.Enter()
	if !ok {
		t.Fatal("Enter on an open group refused")
	}
	started := make(chan struct{})
	release := make(chan struct{})
	if !g.Go(func() { close(started); <-release }) {
		t.Fatal("Go on an open group refused")
	}
	<-started

	stopped := make(chan struct{})
	closed := make(chan bool)
	go func() { closed <- g.Close(func() { close(stopped) }) }()
	<-stopped // Close has begun: the group refuses from here on
	if _, ok := g.Enter(); ok {
		t.Error("Enter after Close began was admitted")
	}
	if g.Go(func() { t.Error("Go after Close ran f") }) {
		t.Error("Go after Close began was admitted")
	}
	select {
	case <-closed:
		t.Fatal("Close returned while work was in flight")
	default:
	}
	done()
	close(release)
	select {
	case first := <-closed:
		if !first {
			t.Error("the first Close returned false")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s of the work ending")
	}
	if g.Close(func() { t.Error("a second Close called stop") }) {
		t.Error("a second Close returned true")
	}
}
