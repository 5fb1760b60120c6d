package hazelcast

import "context"

// ownerOf returns the owner whose lock context ctx was derived from, or nil
// when ctx carries no owner of this driver (and so, for a lock call, the
// client's shared lock ID 0). Only the tests ask: the driver itself always
// knows its owner.
func ownerOf(ctx context.Context) *owner {
	o, _ := ctx.Value(ownerKey{}).(*owner)
	return o
}
