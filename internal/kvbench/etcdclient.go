package kvbench

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdConn is one benchmark client on etcd: its own clientv3.Client (one
// gRPC connection) to one member. Reads are Range (linearizable, etcd's
// default: a ReadIndex round like kvorum's GET), updates and inserts Put.
// A pipeline of N is N requests in flight at once on the connection.
type etcdConn struct {
	addr string
	cli  *clientv3.Client
	val  string
	key  []byte
	keys []string
	wg   sync.WaitGroup
}

// etcdOpTimeout bounds one request, so that a stuck cluster shows as
// errors instead of a hung benchmark.
const etcdOpTimeout = 10 * time.Second

func dialEtcd(ctx context.Context, addr string, value []byte) (*etcdConn, error) {
	cli, err := newEtcdClient(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &etcdConn{addr: addr, cli: cli, val: string(value)}, nil
}

func newEtcdClient(ctx context.Context, addrs ...string) (*clientv3.Client, error) {
	eps := make([]string, len(addrs))
	for i, a := range addrs {
		eps[i] = "http://" + a
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), Context: ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", addrs, err)
	}
	return cli, nil
}

func (c *etcdConn) close() { c.cli.Close() }

func (c *etcdConn) one(o op, key string, t0 time.Time, r *opResult) {
	ctx, cancel := context.WithTimeout(c.cli.Ctx(), etcdOpTimeout)
	defer cancel()
	if o.kind == KindRead {
		resp, err := c.cli.Get(ctx, key)
		*r = opResult{lat: time.Since(t0), err: err}
		if err == nil && len(resp.Kvs) == 0 {
			r.miss = true
		}
		return
	}
	_, err := c.cli.Put(ctx, key, c.val)
	*r = opResult{lat: time.Since(t0), err: err}
}

// batch runs ops concurrently (one request each) and waits for all. etcd
// failures are per request: the connection is never reported broken
// (clientv3 reconnects by itself).
func (c *etcdConn) batch(ops []op, res []opResult) error {
	c.keys = c.keys[:0]
	for _, o := range ops {
		c.key = AppendKey(c.key[:0], o.key)
		c.keys = append(c.keys, string(c.key))
	}
	t0 := time.Now()
	if len(ops) == 1 {
		c.one(ops[0], c.keys[0], t0, &res[0])
		return nil
	}
	for i := range ops {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.one(ops[i], c.keys[i], t0, &res[i])
		}()
	}
	c.wg.Wait()
	return nil
}
