package hazelcast

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// The policy of testserver.HazelcastTarget, which TestMain relies on: an
// external cluster when one is named; a one-line reason to skip only when
// testenv/setup could not build the image because Maven Central could not be
// reached (the reason it left); and otherwise a missing image is an error
// like any other server's.
func TestHazelcastTargetPolicy(t *testing.T) {
	server.NeedFaults(t) // asks the local engine about images
	const external = "hazelcast://127.0.0.1:1/elsewhere"
	t.Setenv(testserver.EnvHazelcastURL, external)
	target, err := testserver.HazelcastTarget(ctxFor(t))
	if err != nil || target.URL != external || target.Server != nil {
		t.Fatalf("with %s set: %+v, %v, want that URL and no container", testserver.EnvHazelcastURL, target, err)
	}

	t.Setenv(testserver.EnvHazelcastURL, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const missing = "dlock-test/no-such-hazelcast:none"
	t.Setenv(testserver.EnvHazelcastImage, missing)
	_, err = testserver.HazelcastTarget(ctxFor(t))
	if !errors.Is(err, testserver.ErrNoImage) || errors.Is(err, testserver.ErrNoHazelcast) {
		t.Fatalf("a missing image without a reason from setup: %v, want ErrNoImage (a failure, not a skip)", err)
	}

	file := testserver.HazelcastUnavailableFile()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	const reason = "Maven Central cannot be reached (mvn dependency:copy failed)"
	if err := os.WriteFile(file, []byte(reason+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = testserver.HazelcastTarget(ctxFor(t))
	if !errors.Is(err, testserver.ErrNoHazelcast) {
		t.Fatalf("a missing image that setup could not build: %v, want ErrNoHazelcast", err)
	}
	msg := err.Error()
	for _, want := range []string{missing, reason, testserver.EnvHazelcastURL + "="} {
		if !strings.Contains(msg, want) {
			t.Errorf("the reason to skip does not say %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("the reason to skip is not one line: %q", msg)
	}
}
