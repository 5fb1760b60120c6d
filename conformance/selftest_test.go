package conformance

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/drivers/memory"
)

// The suite proves its strength: every known-broken algorithm fails at least
// one of the cases written to catch it, while the same driver unbroken passes
// those cases. Patterns 6 and 7 of the reference list (ZooKeeper's herd
// effect and its lost create reply) need sequence nodes, which the memory
// driver does not have: the ZooKeeper driver's own tests cover them.
func TestSuiteCatchesBrokenDrivers(t *testing.T) {
	type maker = func(*memory.Backend, *plainDriver, int64) driver.Driver
	for _, tc := range []struct {
		name     string
		broken   maker
		control  maker
		caughtBy []string
	}{
		{"1 SETNX then EXPIRE", acquireWithoutExpiry, unbroken, []string{"ExpiryAfterHolderVanishes"}},
		{"2 client-clock expiry with GETSET recovery", clientClockRecovery, unbroken, []string{"MutualExclusion", "RenewalKeepsLock"}},
		{"3 DEL without owner check", deleteWithoutOwnerCheck, unbroken, []string{"StaleUnlock"}},
		{"4 GET then DEL", checkThenDelete, unbroken, []string{"ReleaseRacingExpiry"}},
		{"5 renewal without owner check", renewWithoutOwnerCheck, unbroken, []string{"StaleExtend"}},
		{"reused fencing tokens", reusedFencingTokens, unbroken, []string{"FencingTokens", "MutualExclusion"}},
		{"8 one read field for all readers", singleReadField, unbrokenShared, []string{"ReadersShare"}},
		{"9 validity not reduced by elapsed time", validityFromReply, unbroken, []string{"SlowAcquireReply"}},
		{"handoff without owner check", transferWithoutOwnerCheck, unbrokenTransfer, []string{"Transfer"}},
		{"loss reported after release", lossAfterRelease, unbrokenLossReports, []string{"LossReports"}},
		{"handoff keeping the fencing token", transferKeepingToken, unbrokenTransfer, []string{"Transfer", "WaitersServedInOrder"}},
		{"token blocks claimed, not reserved", blocksNotReserved, unbrokenBlocks, []string{"TokenBlock", "FencingTokens"}},
		{"9 in Acquire: validity from the reply", acquireValidityFromReply, unbrokenBlocking, []string{"SlowAcquireReply"}},
		{"late grant message trusted", lateGrantTrusted, unbroken, []string{"RandomDeadlines"}},
		{"wake-up taken as a grant", wakeupTakenAsGrant, unbrokenNotifying, []string{"LateNotifications"}},
		{"grant by release taken on a late message", grantByReleaseTrusted, unbrokenNotifying, []string{"FrozenWaiter"}},
		{"validity overstated", validityOverstated, unbroken, []string{"FrozenHolder"}},
		{"a grant racing with its cancellation forgotten", cancelledGrantForgotten, unbrokenCancelledGrant, []string{"GrantCancelRace"}},
		{"subscriptions leaking a goroutine", subscriptionsLeaked, unbrokenNotifying, []string{"MutualExclusion"}},
		{"leases renewed by the driver until released", selfRenewingLeases, unbroken, []string{"AppliedAfterTimeout"}},
		{"capabilities changing from call to call", unstableCapabilities, unbrokenNotifying, []string{"Capabilities"}},
		{"a Blocking driver with a Transferer", blockingTransferer, unbrokenTransfer, []string{"Capabilities"}},
		{"a TTL limit declared and not honoured", ttlLimitOverstated, unbrokenTTLLimit, []string{"Capabilities"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			expectCaught(t, brokenHarness(tc.broken), brokenHarness(tc.control), tc.caughtBy...)
		})
	}
}

// expectCaught runs the cases caughtBy against the broken harness, where at
// least one must fail (none may hang or skip), and against its control,
// where every one must pass.
func expectCaught(t *testing.T, broken, control Harness, caughtBy ...string) {
	t.Helper()
	results, err := runNamed(broken, caughtBy...)
	if err != nil {
		t.Fatal(err)
	}
	caught := false
	for _, name := range caughtBy {
		r := results[name]
		if r.hung {
			t.Errorf("case %s hung on the broken driver instead of failing", name)
		}
		if r.skipped != "" {
			t.Errorf("case %s skipped the broken driver: %s", name, r.skipped)
		}
		if r.failed {
			caught = true
			t.Logf("caught by %s:\n%s", name, strings.Join(r.logs, "\n"))
		} else {
			t.Logf("%s passed:\n%s", name, strings.Join(r.logs, "\n"))
		}
	}
	if !caught {
		t.Errorf("the broken driver passed every case meant to catch it: %v", caughtBy)
	}

	results, err = runNamed(control, caughtBy...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range caughtBy {
		if r := results[name]; r.failed || r.hung || r.skipped != "" {
			t.Errorf("control: case %s on the unbroken driver: failed %v, hung %v, skipped %q:\n%s", name, r.failed, r.hung, r.skipped, strings.Join(r.logs, "\n"))
		}
	}
}
