package testserver

import (
	"context"
)

// RedisImage is the image testenv/setup builds from testenv/images/redis.
const RedisImage = "dlock-test/redis:latest"

// EnvRedisURL names the environment variable that points the tests at an
// existing Redis server (e.g. "redis://127.0.0.1:6379/0") instead of a
// container. Such a server has no fault hooks, and the tests may write to it.
const EnvRedisURL = "DLOCK_TEST_REDIS_URL"

// RedisSpec describes the Redis container: the image's own command (no
// persistence, protected mode off) and readiness by a real PING.
func RedisSpec() Spec {
	return Spec{
		Name:  "redis",
		Image: RedisImage,
		Port:  "6379/tcp",
		Ready: PingRedis,
	}
}

// StartRedis starts a Redis container; see [Start].
func StartRedis(ctx context.Context) (*Server, error) {
	return Start(ctx, RedisSpec())
}

// RedisTarget returns the Redis server the tests should use: the one named by
// DLOCK_TEST_REDIS_URL when it is set (Server nil), else a new container with
// URL "redis://127.0.0.1:PORT/0". Its signature fits [Main].
func RedisTarget(ctx context.Context) (Target, error) {
	return target(ctx, EnvRedisURL, StartRedis, func(addr string) string { return "redis://" + addr + "/0" })
}

// PingRedis sends PING over RESP to the Redis server at addr and expects
// +PONG. It uses a raw connection so that readiness does not depend on the
// client library under test. ctx bounds the whole exchange.
func PingRedis(ctx context.Context, addr string) error {
	return expectLine(ctx, "redis PING", addr, "PING\r\n", func(l string) bool { return l == "+PONG" }, "+PONG")
}
