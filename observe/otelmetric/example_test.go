package otelmetric_test

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/observe/otelmetric"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

func Example() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)

	// In production the reader is an exporter's (OTLP, Prometheus);
	// a ManualReader lets the example print what was recorded.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	obs, err := otelmetric.New(mp)
	if err != nil {
		log.Fatal(err)
	}

	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	n := goredis.New(client)
	defer n.Close()
	lk, err := single.New(n, option.Observer(obs))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	l, err := lk.Acquire(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := lk.TryAcquire(ctx, "report"); err == nil {
		log.Fatal("acquired a held lock")
	}
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Count, "values")
				}
			}
		}
	}
	// Unordered output:
	// dlock.acquire.duration dlock.outcome=acquired,dlock.strategy=single 1 values
	// dlock.acquire.duration dlock.outcome=taken,dlock.strategy=single 1 values
	// dlock.acquisitions dlock.outcome=acquired,dlock.strategy=single 1
	// dlock.acquisitions dlock.outcome=taken,dlock.strategy=single 1
	// dlock.releases dlock.result=ok,dlock.strategy=single 1
	// dlock.leases.held dlock.strategy=single 0
}
