package dlock_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

func TestOpenUnknownSchemeListsRegistered(t *testing.T) {
	_, err := dlock.Open(t.Context(), "nosuch://host/x")
	if !errors.Is(err, dlock.ErrInvalidURL) {
		t.Fatalf("got %v, want ErrInvalidURL", err)
	}
	for _, want := range []string{`"nosuch"`, "forgotten import?", "mem"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestOpenBadURLs(t *testing.T) {
	for _, raw := range []string{"", "no-scheme", "://x", "mem://a b", "%zz", "mem://name:99999", "mem://user:secret@name", "mem:opaque", "redis://u:secret@host:abc/0", "mem://u:secret@[::1", "mem://x?connect_timeout=soon", "mem://x?connect_timeout=0"} {
		_, err := dlock.Open(t.Context(), raw)
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open(%q): got %v, want ErrInvalidURL", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): error %q shows the password", raw, err)
		}
	}
}

func TestRegisterRejectsNilAndDuplicates(t *testing.T) {
	open := func(context.Context, *url.URL) (driver.Driver, error) { return nil, errors.New("unused") }
	// Registration is process-wide: a scheme of its own per run lets the
	// test run again in one process (-count).
	scheme := "test-register-" + strings.ToLower(rand.Text()[:8])
	dlock.Register(scheme, open)
	for name, f := range map[string]func(){
		"duplicate": func() { dlock.Register(strings.ToUpper(scheme), open) },
		"nil":       func() { dlock.Register("test-register-nil", nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register %s: want a panic", name)
				}
			}()
			f()
		}()
	}
}

func TestNewRejectsNilDriver(t *testing.T) {
	if _, err := dlock.New(nil); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("got %v, want ErrInvalidOption", err)
	}
}

// FuzzOpen: no URL makes Open panic, and every failure is typed.
func FuzzOpen(f *testing.F) {
	for _, seed := range []string{"mem://x", "mem://", "redis://[::1", "mem://%00", "mem://a/b", "x://\r\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := dlock.Open(context.Background(), raw)
		if err == nil {
			_ = c.Close(context.Background())
			return
		}
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Fatalf("Open(%q): got %v, want ErrInvalidURL", raw, err)
		}
	})
}

// A driver's error that says nothing of its kind is ErrUnavailable: Open's
// errors are about the configuration or about reaching the backend.
func TestOpenErrorsAreTyped(t *testing.T) {
	refused := errors.New("connection refused")
	scheme := "test-unavailable-" + strings.ToLower(rand.Text()[:8])
	dlock.Register(scheme, func(context.Context, *url.URL) (driver.Driver, error) { return nil, refused })
	_, err := dlock.Open(t.Context(), scheme+"://host")
	if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, refused) {
		t.Errorf("Open: %v, want ErrUnavailable wrapping the driver's error", err)
	}
}
