package hazelcast

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// batchParallelism bounds the Extends of one batch in flight at once. Each is
// three round trips, one after the other; the client multiplexes them on its
// connections, so running many together costs the member CPU, not latency.
const batchParallelism = 256

// extendBatch runs leases[i].Extend(ctx, ttls[i]) for every i, at most
// batchParallelism at a time, and returns their errors in order.
func extendBatch(ctx context.Context, leases []driver.Lease, ttls []time.Duration) []error {
	errs := make([]error, len(leases))
	if len(ttls) != len(leases) {
		for i := range errs {
			errs[i] = fmt.Errorf("hazelcast: ExtendBatch with %d leases and %d TTLs", len(leases), len(ttls))
		}
		return errs
	}
	sem := make(chan struct{}, batchParallelism)
	var wg sync.WaitGroup
	for i, l := range leases {
		if _, ok := l.(*lease); !ok {
			errs[i] = fmt.Errorf("hazelcast: ExtendBatch given a %T, not a lease of this driver", l)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = l.Extend(ctx, ttls[i])
		})
	}
	wg.Wait()
	return errs
}
