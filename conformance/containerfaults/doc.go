// Package containerfaults gives a driver's tests the fault hooks of the
// conformance suite for a backend that runs in a Docker container started
// with testcontainers-go: pausing, resuming and restarting the container
// ([conformance.Faults]), and cutting one client's network link to it
// ([conformance.Link], for [conformance.Harness.NewLinkedDriver]).
//
// It is a package of its own so that package conformance stays free of
// Docker: a driver whose tests need no container hooks imports conformance
// alone. dlock's own drivers use this package too, so its hooks are the ones
// the suite is known to pass with.
//
// The hooks are:
//
//   - [Container]: Pause freezes every process of the container (docker
//     pause), so that connections stay open and nothing answers; Resume
//     thaws it; Restart stops it (its port then refuses connections) and
//     starts it again, returning once a readiness check of the caller's
//     succeeds. [Container.Faults] returns them as a [conformance.Faults].
//   - [Proxy] and [Link]: a TCP proxy in the test process (toxiproxy's
//     library) between one client and the backend. Cut holds every byte
//     either way while connections stay open, as a network partition does;
//     Restore delivers what was held and lets traffic through again.
//     [LinkedURL] and [LinkedDial] build a Harness.NewLinkedDriver from a
//     driver's URL or dial hook.
//
// A restart must bring the backend back on the address its clients know.
// Docker publishes a container's port on a new random host port each time
// the container starts unless the binding is fixed, so start the container
// with [PublishOn] and a port from [FreePort], and give clients
// "127.0.0.1:PORT" (see the example).
//
// The Docker client that Container uses keeps idle HTTP connections, whose
// goroutines a goroutine-leak check would report: add [IgnoreGoroutines] to
// the check's options.
package containerfaults
