// Package urlparams holds what the drivers' URL parsers share: the host
// list of a URL, with default ports and bracketed IPv6 addresses; query
// parameters that may be given once; the redacted form of a URL that
// their errors show; and the one parameter every driver takes the same way,
// connect_timeout, with the connecting it bounds ([Opener]). Each driver
// still says which other parameters it takes and what they mean.
package urlparams

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock"
)

// Display returns u for error messages: the password redacted, and the
// query and fragment left out, since a secret there would not be.
func Display(u *url.URL) string {
	if u.Opaque != "" {
		return u.Scheme + ":..." // "redis:user:password@host" is all opaque
	}
	v := *u
	v.RawQuery = ""
	v.ForceQuery = false
	v.Fragment = ""
	v.RawFragment = ""
	return v.Redacted()
}

// Invalid returns an error about u that wraps dlock.ErrInvalidURL: the URL
// as [Display] shows it, then the message, with u's password scrubbed from
// the message too (a client library's message may quote it).
func Invalid(u *url.URL, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if p, ok := u.User.Password(); ok && p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return fmt.Errorf("%w: %s: %s", dlock.ErrInvalidURL, Display(u), msg)
}

// Hosts splits a URL's host list ("h1:p1,h2,[::1]:p3") at its commas and
// checks each part with [HostPort].
func Hosts(list, defaultPort string) ([]string, error) {
	if list == "" {
		return nil, fmt.Errorf("no host")
	}
	var hosts []string
	for part := range strings.SplitSeq(list, ",") {
		hp, err := HostPort(part, defaultPort)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		hosts = append(hosts, hp)
	}
	return hosts, nil
}

// HostPort checks one "host[:port]" of a URL's host list and returns
// "host:port", with defaultPort where no port is given. An IPv6 address
// must be in brackets, as in "[::1]:2379": net/url takes brackets apart
// only when the URL names a single host, and "::1:2379" is ambiguous.
func HostPort(s, defaultPort string) (string, error) {
	host, port := s, defaultPort
	switch {
	case s == "":
		return "", fmt.Errorf("empty host")
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", fmt.Errorf("unclosed '['")
		}
		host = s[1:end]
		if rest := s[end+1:]; rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return "", fmt.Errorf("unexpected %q after the IPv6 address", rest)
			}
			port = p
		}
		if ip, err := netip.ParseAddr(host); err != nil || !ip.Is6() {
			return "", fmt.Errorf("%q in brackets is not an IPv6 address", host)
		}
	case strings.Count(s, ":") > 1:
		return "", fmt.Errorf("an IPv6 address must be in brackets, as in [::1]:%s", defaultPort)
	case strings.Contains(s, ":"):
		host, port, _ = strings.Cut(s, ":")
	}
	if host == "" {
		return "", fmt.Errorf("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not in 1 to 65535", port)
	}
	return net.JoinHostPort(host, port), nil
}

// Take removes the parameter name, and any of its deprecated aliases, from
// q and returns its value; ok is false when none of them is there. A
// parameter given more than once (under any of its names) is an error.
func Take(q url.Values, name string, aliases ...string) (v string, ok bool, err error) {
	var vs []string
	for _, n := range append([]string{name}, aliases...) {
		vs = append(vs, q[n]...)
		q.Del(n)
	}
	switch len(vs) {
	case 0:
		return "", false, nil
	case 1:
		return vs[0], true, nil
	}
	return "", false, fmt.Errorf("%s given %d times", name, len(vs))
}

// Unknown returns an error naming a parameter left in q, which holds what
// the parser did not [Take], or nil when q is empty; known lists the
// parameters the URL may have, for the message, which adds connect_timeout
// (which [Connect] takes before the parser sees the URL).
func Unknown(q url.Values, known ...string) error {
	if len(q) == 0 {
		return nil
	}
	known = append(slices.Clip(known), ConnectTimeoutParam)
	names := slices.Sorted(maps.Keys(q))
	return fmt.Errorf("unknown parameter %q (known: %s)", names[0], strings.Join(known, ", "))
}
