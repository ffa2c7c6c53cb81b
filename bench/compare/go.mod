module github.com/tailgate-dev/tailgate/bench/compare

go 1.26.0

require (
	github.com/cristalhq/hedgedhttp v0.9.2
	github.com/tailgate-dev/tailgate v0.0.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/influxdata/tdigest v0.0.1 // indirect
)

replace github.com/tailgate-dev/tailgate => ../..
