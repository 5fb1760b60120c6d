package testserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CheckoutDir finds the checkout from a directory inside it, and nothing
// from a directory outside any, where BuildImages says why it cannot run.
func TestCheckoutDir(t *testing.T) {
	dir := CheckoutDir()
	if _, err := os.Stat(filepath.Join(dir, "testenv", "setup")); dir == "" || err != nil {
		t.Fatalf("CheckoutDir() = %q from the package's directory: want the checkout (%v)", dir, err)
	}
	t.Chdir(t.TempDir())
	if dir := CheckoutDir(); dir != "" {
		t.Errorf("CheckoutDir() = %q outside a checkout, want \"\"", dir)
	}
	if err := BuildImages(t.Context()); err == nil || !strings.Contains(err.Error(), "not in a dlock checkout") {
		t.Errorf("BuildImages outside a checkout: %v, want the reason", err)
	}
}
