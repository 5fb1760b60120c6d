package zookeeper

import (
	"errors"
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// TestACLRefusesEmpty: an empty ACL would make nodes nobody may touch.
func TestACLRefusesEmpty(t *testing.T) {
	if err := WithACL(nil)(&options{}); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("WithACL(nil): %v, want ErrInvalidOption", err)
	}
}

// TestACL: the nodes of a Driver made WithACL carry that ACL, so that a
// session without the credentials can neither delete a held lock's node nor
// queue behind it, while the Driver itself still locks and releases.
func TestACL(t *testing.T) {
	base, key := testBase(), "acl"
	conn := rawConn(t)
	if err := conn.AddAuth("digest", []byte("alice:secret")); err != nil {
		t.Fatal(err)
	}
	// The base path's nodes are made open to all here: made by the Driver,
	// they would carry its ACL, and /dlock-test would shut out the other
	// tests' Drivers.
	for _, p := range []string{"/dlock-test", "/dlock-test" + base} {
		if _, err := conn.Create(p, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	acl := zk.DigestACL(zk.PermAll, "alice", "secret")
	d, err := New(conn, testSession, WithBasePath("/dlock-test"+base), WithACL(acl))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := d.Acquire(ctxFor(t), request(key, driver.Exclusive))
	if err != nil {
		t.Fatal(err)
	}
	dir := d.dirOf(key)
	children, _, err := conn.Children(dir)
	if err != nil || len(children) == 0 {
		t.Fatalf("children of %s: %v, %v", dir, children, err)
	}
	for _, p := range []string{dir, dir + "/" + children[0]} {
		got, _, err := conn.GetACL(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, acl) {
			t.Errorf("ACL of %s: %v, want %v", p, got, acl)
		}
	}
	stranger := rawConn(t)
	if err := stranger.Delete(dir+"/"+children[0], -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("a stranger's delete of the holder's node: %v, want ErrNoAuth", err)
	}
	if _, err := stranger.Create(dir+"/intruder", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("a stranger's node beside the holder's: %v, want ErrNoAuth", err)
	}
	if err := l.Release(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
}
