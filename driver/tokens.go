package driver

// TokenBlocker is implemented by drivers whose every new grant reserves a
// block of fencing tokens: a grant with token T (from TryAcquire, Acquire or
// Transfer; not a reentrant entry, which shares its hold's token) reserves T
// and the TokenBlock()-1 tokens after it, which the backend issues to nobody
// else, so that every later grant's token is at least T+TokenBlock().
//
// The core uses the block to hand an exclusive lock to another goroutine of
// the same Client without asking the backend at all: the backend's hold
// stays as it is, and the next goroutine gets a lease of its own with the
// next token of the block. Tokens still increase strictly from each holder
// to the next, across processes too. Once the block is used up, the core
// transfers (Transferer) or releases, as without it.
//
// TokenBlock must return the same value for the life of the Driver; values
// below 2 turn the feature off.
//
// Fallback: without it, every handoff costs at least one request: a
// Transfer, or a release and an acquisition.
type TokenBlocker interface {
	TokenBlock() uint64
}
