package doctor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/doctor"
)

func init() {
	doctor.Register("doctortest", func(ctx context.Context, req doctor.Request, r *doctor.Report) error {
		switch req.URL.Host {
		case "down":
			return errors.New("connection refused")
		case "hazard":
			r.Hazard(doctor.Finding{Check: "t.hazard", Hazard: "h", Why: "w", Fix: "f"})
		}
		r.Ran("t.clean")
		r.Fact("ttl", "%v", req.TTL)
		r.Fact("connect", "%v", req.ConnectTimeout)
		return nil
	})
}

func TestRun(t *testing.T) {
	ctx := context.Background()
	r, err := doctor.Run(ctx, "doctortest://clean", doctor.Options{})
	if err != nil || !r.Clean() || r.Backend != "doctortest" || len(r.Checks) != 1 {
		t.Errorf("clean: %+v, %v", r, err)
	}
	if r.Facts[0].Value != dlock.DefaultTTL.String() || r.Facts[1].Value != dlock.DefaultConnectTimeout.String() {
		t.Errorf("defaults: %+v", r.Facts)
	}
	r, err = doctor.Run(ctx, "DoctorTest://hazard", doctor.Options{TTL: time.Minute})
	if err != nil || r.Clean() || !r.Has("t.hazard") || r.Facts[0].Value != "1m0s" {
		t.Errorf("hazard: %+v, %v", r, err)
	}
	if _, err := doctor.Run(ctx, "doctortest://down", doctor.Options{}); !errors.Is(err, dlock.ErrUnavailable) {
		t.Errorf("down: %v, want ErrUnavailable", err)
	}
	if _, err := doctor.Run(ctx, "nochecks://x", doctor.Options{}); !errors.Is(err, doctor.ErrNoChecks) {
		t.Errorf("no checks: %v, want ErrNoChecks", err)
	}
	for _, bad := range []string{"no-scheme", "doctortest://user:secret@[::1", ""} {
		_, err := doctor.Run(ctx, bad, doctor.Options{})
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("%q: %v, want ErrInvalidURL", bad, err)
		}
		if err != nil && len(bad) > 0 && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the password: %v", bad, err)
		}
	}
}

func TestRegisterRefusesDuplicates(t *testing.T) {
	for name, f := range map[string]func(){
		"nil": func() { doctor.Register("doctortest-nil", nil) },
		"duplicate": func() {
			doctor.Register("doctortest", func(context.Context, doctor.Request, *doctor.Report) error { return nil })
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			f()
		}()
	}
}
