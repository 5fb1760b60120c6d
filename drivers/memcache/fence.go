package memcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
)

// Fencing tokens come from a counter item per lock, stored without expiry
// and advanced by incr while the lock is held, by a block of tokenBlock per
// grant (or more: a retried incr skips a block), for as long as memcached
// keeps the counter. A grant's token is the first of its block; the core
// gives the others to the goroutines of the same Client it hands the lock
// to without a request (Capabilities.TokenBlock). memcached keeps nothing
// for sure: a restart, an eviction or a change of the server list loses the
// counter. The first grant that finds it missing therefore starts it again from its own clock, in microseconds
// since 1970, not from zero: every token issued before the loss was at most
// the counter's previous starting value plus the number of grants since,
// which is below the clock reading of any later moment, as long as grants
// come less often than once per microsecond (a grant takes a round trip) and
// the clock of the client that starts the counter again is not behind the
// clock of the one that started it before by more than the time between the
// two starts.
//
// A token is drawn after the lock item was added, so it is greater than the
// token of every earlier grant that was still valid when this one was made:
// an earlier holder whose lease ran out before its incr reached the server
// may draw a greater token, but its reply then comes after its validity
// deadline, and the core refuses the grant.

// tokenBlock is how many fencing tokens each grant reserves
// (Capabilities.TokenBlock): its own, and the next ones, which the core
// gives to the next goroutines of the same Client it hands the lock to,
// without a request. It is more than the core's handoffs in a row, so that
// every handoff inside a Client costs no request at all. Every later
// grant's token is past the block.
const tokenBlock = 16

// maxToken bounds the tokens the driver hands out. A counter beyond it was
// written by something else (or wrapped around); refusing it keeps tokens
// from going backwards silently.
const maxToken = 1 << 62

// errBadCounter is wrapped by the error of a grant whose fencing counter
// holds a value the driver cannot advance.
var errBadCounter = errors.New("memcached: the fencing counter cannot be advanced")

// nextToken advances the fencing counter fence by a block and returns the
// block's first token, starting the counter from the clock when it is
// missing.
func (d *Driver) nextToken(fence string) (uint64, error) {
	for range 3 {
		var v uint64
		_, err := d.call(func() (err error) { v, err = d.mc.Increment(fence, tokenBlock); return err })
		switch {
		case err == nil:
			if v < tokenBlock || v > maxToken {
				return 0, fmt.Errorf("%w: %q holds %d", errBadCounter, fence, v)
			}
			return v - tokenBlock + 1, nil
		case serverReplied(err):
			// e.g. "cannot increment or decrement non-numeric value"
			return 0, fmt.Errorf("%w: %q: %w", errBadCounter, fence, err)
		case !errors.Is(err, gomemcache.ErrCacheMiss):
			return 0, err
		}
		start := uint64(time.Now().UnixMicro())
		item := &gomemcache.Item{Key: fence, Value: strconv.AppendUint(nil, start+tokenBlock-1, 10)}
		_, err = d.call(func() error { return d.mc.Add(item) })
		switch {
		case err == nil:
			return start, nil
		case errors.Is(err, gomemcache.ErrNotStored):
			// Another grant started it first (or our own earlier attempt
			// did, on a connection that broke): advance it.
		default:
			return 0, err
		}
	}
	return 0, fmt.Errorf("%w: %q keeps disappearing", errBadCounter, fence)
}

// drawToken is nextToken, in one round trip when the server selector is
// known: a meta arithmetic command (ma) that creates the counter from the
// clock when it is missing, as nextToken does with its add (J is the value
// ma stores and returns when it creates the counter).
func (d *Driver) drawToken(ctx context.Context, fence string) (uint64, error) {
	if d.meta == nil {
		return d.nextToken(fence)
	}
	addr, err := d.meta.pick(fence)
	if err != nil {
		return 0, err
	}
	start := uint64(time.Now().UnixMicro())
	cmd := fmt.Appendf(nil, "ma %s N0 J%d D%d v\r\n", fence, start+tokenBlock-1, tokenBlock)
	var reply, value []byte
	if _, _, _, err := d.roundOn(ctx, addr, nil, cmd, 1, func(_ int, fields [][]byte, data []byte) {
		reply = bytes.Join(fields, []byte(" "))
		value = data
	}); err != nil {
		return 0, err
	}
	return tokenOf(fence, reply, value)
}

// tokenOf reads the reply to "ma <fence> ... v": the block's first token.
func tokenOf(fence string, reply, value []byte) (uint64, error) {
	if !bytes.HasPrefix(reply, []byte("VA ")) {
		// e.g. "CLIENT_ERROR cannot increment or decrement non-numeric value"
		return 0, fmt.Errorf("%w: %q: %q", errBadCounter, fence, reply)
	}
	v, err := strconv.ParseUint(string(value), 10, 64)
	if err != nil || v < tokenBlock || v > maxToken {
		return 0, fmt.Errorf("%w: %q holds %q", errBadCounter, fence, value)
	}
	return v - tokenBlock + 1, nil
}
