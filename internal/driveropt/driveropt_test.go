package driveropt

import (
	"errors"
	"testing"
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
