package memcached

import (
	"strings"
	"testing"
	"time"
)

func TestTTLMapping(t *testing.T) {
	for _, c := range []struct {
		ttl      time.Duration
		secs     int32
		validity time.Duration
	}{
		{MinTTL, 5, 2900 * time.Millisecond},
		{5*time.Second + time.Nanosecond, 6, 3900 * time.Millisecond},
		{5500 * time.Millisecond, 6, 3900 * time.Millisecond},
		{6 * time.Second, 6, 3900 * time.Millisecond},
		{15 * time.Second, 15, 12900 * time.Millisecond},
		{MaxTTL, 2592000, MaxTTL - 2100*time.Millisecond},
	} {
		if err := checkTTL(c.ttl); err != nil {
			t.Errorf("checkTTL(%v): %v", c.ttl, err)
		}
		secs := expirySeconds(c.ttl)
		if secs != c.secs {
			t.Errorf("expirySeconds(%v) = %d, want %d", c.ttl, secs, c.secs)
		}
		if time.Duration(secs)*time.Second < c.ttl {
			t.Errorf("expirySeconds(%v) = %d: shorter than asked", c.ttl, secs)
		}
		if v := validityOf(secs); v != c.validity || v > c.ttl {
			t.Errorf("validityOf(%d) = %v, want %v (and at most the TTL %v)", secs, v, c.validity, c.ttl)
		}
	}
	// memcached reads an expiry above 30 days as a Unix time.
	if secs := expirySeconds(MaxTTL); secs > 30*24*3600 {
		t.Errorf("expirySeconds(MaxTTL) = %d, above memcached's 30 days", secs)
	}
	if validityOf(1) != 0 {
		t.Errorf("validityOf(1) = %v, want 0", validityOf(1))
	}
}

func TestCheckTTLRefuses(t *testing.T) {
	for _, c := range []struct {
		ttl  time.Duration
		want string
	}{
		{0, "shorter than the memcached driver's minimum of 5s"},
		{time.Second, "whole seconds"},
		{MinTTL - time.Nanosecond, "minimum of 5s"},
		{MaxTTL + time.Nanosecond, "longest relative expiry"},
	} {
		err := checkTTL(c.ttl)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkTTL(%v) = %v, want an error mentioning %q", c.ttl, err, c.want)
		}
	}
}
