package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/drivers/memory" // registers mem://
)

// A lock taken, used with its fencing token, and released.
func Example() {
	ctx := context.Background()
	client, err := dlock.Open(ctx, "mem://example")
	if err != nil {
		panic(err)
	}
	defer client.Close(ctx)

	m, err := client.Mutex("reports/nightly", dlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	lease, err := m.Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("held, token", lease.Token())

	// Another owner cannot take it meanwhile.
	if _, err := m.TryLock(ctx); errors.Is(err, dlock.ErrLocked) {
		fmt.Println("busy:", errors.Is(err, dlock.ErrLocked))
	}

	if err := lease.Unlock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("released:", lease.Err())
	// Output:
	// held, token 1
	// busy: true
	// released: dlock: lock not held
}
