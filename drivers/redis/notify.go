package redis

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// commandTimeout bounds the pub/sub commands sent without a caller's context:
// UNSUBSCRIBE (a failed one only costs stray messages, which are dropped) and
// the idle connection's PING.
const commandTimeout = 5 * time.Second

// linger is how long a channel stays subscribed after its last subscriber
// left. The core subscribes for every Lock call and closes the subscription
// when the call returns, so without it every Lock on a key that no other
// waiter of this Driver watches would cost a SUBSCRIBE and an UNSUBSCRIBE;
// with it, a key locked again within the linger costs none. Lingering only
// costs the messages of that key's releases, which are dropped.
const linger = 2 * time.Second

// pingIdle is how long the pub/sub connection may stay silent before it is
// pinged, and reconnectDelay how long to wait between attempts to reconnect
// it: go-redis's defaults for PubSub.Channel.
const (
	pingIdle       = 3 * time.Second
	reconnectDelay = 100 * time.Millisecond
)

// notifier fans the messages of one shared pub/sub connection out to the
// subscriptions of the Driver's waiters: one connection per Driver however
// many keys it watches, instead of one per waiter.
//
// Wake-ups are hints (the core polls beside them), but the notifier still
// closes the one gap that would otherwise cost a whole polling interval: the
// core subscribes and then tries the lock, and a release that lands after the
// try but before the server has processed the SUBSCRIBE publishes to nobody.
// So every subscribe confirmation from the server wakes the channel's
// subscribers too: the core then tries once more, after the subscription
// took effect, and finds the lock free if it was released in the gap; any
// later release publishes to it. This makes waiting for the confirmation in
// Subscribe unnecessary, so an uncontended Lock pays no extra round trip for
// its subscription. The same wake-up after go-redis reconnects and
// resubscribes covers releases published while the connection was down.
//
// On a Cluster (sharded) the notifier uses sharded pub/sub instead:
// SSUBSCRIBE to each channel on the shard that owns its slot (the lock's),
// so that a release's SPUBLISH reaches that shard only instead of every
// node. A connection serves the slots of one node only, so each channel then
// has a connection of its own, made by go-redis's ClusterClient on the
// channel's master and re-routed by it when the connection breaks; when the
// server ends a subscription because its slot moved (an unsolicited
// SUNSUBSCRIBE), the channel is subscribed again through a new connection.
type notifier struct {
	client goredis.UniversalClient
	// self is the Driver's name in the waiters' queues: a release whose
	// message names another Driver wakes nobody here (see scripts.go).
	self    string
	sharded bool // Cluster: SSUBSCRIBE, one connection per channel
	// grant, when set, receives the messages on a personal channel that
	// carry a grant by release ("SELF ID TOKEN TTL ASEQ": see grants.go)
	// before the channel's waiters are woken. Set once, before the first
	// subscription.
	grant func(personal, payload string)

	// cmdMu serialises membership changes with the SUBSCRIBE or UNSUBSCRIBE
	// each causes, so that the server receives the commands in the order of
	// the changes. It is held across those commands' writes (and a dial, when
	// the connection must be made), which only other membership changes wait
	// for.
	cmdMu  sync.Mutex
	closed bool               // guarded by cmdMu
	conns  map[string]*psConn // guarded by cmdMu; by connKey
	recv   sync.WaitGroup     // the connections' receive goroutines

	// mu guards chans and each channel's subs, and is never held across
	// I/O, so that receive is not delayed by a Subscribe that dials. Entries
	// are added and removed with both cmdMu and mu held.
	mu    sync.Mutex
	chans map[string]*channel // subscribed (or lingering) channels
}

// psConn is one pub/sub connection and its receive goroutine.
type psConn struct {
	ps      *goredis.PubSub
	closing chan struct{} // closed when the connection is being closed, for receive
}

// channel is the state of one subscribed channel.
type channel struct {
	subs map[*subscription]struct{} // guarded by notifier.mu
	// personal, when not empty, is the Driver's own channel for the same
	// key, subscribed and unsubscribed with it: a release that hands the
	// lock to a queued Driver publishes there, so that it reaches that
	// Driver alone instead of every Driver that watches the key (see
	// personalChannel). notifier.chans holds the channel under both names.
	personal string
	// lingering is set while the channel has no subscriber, since idleSince;
	// timer then fires expire. The timer is made once and re-armed, as a
	// hot key lingers after every Lock. Guarded by notifier.cmdMu.
	lingering bool
	idleSince time.Time
	timer     *time.Timer
}

func newNotifier(client goredis.UniversalClient, self string) *notifier {
	_, sharded := client.(*goredis.ClusterClient)
	return &notifier{client: client, self: self, sharded: sharded, conns: map[string]*psConn{}, chans: map[string]*channel{}}
}

// connKey is the connection a channel is subscribed on: the one shared
// connection, or on a Cluster its own.
func (n *notifier) connKey(channel string) string {
	if n.sharded {
		return channel
	}
	return ""
}

// subscription is one waiter's stream of wake-ups for one channel.
type subscription struct {
	n       *notifier
	channel string
	c       chan struct{} // buffered(1): wake-ups coalesce while nobody reads
	once    sync.Once
}

var _ driver.Subscription = (*subscription)(nil)

// C returns the channel that receives a value when the lock may be free: after
// a release, and once when the subscription takes effect on the server.
func (s *subscription) C() <-chan struct{} { return s.c }

// Close ends the subscription; the channel is unsubscribed on the server once
// no subscriber of this Driver has watched it for the linger time. It is safe
// to call more than once, and after the Driver's Close.
func (s *subscription) Close() error {
	s.once.Do(func() { s.n.leave(s) })
	return nil
}

// subscribe adds a subscriber to channel and to the Driver's personal
// channel for the same key, subscribing them on the server when no
// subscriber has watched them lately. It does not wait for the server's
// confirmation (see notifier).
func (n *notifier) subscribe(ctx context.Context, name string) (*subscription, error) {
	return n.subscribeWith(ctx, name, personalChannel(name, n.self), make(chan struct{}, 1))
}

// personalChannel is the channel of the Driver named self for the key
// whose channel is name: the release script publishes there when it frees
// the lock for that Driver, the head of the waiters' queue (lua/release.lua).
// It carries the key's hash tag, so on a Cluster it is in the lock's slot.
func personalChannel(name, self string) string { return name + ":" + self }

// subscribeWith subscribes to name and, when not empty, personal, as one
// channel of the notifier, delivering wake-ups to c, which must be buffered:
// RedLock merges the subscriptions of its masters into one channel (its
// waiters queue too, so it subscribes its personal channel on each master).
func (n *notifier) subscribeWith(ctx context.Context, name, personal string, c chan struct{}) (*subscription, error) {
	s := &subscription{n: n, channel: name, c: c}
	n.cmdMu.Lock()
	defer n.cmdMu.Unlock()
	if n.closed {
		return nil, driver.ErrClosed
	}
	n.mu.Lock()
	ch, ok := n.chans[name]
	if !ok {
		// Registered before SUBSCRIBE is sent, so that its confirmation,
		// which may arrive before send returns, finds s to wake.
		ch = &channel{subs: map[*subscription]struct{}{}, personal: personal}
		n.chans[name] = ch
		if personal != "" {
			n.chans[personal] = ch
		}
	}
	ch.subs[s] = struct{}{}
	n.mu.Unlock()
	if ok {
		// Already subscribed (or on its way, and then the confirmation wakes
		// s too): no command needed. Stop a lingering channel's timer; if it
		// already fired, expire finds lingering cleared and keeps the channel.
		if ch.lingering {
			ch.lingering = false
			ch.timer.Stop()
		}
		if n.sharded && n.conns[n.connKey(name)] == nil {
			// A reroute failed and left the channel without a connection:
			// try again for the new subscriber. Notifications are hints, so
			// a failure here only leaves the core polling.
			_ = n.send(ctx, ch.names(name)...)
		}
		return s, nil
	}
	if err := n.send(ctx, ch.names(name)...); err != nil {
		n.mu.Lock()
		delete(n.chans, name)
		delete(n.chans, personal)
		n.mu.Unlock()
		return nil, err
	}
	return s, nil
}

// names returns the names to subscribe for the channel called name: name,
// and its personal channel if it has one.
func (ch *channel) names(name string) []string {
	if ch.personal == "" {
		return []string{name}
	}
	return []string{name, ch.personal}
}

// send subscribes channels (a channel and its personal channel, which share
// a connection), opening their connection if there is none, with one
// command. Callers hold cmdMu.
func (n *notifier) send(ctx context.Context, channels ...string) error {
	channel := channels[0]
	c := n.conns[n.connKey(channel)]
	if c == nil {
		var ps *goredis.PubSub
		if n.sharded {
			ps = n.client.SSubscribe(ctx) // no channels yet: no I/O
			if err := ps.SSubscribe(ctx, channels...); err != nil {
				_ = ps.Close()
				return err
			}
		} else {
			ps = n.client.Subscribe(ctx)
			if err := ps.Subscribe(ctx, channels...); err != nil {
				_ = ps.Close()
				return err
			}
		}
		n.start(n.connKey(channel), ps)
		return nil
	}
	subscribe, unsubscribe := c.ps.Subscribe, c.ps.Unsubscribe
	if n.sharded {
		subscribe, unsubscribe = c.ps.SSubscribe, c.ps.SUnsubscribe
	}
	if err := subscribe(ctx, channels...); err != nil {
		// go-redis keeps the channel on its list even so, to subscribe it on
		// its next reconnect; take it off, as the caller gets the error.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
		_ = unsubscribe(uctx, channels...)
		cancel()
		return err
	}
	return nil
}

// start registers ps as the connection of key and starts reading it.
// Callers hold cmdMu.
func (n *notifier) start(key string, ps *goredis.PubSub) {
	c := &psConn{ps: ps, closing: make(chan struct{})}
	n.conns[key] = c
	n.recv.Add(1)
	go n.receive(key, c)
}

// stop closes the connection of key. Callers hold cmdMu.
func (n *notifier) stop(key string) {
	c := n.conns[key]
	if c == nil {
		return
	}
	delete(n.conns, key)
	close(c.closing)
	_ = c.ps.Close()
}

// leave removes s. When s was the channel's last subscriber, the channel
// lingers, and is unsubscribed if nobody subscribes it again meanwhile.
func (n *notifier) leave(s *subscription) {
	n.cmdMu.Lock()
	defer n.cmdMu.Unlock()
	if n.closed {
		return
	}
	n.mu.Lock()
	ch := n.chans[s.channel]
	if ch != nil {
		delete(ch.subs, s)
	}
	n.mu.Unlock()
	if ch == nil || len(ch.subs) > 0 {
		return
	}
	ch.lingering = true
	ch.idleSince = time.Now()
	if ch.timer == nil {
		name := s.channel
		ch.timer = time.AfterFunc(linger, func() { n.expire(name, ch) })
	} else {
		ch.timer.Reset(linger)
	}
}

// expire unsubscribes a channel whose linger ran out, unless it was
// subscribed again since (or the notifier closed). A timer that fired just
// as the channel was left again finds a newer idleSince, and re-arms.
func (n *notifier) expire(name string, ch *channel) {
	n.cmdMu.Lock()
	defer n.cmdMu.Unlock()
	if n.closed || !ch.lingering || n.chans[name] != ch {
		return
	}
	if left := linger - time.Since(ch.idleSince); left > 0 {
		ch.timer.Reset(left)
		return
	}
	ch.lingering = false
	n.mu.Lock()
	delete(n.chans, name)
	if ch.personal != "" {
		delete(n.chans, ch.personal)
	}
	n.mu.Unlock()
	if n.sharded {
		n.stop(n.connKey(name)) // its own connection: closing it unsubscribes
		return
	}
	if c := n.conns[""]; c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		defer cancel()
		_ = c.ps.Unsubscribe(ctx, ch.names(name)...)
	}
}

// receive reads one connection and wakes the subscribers of each message's
// channel, until the PubSub is closed. It reads the connection itself rather
// than through go-redis's PubSub.Channel, which would add a goroutine and a
// channel hop to every wake-up, and hide the subscription confirmations it
// needs. Like PubSub.Channel, it pings an idle connection, so that a broken
// one fails a write and go-redis reconnects; every Receive after a failure
// reconnects and resubscribes every channel.
func (n *notifier) receive(key string, c *psConn) {
	defer n.recv.Done()
	ctx := context.Background()
	for {
		msg, err := c.ps.ReceiveTimeout(ctx, pingIdle)
		switch {
		case err == nil:
		case errors.Is(err, goredis.ErrClosed):
			return
		case isTimeout(err):
			pctx, cancel := context.WithTimeout(ctx, commandTimeout)
			_ = c.ps.Ping(pctx) // the PONG comes back through Receive
			cancel()
			continue
		case n.sharded && goredis.HasErrorPrefix(err, "MOVED"):
			// SSUBSCRIBE reached a node that no longer owns the slot.
			n.reroute(key, c, key)
			continue
		default:
			// Broken, or the server is down: the next Receive reconnects.
			// Do not spin meanwhile.
			select {
			case <-c.closing:
				return
			case <-time.After(reconnectDelay):
			}
			continue
		}
		switch m := msg.(type) {
		case *goredis.Message:
			switch {
			case m.Payload == "" || m.Payload == n.self:
				n.wake(m.Channel)
			case n.grant != nil && strings.HasPrefix(m.Payload, n.self+" "):
				n.grant(m.Channel, m.Payload)
				n.wake(m.Channel)
			}
		case *goredis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				n.confirmed(m.Channel) // see notifier: closes the subscribe gap
			case "sunsubscribe":
				// The notifier never sends SUNSUBSCRIBE (it closes the
				// connection): the server ended it, as the slot moved.
				n.wake(m.Channel)
				n.reroute(key, c, m.Channel)
			}
		}
	}
}

// reroute subscribes a sharded channel again on a new connection, which
// go-redis makes to the master that owns the channel's slot after its
// cluster state is reloaded, and closes c, whose receive then returns. The
// reload is asynchronous: a new subscription that still reaches the old
// owner gets MOVED, and is rerouted again. A failure leaves the channel
// without notifications until its next subscriber tries again; the core
// polls meanwhile.
func (n *notifier) reroute(key string, c *psConn, channel string) {
	if cc, ok := n.client.(*goredis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
	select {
	case <-c.closing:
		return
	case <-time.After(reconnectDelay): // let the reload land
	}
	n.cmdMu.Lock()
	defer n.cmdMu.Unlock()
	if n.closed || n.conns[key] != c {
		return
	}
	n.stop(key)
	n.mu.Lock()
	ch, wanted := n.chans[channel]
	n.mu.Unlock()
	if !wanted {
		return
	}
	if channel == ch.personal {
		channel = key // a sharded connection's key is its channel's name
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	_ = n.send(ctx, ch.names(channel)...)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// watching reports whether any waiter of the Driver subscribes to channel.
func (n *notifier) watching(channel string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch := n.chans[channel]
	return ch != nil && len(ch.subs) > 0
}

// confirmed wakes the subscribers of a channel the server confirmed. A
// channel and its personal channel are subscribed by one command, so that
// either's confirmation says both took effect: only the last one's (the
// personal channel's, when there is one) wakes, once.
func (n *notifier) confirmed(name string) {
	n.mu.Lock()
	ch := n.chans[name]
	last := ch != nil && (ch.personal == "" || ch.personal == name)
	n.mu.Unlock()
	if last {
		n.wake(name)
	}
}

// wake sends a wake-up to every subscriber of channel, without blocking: a
// subscriber that has one pending does not need a second.
func (n *notifier) wake(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch := n.chans[channel]
	if ch == nil {
		return
	}
	for s := range ch.subs {
		select {
		case s.c <- struct{}{}:
		default:
		}
	}
}

// close ends the connections and waits for their receive goroutines to
// return, so that no goroutine of the Driver outlives Close. Subscriptions
// stay usable objects: their channels just receive nothing more.
func (n *notifier) close() {
	n.cmdMu.Lock()
	n.closed = true
	for key := range n.conns {
		n.stop(key)
	}
	for _, ch := range n.chans {
		if ch.timer != nil {
			ch.timer.Stop() // a timer that already fired finds closed set
		}
	}
	n.mu.Lock()
	clear(n.chans)
	n.mu.Unlock()
	n.cmdMu.Unlock()
	n.recv.Wait()
}
