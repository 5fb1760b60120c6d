package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CheckoutDir returns the dlock checkout the working directory is in: the
// nearest directory, going up, with a testenv/setup; "" when there is none.
func CheckoutDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "testenv", "setup")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// BuildImages runs the checkout's testenv/setup, which builds the images
// the Start functions need (and starts a Docker engine if none answers).
// Its error names the last line setup printed.
func BuildImages(ctx context.Context) error {
	dir := CheckoutDir()
	if dir == "" {
		return errors.New("testenv/setup not found: not in a dlock checkout")
	}
	out, err := exec.CommandContext(ctx, "bash", filepath.Join(dir, "testenv", "setup")).CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("testenv/setup failed: %v: %s", err, lines[len(lines)-1])
	}
	return nil
}
