package containerfaults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/dlock-go/dlock/conformance"
)

// DefaultReadyTimeout bounds how long [Container.Start] and
// [Container.WaitReady] wait for the readiness check when
// Container.ReadyTimeout is zero. It is generous because a cold container
// on a loaded 2-core CI machine can take seconds.
const DefaultReadyTimeout = 60 * time.Second

// stopTimeout is how long Stop lets the server shut down on SIGTERM before
// Docker kills it.
const stopTimeout = 10 * time.Second

// Container is the fault hooks on one running container. Its methods are
// safe for concurrent use, and serialised.
type Container struct {
	// ReadyTimeout bounds the wait for the readiness check after a start;
	// zero means DefaultReadyTimeout. Set it before the first use.
	ReadyTimeout time.Duration

	ctr   testcontainers.Container
	cli   *testcontainers.DockerClient
	ready func(ctx context.Context) error

	mu sync.Mutex // serialises the faults
}

// New returns the fault hooks of ctr, a started container, with a Docker
// client of their own (the one testcontainers would use), which
// [Container.Close] closes. ready returns nil once the backend in the
// container answers a real request of its protocol: a TCP connect is not
// enough, since Docker's port proxy accepts connections before the server
// inside listens. It is called in a loop after each start, each call bounded
// by a short deadline; nil means a started container is ready at once.
func New(ctx context.Context, ctr testcontainers.Container, ready func(ctx context.Context) error) (*Container, error) {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("containerfaults: Docker client: %w", err)
	}
	return &Container{ctr: ctr, cli: cli, ready: ready}, nil
}

// Docker returns the client the hooks use, for other requests about the
// container (such as a kill). It is closed by [Container.Close].
func (c *Container) Docker() *testcontainers.DockerClient { return c.cli }

// Faults returns the hooks as the conformance suite takes them: Pause,
// Resume and Restart.
func (c *Container) Faults() *conformance.Faults {
	return &conformance.Faults{Pause: c.Pause, Resume: c.Resume, Restart: c.Restart}
}

// name is how messages name the container: its ID, shortened as docker ps
// does.
func (c *Container) name() string {
	id := c.ctr.GetContainerID()
	return id[:min(12, len(id))]
}

// Pause freezes every process of the container (docker pause). The port
// still accepts TCP connections, but nothing is answered: requests hang until
// their deadline, as with a server stalled by GC, swap or a network
// partition.
//
// On a loaded machine the kernel's cgroup freezer may not stop every process
// within runc's own time limit; runc then thaws the container and the engine
// answers "unable to freeze". The container is running as before, so Pause
// asks again, for up to 30 s or until ctx ends: the fault is the test's
// tool, not what it tests.
func (c *Container) Pause(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := c.cli.ContainerPause(ctx, c.ctr.GetContainerID(), client.ContainerPauseOptions{})
		if err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "unable to freeze") || ctx.Err() != nil {
			return fmt.Errorf("containerfaults: pause %s: %w", c.name(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerfaults: pause %s: %w", c.name(), err)
		case <-time.After(50 * time.Millisecond): // let the load pass
		}
	}
}

// Resume thaws a container frozen by [Container.Pause]. Connections opened
// meanwhile, and the requests on them, go on where they stopped.
func (c *Container) Resume(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.cli.ContainerUnpause(ctx, c.ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("containerfaults: unpause %s: %w", c.name(), err)
	}
	return nil
}

// Stop stops the container: the server process exits, its connections are
// closed and its port refuses new ones. What the server keeps only in memory
// is gone. [Container.Start] brings it back.
func (c *Container) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	timeout := stopTimeout
	if err := c.ctr.Stop(ctx, &timeout); err != nil {
		return fmt.Errorf("containerfaults: stop %s: %w", c.name(), err)
	}
	return nil
}

// Start starts a container stopped by [Container.Stop] again and waits until
// the readiness check succeeds. Its address is the same only if the port was
// published with [PublishOn].
func (c *Container) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ctr.Start(ctx); err != nil {
		return fmt.Errorf("containerfaults: start %s: %w", c.name(), err)
	}
	return c.WaitReady(ctx)
}

// Restart is Stop, then Start: it returns once the backend answers again.
func (c *Container) Restart(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	return c.Start(ctx)
}

// WaitReady calls the readiness check until it succeeds or the ready
// timeout passes, and then returns the check's last error. Start calls it;
// call it after the container's first start when the container was not
// started with a wait strategy of its own.
func (c *Container) WaitReady(ctx context.Context) error {
	if c.ready == nil {
		return nil
	}
	timeout := c.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	delay := 10 * time.Millisecond
	for {
		attemptCtx, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		err := c.ready(attemptCtx)
		cancelAttempt()
		if err == nil {
			return nil
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("containerfaults: %s not ready after %v: %w",
				c.name(), time.Since(start).Round(time.Millisecond), err)
		case <-timer.C:
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// Close thaws the container if it is paused (stopping or removing a paused
// container fails on some engines) and closes the Docker client. The
// container itself is left running: terminate it as it was started.
func (c *Container) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, err := c.ctr.State(ctx); err == nil && st.Paused {
		_, _ = c.cli.ContainerUnpause(ctx, c.ctr.GetContainerID(), client.ContainerUnpauseOptions{})
	}
	return c.cli.Close()
}
