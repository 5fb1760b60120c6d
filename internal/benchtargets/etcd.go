package benchtargets

import (
	"context"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/internal/benchkit"
)

// Etcd is the etcd server at url (etcd://host:port[,host:port]/...; the etcd
// driver must be imported). Raw is a put then a delete on one clientv3
// client. Requests are not counted here (the driver's own benchmark reads
// the server's metrics). The returned func closes the raw client.
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
	return t, func() { _ = cli.Close() }, nil
}
