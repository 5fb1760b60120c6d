package memcache

import (
	"errors"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock-go/dlock/driver"
)

// memcached's text protocol has no compare-and-delete and no owner-checked
// touch, and a plain delete (or a get followed by a delete) is the classic
// bug: it removes the lock of whoever took it after ours expired. Release
// and Extend therefore read the item with its CAS unique (gets), check that
// it names their request ID, and write it back with cas, which the server
// applies only if the item has not been replaced, re-stored or expired since
// the read. Release writes it with a negative expiry, which memcached stores
// as "already expired": a compare-and-delete in effect, after which add sees
// no item. Both cost two round trips. A Driver that knows its server
// selector does either in one when it can prove the item is still the one
// its lease last wrote (metacas.go), and falls back to these otherwise.

// maxCASAttempts bounds the read-and-swap loop. A conflict means the item
// changed between the read and the swap: by the lease's own concurrent
// Extend or Release (the core may renew while the application unlocks), or
// by another holder, which the next read finds.
const maxCASAttempts = 8

// errContention is returned when the item kept changing under a lease's
// read-and-swap; nothing was changed.
var errContention = errors.New("memcached: the lock item kept changing between read and compare-and-swap")

// expireNow is the expiry that makes memcached store an item as already
// expired: it reads a negative expiry as a Unix time in 1970.
const expireNow = -1

// extend rewrites the lock item with expiry secs, if it is h.id's, as h
// says (its token and value: the fields of a hold never change, so writing
// them again is only how the token gets in after the grant).
func (d *Driver) extend(n names, h holding, secs int32) error {
	id := h.id
	ttl := time.Duration(secs) * time.Second
	for range maxCASAttempts {
		it, err := d.read(n.lock)
		if err != nil {
			return err
		}
		if it == nil || !heldBy(it.Value, id) {
			return driver.ErrNotHeld
		}
		h.expires = time.Now().Add(ttl)
		it.Value = encodeValue(h)
		it.Expiration = secs
		_, err = d.call(func() error { return d.mc.CompareAndSwap(it) })
		switch {
		case err == nil:
			return nil
		case errors.Is(err, gomemcache.ErrCASConflict):
			// Changed since the read (perhaps by our own earlier attempt
			// on a connection that broke): read it again.
		case errors.Is(err, gomemcache.ErrCacheMiss), errors.Is(err, gomemcache.ErrNotStored):
			return driver.ErrNotHeld // expired or evicted since the read
		default:
			return err
		}
	}
	return errContention
}

// release makes the lock item expire at once, if it is id's.
func (d *Driver) release(n names, id string) error {
	return d.releaseByID(n, id, false)
}

// releaseByID is release; maybeDone says that an earlier attempt (a
// compare-and-delete whose reply was lost) may have removed the item.
func (d *Driver) releaseByID(n names, id string, maybeDone bool) error {
	// maybeDone is also set when a swap failed on a broken connection: the
	// server may have applied it, so finding the item gone (or taken by
	// another since) most likely means our release took effect.
	notHeld := func() error {
		if maybeDone {
			return nil
		}
		return driver.ErrNotHeld
	}
	for range maxCASAttempts {
		it, err := d.read(n.lock)
		if err != nil {
			return err
		}
		if it == nil || !heldBy(it.Value, id) {
			return notHeld()
		}
		gone := &gomemcache.Item{Key: n.lock, Expiration: expireNow, CasID: it.CasID}
		again, err := d.call(func() error { return d.mc.CompareAndSwap(gone) })
		maybeDone = maybeDone || again
		switch {
		case err == nil:
			d.hints.drop(n.lock)
			return nil
		case errors.Is(err, gomemcache.ErrCASConflict):
			// Changed since the read: by our own concurrent Extend, or
			// by another holder; the next read tells.
		case errors.Is(err, gomemcache.ErrCacheMiss), errors.Is(err, gomemcache.ErrNotStored):
			return notHeld()
		default:
			return err
		}
	}
	return errContention
}

// read returns the item name with its CAS unique, or nil when there is none.
func (d *Driver) read(name string) (*gomemcache.Item, error) {
	var it *gomemcache.Item
	_, err := d.call(func() (err error) { it, err = d.mc.Get(name); return err })
	if errors.Is(err, gomemcache.ErrCacheMiss) {
		return nil, nil
	}
	return it, err
}
