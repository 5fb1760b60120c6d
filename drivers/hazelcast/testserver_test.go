package hazelcast

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// The policy of testserver.HazelcastTarget, which TestMain relies on: an
// external cluster when one is named, and otherwise a local image or a
// one-line reason to skip, never a pull.
func TestHazelcastTargetPolicy(t *testing.T) {
	const external = "hazelcast://127.0.0.1:1/elsewhere"
	t.Setenv(testserver.EnvHazelcastURL, external)
	target, err := testserver.HazelcastTarget(ctxFor(t))
	if err != nil || target.URL != external || target.Server != nil {
		t.Fatalf("with %s set: %+v, %v, want that URL and no container", testserver.EnvHazelcastURL, target, err)
	}

	t.Setenv(testserver.EnvHazelcastURL, "")
	const missing = "dlock-test/no-such-hazelcast:none"
	t.Setenv(testserver.EnvHazelcastImage, missing)
	_, err = testserver.HazelcastTarget(ctxFor(t))
	if !errors.Is(err, testserver.ErrNoHazelcast) {
		t.Fatalf("without a URL or an image: %v, want ErrNoHazelcast", err)
	}
	msg := err.Error()
	for _, want := range []string{"docker pull " + missing, testserver.EnvHazelcastURL + "="} {
		if !strings.Contains(msg, want) {
			t.Errorf("the reason to skip does not say %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("the reason to skip is not one line: %q", msg)
	}
}
