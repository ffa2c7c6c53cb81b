package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/tailgate-dev/tailgate/internal/buildinfo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// This file: serve's OpenTelemetry traces (gateway.Config.TracerProvider),
// off unless -trace-otlp-endpoint names a collector. The gateway package
// uses only the OpenTelemetry API; the SDK and the OTLP exporter are the
// binary's.

// otlpTracesPath is what -trace-otlp-endpoint gets appended, as
// OTEL_EXPORTER_OTLP_ENDPOINT does: the flag names the collector's base
// URL (its OTLP/HTTP port is 4318), not the traces URL.
const otlpTracesPath = "/v1/traces"

// traceShutdownTimeout bounds how long the spans still queued at exit may
// take to reach the collector: an unreachable one must not hold the exit.
const traceShutdownTimeout = 5 * time.Second

// checkTrace validates the trace flags; sampleGiven says -trace-sample was
// given.
func (f serveFlags) checkTrace(sampleGiven bool) error {
	if f.traceEndpoint == "" {
		if sampleGiven {
			return errors.New("-trace-sample applies only with -trace-otlp-endpoint")
		}
		return nil
	}
	if _, err := tracesURL(f.traceEndpoint); err != nil {
		return err
	}
	if !(f.traceSample >= 0 && f.traceSample <= 1) { // NaN too
		return fmt.Errorf("-trace-sample %v must be within [0, 1]", f.traceSample)
	}
	return nil
}

// tracesURL is the URL spans are sent to for -trace-otlp-endpoint base.
func tracesURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("-trace-otlp-endpoint %q: want the collector's http:// or https:// base URL, such as http://127.0.0.1:4318", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + otlpTracesPath
	u.RawPath = ""
	return u.String(), nil
}

// tracerProvider returns the TracerProvider the flags ask for, nil when
// tracing is off. Spans go to the collector over OTLP/HTTP (protobuf), in
// batches, from a queue that drops spans rather than hold a request when
// the collector is slow or away. The exporter's OTEL_EXPORTER_OTLP_*
// variables (headers, timeout, compression, certificates) apply; the
// flag's endpoint wins over theirs. A read is recorded when its client's
// traceparent says it is sampled, as W3C trace context has it, and
// otherwise with probability -trace-sample. Export errors go to logger.
// Call Shutdown at exit, once the gateway is closed, to send what is
// queued.
func (f serveFlags) tracerProvider(logger *slog.Logger) (*sdktrace.TracerProvider, error) {
	if f.traceEndpoint == "" {
		return nil, nil
	}
	endpoint, err := tracesURL(f.traceEndpoint)
	if err != nil {
		return nil, err // unreachable: checked by config
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("-trace-otlp-endpoint: %w", err)
	}
	// The service is "tailgate" unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise (later detectors win).
	res, err := resource.New(context.Background(),
		resource.WithAttributes(semconv.ServiceName("tailgate"), semconv.ServiceVersion(buildinfo.Get().Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The SDK reports export failures through the global handler, which
	// otherwise prints them with the standard logger, outside the log's
	// format.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("tracing", "err", err) }))
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(f.traceSample))),
	), nil
}

// shutdownTracing sends the spans still queued and stops tp (nil: off).
func shutdownTracing(tp *sdktrace.TracerProvider, logger *slog.Logger) {
	if tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), traceShutdownTimeout)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		logger.Warn("tracing: spans still queued at exit were not all sent", "err", err)
	}
}
