module github.com/tailgate-dev/tailgate/bench/compare

go 1.26.0

require (
	github.com/cristalhq/hedgedhttp v0.9.2
	github.com/tailgate-dev/tailgate v0.0.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/influxdata/tdigest v0.0.1 // indirect
)

replace github.com/tailgate-dev/tailgate => ../..
