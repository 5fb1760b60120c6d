package driveropt

import (
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
)

type options struct{ calls []int }

type option func(*options) error

func TestApply(t *testing.T) {
	stop := errors.New("stop")
	add := func(n int) option { return func(o *options) error { o.calls = append(o.calls, n); return nil } }
	var o options
	if err := Apply(&o, []option{add(1), nil, add(2)}); err != nil || len(o.calls) != 2 || o.calls[1] != 2 {
		t.Errorf("Apply: %v, calls %v; want nil, [1 2]", err, o.calls)
	}
	o = options{}
	fail := func(*options) error { return stop }
	if err := Apply(&o, []option{add(1), fail, add(3)}); err != stop || len(o.calls) != 1 {
		t.Errorf("Apply with a failing option: %v, calls %v; want stop, [1]", err, o.calls)
	}
}

func TestChecked(t *testing.T) {
	set := func(o *options) { o.calls = append(o.calls, 1) }
	var o options
	if err := Checked("x", nil, set)(&o); err != nil || len(o.calls) != 1 {
		t.Errorf("Checked with no error: %v, calls %v; want nil, [1]", err, o.calls)
	}
	bad := errors.New("too long")
	o = options{}
	err := Checked("test prefix", bad, set)(&o)
	if !errors.Is(err, dlock.ErrInvalidOption) || !errors.Is(err, bad) || len(o.calls) != 0 {
		t.Errorf("Checked with an error: %v, calls %v; want ErrInvalidOption and the check's error, none", err, o.calls)
	}
	if want := dlock.ErrInvalidOption.Error() + ": test prefix: too long"; err.Error() != want {
		t.Errorf("Checked's error says %q, want %q", err, want)
	}
}
