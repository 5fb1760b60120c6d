package urlparams

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
)

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"h":              "h:2379",
		"h:1":            "h:1",
		"10.0.0.1":       "10.0.0.1:2379",
		"[::1]":          "[::1]:2379",
		"[::1]:65535":    "[::1]:65535",
		"[fe80::1%eth0]": "[fe80::1%eth0]:2379",
	} {
		if got, err := HostPort(in, "2379"); err != nil || got != want {
			t.Errorf("HostPort(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", ":1", "h:", "h:0", "h:65536", "h:x", "::1", "[::1", "[::1]x", "[::1]:", "[host]:1", "[10.0.0.1]"} {
		if got, err := HostPort(in, "2379"); err == nil {
			t.Errorf("HostPort(%q) = %q, want an error", in, got)
		}
	}
}

func TestHosts(t *testing.T) {
	got, err := Hosts("a,b:2,[::1]", "1")
	if err != nil || strings.Join(got, " ") != "a:1 b:2 [::1]:1" {
		t.Errorf("Hosts: %v, %v", got, err)
	}
	for _, in := range []string{"", "a,,b", "a,"} {
		if _, err := Hosts(in, "1"); err == nil {
			t.Errorf("Hosts(%q): no error", in)
		}
	}
}

func TestTake(t *testing.T) {
	q := url.Values{"new": {"1"}, "other": {"x"}}
	if v, ok, err := Take(q, "new", "old"); v != "1" || !ok || err != nil {
		t.Errorf("Take(new) = %q, %v, %v", v, ok, err)
	}
	if _, ok := q["new"]; ok {
		t.Error("Take left the parameter in q")
	}
	if v, ok, err := Take(url.Values{"old": {"2"}}, "new", "old"); v != "2" || !ok || err != nil {
		t.Errorf("Take through an alias = %q, %v, %v", v, ok, err)
	}
	if _, ok, err := Take(url.Values{}, "new", "old"); ok || err != nil {
		t.Errorf("Take of an absent parameter: %v, %v", ok, err)
	}
	for _, q := range []url.Values{{"new": {"1", "2"}}, {"new": {"1"}, "old": {"2"}}} {
		if _, _, err := Take(q, "new", "old"); err == nil {
			t.Errorf("Take(%v): no error for a parameter given twice", q)
		}
	}
	if err := Unknown(q, "new"); err == nil || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("Unknown: %v, want one naming \"other\"", err)
	}
	if err := Unknown(url.Values{}, "new"); err != nil {
		t.Errorf("Unknown of nothing: %v", err)
	}
}

func TestInvalidHidesThePassword(t *testing.T) {
	u, _ := url.Parse("etcd://bob:hunter2@h/p?secret=1#frag")
	err := Invalid(u, "the server said %q", "bad password hunter2")
	if !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("Invalid: %v, want ErrInvalidURL", err)
	}
	for _, leak := range []string{"hunter2", "secret", "frag"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("Invalid: %q shows %q", err, leak)
		}
	}
	if got := Display(&url.URL{Scheme: "redis", Opaque: "bob:pw@h"}); got != "redis:..." {
		t.Errorf("Display of an opaque URL: %q", got)
	}
}
