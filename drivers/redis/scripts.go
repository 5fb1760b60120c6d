package redis

import (
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The Lua scripts below are the whole protocol. Each runs atomically on the
// server, so no other client's command falls between its reads and writes.
//
// They read keys with redis.pcall, not redis.call: a lock key holding some
// other type (written by an operator, or by a future read-write lock) is then
// simply "not ours", and a counter of another type is refused after the lock
// was deleted again, instead of a script error that would stop the script
// halfway (Redis does not roll back what a failed script wrote).

// acquireScript takes the lock and issues its fencing token.
//
// KEYS[1] lock, KEYS[2] fencing counter; ARGV[1] request ID, ARGV[2] TTL in
// whole milliseconds. Returns {1, token} when granted, {0, PTTL of the lock}
// when someone else holds it (PTTL -1: no expiry), or an error when the
// counter cannot be advanced exactly (and then the lock is deleted again, so
// that the script changed nothing; checking the counter only after SET NX
// keeps the common refusal cheap).
//
// SET NX PX and the counter advance happen together or not at all, so a
// token is issued only with a grant and the lock never exists without an
// expiry. The counter becomes max(counter+1, server time in µs): strictly
// increasing while Redis keeps it, and still increasing after a restart that
// lost it, as long as the server clock did not step back. Lua numbers are
// doubles, exact below 2^53 (µs since 1970 are about 1.8e15), and the
// counter is written with %.0f because Lua's tostring would round it to 14
// digits. A lock already holding this request's ID is granted again: go-redis
// resends a command after a connection error, and the first run may have
// succeeded with its reply lost; reporting "locked" then would leave the
// lock behind, held by nobody.
var acquireScript = goredis.NewScript(`
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then
    return {0, redis.call('PTTL', KEYS[1])}
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local last = tonumber(redis.pcall('GET', KEYS[2]) or '0')
if last == nil or last < 0 or last >= 9007199254740991 then
  redis.call('DEL', KEYS[1])
  return redis.error_reply('dlock: the fencing counter holds no number below 2^53')
end
local now = redis.call('TIME')
local token = math.max(last + 1, tonumber(now[1]) * 1000000 + tonumber(now[2]))
redis.call('SET', KEYS[2], string.format('%.0f', token))
return {1, token}
`)

// extendScript pushes the lock's expiry out, if the lock is still ours.
//
// KEYS[1] lock; ARGV[1] request ID, ARGV[2] TTL in whole milliseconds.
// Returns 1 when extended, 0 when the lock expired or belongs to another
// owner (and then changes nothing).
var extendScript = goredis.NewScript(`
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// releaseScript deletes the lock if it is still ours, and wakes its waiters.
//
// KEYS[1] lock; ARGV[1] request ID, ARGV[2] the lock's channel. Returns 1
// when released, 0 when the lock expired or belongs to another owner (and
// then changes nothing and publishes nothing). Publishing in the same script
// means a waiter can never be woken before the lock is actually free.
var releaseScript = goredis.NewScript(`
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '')
  return 1
end
return 0
`)

// millis renders ttl for PX and PEXPIRE: whole milliseconds, rounded up so
// that the backend never promises less than the core asked for.
func millis(ttl time.Duration) string {
	return strconv.FormatInt(int64((ttl+time.Millisecond-1)/time.Millisecond), 10)
}
