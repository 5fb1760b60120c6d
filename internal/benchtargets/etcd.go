package benchtargets

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/internal/benchkit"
)

// Etcd is the etcd server at url (etcd://host:port[,host:port]/...; the etcd
// driver must be imported). Raw is a put then a delete on one clientv3
// client. Requests are counted by the first endpoint's Prometheus metrics,
// so on a dedicated server they are the benchmark's own. The returned func
// closes the raw client.
func Etcd(rawURL string) (benchkit.Target, func(), error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return benchkit.Target{}, nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(u.Host, ","), DialTimeout: 10 * time.Second})
	if err != nil {
		return benchkit.Target{}, nil, err
	}
	t := Open("etcd", rawURL)
	t.MinTTL = time.Second // etcd leases are whole seconds
	t.Raw = func(ctx context.Context, key string) error {
		if _, err := cli.Put(ctx, "raw/"+key, ""); err != nil {
			return err
		}
		_, err := cli.Delete(ctx, "raw/"+key)
		return err
	}
	metrics := "http://" + strings.Split(u.Host, ",")[0] + "/metrics"
	t.Requests = func() uint64 { return EtcdRequests(metrics) }
	return t, func() { _ = cli.Close() }, nil
}

// EtcdRequests returns how many gRPC messages the etcd member whose metrics
// are at url has received (each unary call is one; each keepalive, watch
// creation or cancellation on a stream is one; health checks are left out),
// or 0 when the metrics cannot be read. The scrape itself is HTTP, so it
// does not count itself.
func EtcdRequests(url string) uint64 {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var n uint64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "grpc_server_msg_received_total{") || strings.Contains(line, "grpc.health") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			n += uint64(v)
		}
	}
	return n
}
