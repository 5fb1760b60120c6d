// Command quickstart takes a lock on dlock's embedded in-process backend, uses
// its fencing token, watches for its loss, and releases it. Point DLOCK_URL at
// a real backend (for example redis://localhost:6379/0) to run it there.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/drivers/memory" // mem://
	_ "github.com/dlock-go/dlock/drivers/redis"  // redis://, rediss://
)

func main() {
	url := os.Getenv("DLOCK_URL")
	if url == "" {
		url = "mem://quickstart"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	client, err := dlock.Open(ctx, url, dlock.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	m, err := client.Mutex("quickstart/report")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("locked %q on %s: fencing token %d, valid until %s\n",
		lease.Key(), url, lease.Token(), lease.Deadline().Format(time.TimeOnly))

	// Work, stopping at once if the lock is lost.
	select {
	case <-lease.Done():
		log.Fatalf("lost the lock: %v", lease.Err())
	case <-time.After(100 * time.Millisecond):
		fmt.Println("work done while holding the lock")
	}

	if err := lease.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("unlocked")
}
