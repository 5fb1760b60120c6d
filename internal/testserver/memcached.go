package testserver

import (
	"context"
	"strings"
)

// MemcachedImage is the image testenv/setup builds from
// testenv/images/memcached.
const MemcachedImage = "dlock-test/memcached:latest"

// EnvMemcachedURL names the environment variable that points the tests at an
// existing memcached server (e.g. "memcache://127.0.0.1:11211") instead of a
// container. Such a server has no fault hooks, and the tests write to it.
const EnvMemcachedURL = "DLOCK_TEST_MEMCACHED_URL"

// MemcachedSpec describes a memcached container. The image listens on
// 0.0.0.0:11211 in the foreground; args replace the image's default settings
// (64 MB of memory, 1024 connections), e.g. "--memory-limit=2" for a server
// that must evict early, or "--disable-evictions". Readiness is a real
// "version" command.
func MemcachedSpec(args ...string) Spec {
	name := "memcached"
	if len(args) > 0 {
		// Containers are named after the spec and their port; a name of
		// its own tells a specially configured server apart in `docker ps`.
		name = "memcached-custom"
	}
	return Spec{
		Name:  name,
		Image: MemcachedImage,
		Port:  "11211/tcp",
		Cmd:   args,
		Ready: PingMemcached,
	}
}

// StartMemcached starts a memcached container with the given arguments (see
// [MemcachedSpec]); see [Start].
func StartMemcached(ctx context.Context, args ...string) (*Server, error) {
	return Start(ctx, MemcachedSpec(args...))
}

// MemcachedTarget returns the memcached server the tests should use: the one
// named by DLOCK_TEST_MEMCACHED_URL when it is set (Server nil), else a new
// container with URL "memcache://127.0.0.1:PORT". Its signature fits [Main].
func MemcachedTarget(ctx context.Context) (Target, error) {
	return target(ctx, EnvMemcachedURL, func(ctx context.Context) (*Server, error) { return StartMemcached(ctx) }, func(addr string) string { return "memcache://" + addr })
}

// PingMemcached sends "version" over memcached's text protocol to the server
// at addr and expects a "VERSION ..." line. It uses a raw connection so that
// readiness does not depend on the client library under test. ctx bounds the
// whole exchange.
func PingMemcached(ctx context.Context, addr string) error {
	return expectLine(ctx, "memcached version", addr, "version\r\n",
		func(l string) bool { return strings.HasPrefix(l, "VERSION ") }, "VERSION ...")
}
