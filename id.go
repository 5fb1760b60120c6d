package dlock

import (
	"crypto/rand"
	"encoding/hex"
)

// newID returns a fresh acquisition ID: 128 bits from crypto/rand as 32 hex
// digits. It is what makes owner-checked release and renewal safe, so it must
// be unguessable and never reused.
func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
