package memcache

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

func TestCapabilitiesDeclareTheTTLLimits(t *testing.T) {
	d := &Driver{}
	caps := d.Capabilities()
	if caps.MinTTL != MinTTL || caps.MaxTTL != MaxTTL {
		t.Errorf("Capabilities: MinTTL %v, MaxTTL %v, want %v and %v", caps.MinTTL, caps.MaxTTL, MinTTL, MaxTTL)
	}
	for _, want := range []string{"whole seconds", "2.9s of a 5s TTL", "renewal at TTL/3", "longest relative expiry"} {
		if !strings.Contains(caps.TTLReason, want) {
			t.Errorf("TTLReason %q does not say %q", caps.TTLReason, want)
		}
	}
	if caps.TokenBlock != tokenBlock || caps.Shared || caps.Reentrant || caps.Blocking || caps.Notifier != nil || caps.BatchExtender != nil || caps.Transferer != nil || caps.Inspector != nil {
		t.Errorf("Capabilities = %+v, want TokenBlock %d and the TTL limits only", caps, tokenBlock)
	}
	if err := caps.Check(); err != nil {
		t.Error(err)
	}
}
