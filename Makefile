# dlock's commands. `make test` is the one CI runs: it prepares the machine
# (Docker engine, base image, the project's server images) and runs every test.

GO ?= go
# testcontainers-go: the reaper image cannot be pulled here, and without the
# host override it sees /.dockerenv and aims at the gateway instead of loopback.
TEST_ENV = TESTCONTAINERS_RYUK_DISABLED=true TESTCONTAINERS_HOST_OVERRIDE=localhost DLOCK_REQUIRE_CONTAINERS=1
# How `make test` and `make flakes` run the tests. Three packages at a time
# on two cores: the driver packages spend most of their time waiting out
# TTLs and containers, and their bounds hold on a loaded machine (make
# flakes LOAD=2 checks that).
TEST_FLAGS = -race -count=1 -p 3 -timeout 30m
# The packages, slowest first: go test starts package runs in the order it is
# given them, and Redis, Hazelcast and memcached take four to five minutes
# each while the rest take two or less. Listed after ./..., they started last
# and set the length of the run (about two minutes longer on 2 cores).
TEST_PKGS = ./drivers/redis ./drivers/hazelcast ./drivers/memcache ./...
# go vet with the tests' build flags: vet compiles every dependency to
# type-check against it, and with -race those compiles are the ones the test
# build reuses; a plain vet compiles them a second time (minutes from a cold
# cache).
VET_FLAGS = -race

# The conformance suite writes a record of each backend it passed into the
# directory this variable names (conformance.RecordEnv); the README's
# capability table is generated from the checked-in ones (docs/conformance).
RECORD_VAR = DLOCK_CONFORMANCE_RECORD
CAPTABLE_CHECK = $(GO) run ./internal/captable -check
# deadcode lists functions that nothing reaches. Its roots are the commands
# and, with -test, the tests and runnable examples: a library's exported API
# is reached only from applications, which its examples and tests stand for.
DEADCODE = $(GO) run golang.org/x/tools/cmd/deadcode@v0.52.0 -test

.PHONY: test check build-tests setup example bench bench-peers flakes captable captable-check

## test: set the machine up while the code is vetted and every test binary
## compiles (setup waits mostly on apt and Docker, the compiler on the CPU:
## on a fresh 2-core machine the overlap saves about two minutes), then run
## every test with -race, keeping the conformance records in a temporary
## directory, and fail if they differ from the checked-in ones
## (captable-check). Last, the tests of bench/peers (a module of its own,
## which ./... does not reach): a quick same-run comparison on Redis and one
## in process, so that a change to the benchmark kit cannot break it unseen.
test:
	@$(MAKE) --no-print-directory -j2 setup build-tests
	@records=$$(mktemp -d) && trap 'rm -rf "$$records"' EXIT && \
	echo "$(TEST_ENV) $(RECORD_VAR)=$$records $(GO) test $(TEST_FLAGS) $(TEST_PKGS)" && \
	$(TEST_ENV) $(RECORD_VAR)=$$records $(GO) test $(TEST_FLAGS) $(TEST_PKGS) && \
	$(CAPTABLE_CHECK) -fresh "$$records"
	cd bench/peers && $(TEST_ENV) $(GO) test $(TEST_FLAGS) ./...

## captable-check: fail when the README's capability table is not what the
## checked-in records (docs/conformance) render, and, with RECORDS=DIR (the
## records of a test run, as make test passes them), when those differ from
## the checked-in ones: a record missing from the run (its harness skipped,
## failed or run in part), a new one, or a changed one.
captable-check:
	$(CAPTABLE_CHECK) $(if $(RECORDS),-fresh "$(RECORDS)")

## captable: run the drivers' tests (with containers) keeping their
## conformance records, check those in under docs/conformance, and render
## the README's capability table from them. `go generate ./internal/captable`
## renders the table alone.
captable:
	@$(MAKE) --no-print-directory -j2 setup build-tests
	@records=$$(mktemp -d) && trap 'rm -rf "$$records"' EXIT && \
	echo "$(TEST_ENV) $(RECORD_VAR)=$$records $(GO) test $(TEST_FLAGS) ./drivers/..." && \
	$(TEST_ENV) $(RECORD_VAR)=$$records $(GO) test $(TEST_FLAGS) ./drivers/... && \
	$(GO) run ./internal/captable -install "$$records"

## build-tests: vet, format-check, and compile every test binary without
## running it (-exec true), so that the test run reuses the build cache.
build-tests: check
	@out=$$($(GO) test $(TEST_FLAGS) -exec true ./... 2>&1) || { echo "$$out"; exit 1; }; echo "test binaries built"
	@out=$$(cd bench/peers && $(GO) test $(TEST_FLAGS) -exec true ./... 2>&1) || { echo "$$out"; exit 1; }; echo "bench/peers test binary built"

## check: go vet, gofmt, no unreachable code, and the README's capability
## table against the checked-in records. bench/peers is a module of its own
## (./... does not reach it): it is vetted too, so that a change to the
## benchmark kit it uses cannot break it unseen.
check:
	$(GO) vet $(VET_FLAGS) ./...
	cd bench/peers && $(GO) vet $(VET_FLAGS) ./...
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@dead=$$($(DEADCODE) ./...) || exit 1; if [ -n "$$dead" ]; then echo "unreachable code (deadcode -test):"; echo "$$dead"; exit 1; fi
	$(CAPTABLE_CHECK)

## setup: make this machine ready for the container tests (idempotent).
setup:
	bash testenv/setup

## example: run the quickstart example on the embedded in-process backend.
example:
	$(GO) run ./examples/quickstart

## bench: the standard benchmark suite (internal/benchkit) on every driver,
## against real servers in containers: figures, not pass/fail.
bench: setup
	$(TEST_ENV) $(GO) test -run '^$$' -bench Suite -benchtime 1x -timeout 60m ./drivers/...

## bench-peers: dlock beside the libraries people use on each backend
## instead (redsync, redislock, etcd's concurrency.Mutex, zk.Lock, raw
## advisory locks, a polled memcached add), on the same servers in
## containers, in one run of a few minutes: prints the table and writes
## results.json and charts into PEERS_OUT. bench/peers is a module of its
## own, so that those libraries stay out of dlock's dependencies.
PEERS_OUT ?= docs/bench/peers
bench-peers: setup
	cd bench/peers && $(GO) run . --out "$(abspath $(PEERS_OUT))" $(PEERS_FLAGS)

## flakes: run the whole suite N times with -race while LOAD busy processes
## keep the cores loaded; reports every failing test (testenv/flakes).
N ?= 10
LOAD ?= 2
flakes:
	N=$(N) LOAD=$(LOAD) GO=$(GO) TEST_ENV='$(TEST_ENV)' TEST_FLAGS='$(TEST_FLAGS)' bash testenv/flakes $(TEST_PKGS)
