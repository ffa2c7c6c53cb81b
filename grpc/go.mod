module github.com/tailgate-dev/tailgate/grpc

go 1.26.0

replace github.com/tailgate-dev/tailgate => ../

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/tailgate-dev/tailgate v0.0.0
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
