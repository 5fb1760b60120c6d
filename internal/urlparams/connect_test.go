package urlparams

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// seen is what a ConnectFunc was given.
type seen struct {
	query    string
	timeout  time.Duration
	deadline time.Duration // from the call; 0 when ctx had none
}

// connectWith runs Connect on raw with a ConnectFunc that records what it
// was given and fails with err.
func connectWith(t *testing.T, ctx context.Context, raw string, err error) (seen, error) {
	t.Helper()
	u, perr := url.Parse(raw)
	if perr != nil {
		t.Fatal(perr)
	}
	var s seen
	_, cerr := Connect(ctx, u, func(ctx context.Context, u *url.URL, timeout time.Duration) (driver.Driver, error) {
		s.query, s.timeout = u.RawQuery, timeout
		if d, ok := ctx.Deadline(); ok {
			s.deadline = time.Until(d)
		}
		return nil, err
	})
	return s, cerr
}

var errRefused = errors.New("connection refused")

func TestConnectTimeouts(t *testing.T) {
	// No deadline, no parameter: the default.
	s, _ := connectWith(t, context.Background(), "x://h/p?a=1", errRefused)
	if s.deadline <= 0 || s.deadline > dlock.DefaultConnectTimeout || s.timeout != 0 || s.query != "a=1" {
		t.Errorf("default: %+v, want a deadline within %v, no timeout, query a=1", s, dlock.DefaultConnectTimeout)
	}
	// A deadline of the caller's and no parameter: the caller's alone.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if s, _ := connectWith(t, ctx, "x://h/p", errRefused); s.deadline <= dlock.DefaultConnectTimeout {
		t.Errorf("caller's deadline: %+v, want about an hour", s)
	}
	// The parameter, in either spelling, bounds the caller's deadline too,
	// and is not passed on in the URL.
	for raw, want := range map[string]time.Duration{
		"x://h/p?connect_timeout=1500ms&a=1": 1500 * time.Millisecond,
		"x://h/p?a=1&connect_timeout=3":      3 * time.Second,
	} {
		s, _ := connectWith(t, ctx, raw, errRefused)
		if s.timeout != want || s.deadline <= 0 || s.deadline > want || s.query != "a=1" {
			t.Errorf("%s: %+v, want timeout and a deadline within %v, query a=1", raw, s, want)
		}
	}
}

func TestConnectErrors(t *testing.T) {
	for _, raw := range []string{"x://h?connect_timeout=", "x://h?connect_timeout=0", "x://h?connect_timeout=-2s",
		"x://h?connect_timeout=later", "x://h?connect_timeout=1s&connect_timeout=2s", "x://h?connect_timeout=99999999999"} {
		if _, err := connectWith(t, context.Background(), raw, nil); !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("%s: %v, want ErrInvalidURL", raw, err)
		}
	}
	// A refusal is ErrUnavailable, and keeps the driver's error.
	if _, err := connectWith(t, context.Background(), "x://h", errRefused); !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, errRefused) {
		t.Errorf("refused: %v, want ErrUnavailable wrapping the driver's error", err)
	}
	// A driver's own bad-URL error passes as it is.
	bad := Invalid(&url.URL{Scheme: "x", Host: "h"}, "no")
	if _, err := connectWith(t, context.Background(), "x://h", bad); err != bad {
		t.Errorf("invalid: %v, want the driver's error as it is", err)
	}
	// A driver's timeout of its own is a timeout too.
	if _, err := connectWith(t, context.Background(), "x://h", context.DeadlineExceeded); !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout: %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	// The caller's context ended: its error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := connectWith(t, ctx, "x://h", context.Canceled); !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want ErrUnavailable and Canceled", err)
	}
}

func TestParsed(t *testing.T) {
	bad := fmt.Errorf("%w: no", dlock.ErrInvalidURL)
	var got []string
	parse := func(u *url.URL) (string, int, error) {
		if u.Host == "bad" {
			return "", 0, bad
		}
		return u.Host, 7, nil
	}
	connect := func(_ context.Context, u *url.URL, host string, n int, timeout time.Duration) (driver.Driver, error) {
		got = append(got, fmt.Sprintf("%s %s %d %v", u.Scheme, host, n, timeout))
		return nil, nil
	}
	c := Parsed(parse, connect)
	if _, err := c(t.Context(), &url.URL{Scheme: "x", Host: "h"}, time.Second); err != nil || len(got) != 1 || got[0] != "x h 7 1s" {
		t.Errorf("Parsed: %v, connect saw %q; want nil, [x h 7 1s]", err, got)
	}
	if _, err := c(t.Context(), &url.URL{Scheme: "x", Host: "bad"}, 0); err != bad || len(got) != 1 {
		t.Errorf("Parsed of a URL parse refuses: %v, connect saw %q; want parse's error, connect not called", err, got)
	}
}
