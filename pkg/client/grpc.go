package client

import (
	"context"
	"net/http"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// UnaryServerInterceptor limits the unary calls of a gRPC server: describe
// gives the descriptors of a call (none: the call passes without a
// Check), each counting one hit in domain.
//
// An allowed call runs its handler, its response carrying the rate-limit
// headers as header metadata (lower-case keys: x-ratelimit-limit, ...).
// A refused call gets RESOURCE_EXHAUSTED with an errdetails.RetryInfo of
// Decision.RetryAfter (1 s when the failure mode refused), the headers
// sent first. Check's error (a descriptor describe got wrong), or a nil
// describe (ErrNoDescribe), is INTERNAL.
func UnaryServerInterceptor(c *Client, domain string, describe func(ctx context.Context, fullMethod string, req any) []Descriptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if describe == nil {
			return nil, status.Error(codes.Internal, ErrNoDescribe.Error())
		}
		if err := admit(ctx, c, domain, describe(ctx, info.FullMethod, req), grpc.ServerTransportStreamFromContext(ctx)); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor limits the streams of a gRPC server as
// UnaryServerInterceptor limits unary calls: one Check when the stream
// opens, before the handler runs.
func StreamServerInterceptor(c *Client, domain string, describe func(ctx context.Context, fullMethod string) []Descriptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if describe == nil {
			return status.Error(codes.Internal, ErrNoDescribe.Error())
		}
		if err := admit(ss.Context(), c, domain, describe(ss.Context(), info.FullMethod), ss); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// headerSender is where a call's header metadata goes: a unary call's
// transport stream, or a streaming call's ServerStream.
type headerSender interface {
	SetHeader(metadata.MD) error
	SendHeader(metadata.MD) error
}

// admit decides a call with descriptors ds (none: it passes unasked) and
// puts the decision's headers on hs; its error is the call's status when
// it must not run.
func admit(ctx context.Context, c *Client, domain string, ds []Descriptor, hs headerSender) error {
	if len(ds) == 0 {
		return nil
	}
	d, err := c.Check(ctx, domain, 0, ds...)
	if err != nil {
		return status.Errorf(codes.Internal, "rate limit check: %v", err)
	}
	md := headerMetadata(d)
	if !d.Allowed {
		// Sent now, as headers of their own: a refusal's status alone
		// would carry them as trailers.
		if hs != nil && md != nil {
			_ = hs.SendHeader(md)
		}
		return refusal(d)
	}
	if hs != nil && md != nil {
		_ = hs.SetHeader(md)
	}
	return nil
}

// headerMetadata is the decision's HTTP headers as gRPC metadata, whose
// keys are lower-case. gRPC drops the keys it owns itself (content-type,
// which the service adds to a refusal under -json-429-body, and grpc-*).
func headerMetadata(d Decision) metadata.MD {
	if d.Response == nil {
		return nil // nothing is known of the limit (Unavailable)
	}
	h := make(http.Header)
	d.WriteHeaders(h)
	md := make(metadata.MD, len(h))
	for k, vs := range h {
		md[strings.ToLower(k)] = vs
	}
	return md
}

// refusal is the status of a refused call: RESOURCE_EXHAUSTED, with the
// wait in a RetryInfo that gRPC clients and retry policies read.
func refusal(d Decision) error {
	wait := d.RetryAfter()
	if wait <= 0 {
		wait = time.Second
	}
	st := status.New(codes.ResourceExhausted, "rate limited")
	if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		st = withInfo
	}
	return st.Err()
}
