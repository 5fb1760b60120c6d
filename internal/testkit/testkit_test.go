package testkit

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func TestNewIDIsShapedAsTheCores(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 100 {
		id := NewID()
		if !hex32.MatchString(id) {
			t.Fatalf("NewID() = %q, want 32 lowercase hex digits", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestKeyIsTheTestsOwn(t *testing.T) {
	a, b := Key(t), Key(t)
	if a == b || !strings.HasPrefix(a, "test/"+t.Name()+"/") {
		t.Fatalf("Key: %q, %q", a, b)
	}
}

func TestRunKeysAreTheRunsOwnAndNotTooLong(t *testing.T) {
	long := strings.Repeat("x", 1023) + "!"
	keys := RunKeys(t, []string{"a", long})
	run, _ := strings.CutSuffix(keys[0], "a")
	if !strings.HasPrefix(run, "test/"+t.Name()+"/") || len(keys) != 2 {
		t.Fatalf("RunKeys = %q, want the test's own prefix on each", keys)
	}
	if keys[1] != long { // the prefix cut off, the key's own 1024 bytes kept
		t.Errorf("the long key: %d bytes, want the 1024 of its own", len(keys[1]))
	}
}

func TestContextForEndsWithTheTest(t *testing.T) {
	var ctx context.Context
	t.Run("step", func(t *testing.T) {
		ctx = ContextFor(time.Hour)(t)
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > time.Hour {
			t.Errorf("deadline %v, %v; want one within the hour", d, ok)
		}
	})
	if ctx.Err() == nil {
		t.Error("the context outlived its test")
	}
}

func TestRefusesURLs(t *testing.T) {
	var calls []string
	RefusesURLs(t, func(u *url.URL) error {
		calls = append(calls, u.String())
		return errors.Join(dlock.ErrInvalidURL, errors.New("bad"))
	}, "secret", "x://a", "x://b", "x://[::1")
	if strings.Join(calls, " ") != "x://a x://b" {
		t.Errorf("parsed %v, want the two URLs net/url accepts", calls)
	}
}

func TestPendingReturnsTheOutcome(t *testing.T) {
	release := make(chan struct{})
	p := Go(func() (int, error) { <-release; return 7, nil })
	close(release)
	if got := p.Within(t, time.Minute, "the call"); got != 7 {
		t.Fatalf("Within = %d, want 7", got)
	}
}
