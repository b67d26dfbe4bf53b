// Package rlqs serves envoy.service.rate_limit_quota.v3 (RLQS): each Envoy
// reports, per bucket, the requests it allowed and denied, and gets back a
// share of the bucket's limit to enforce by itself as a token bucket, so
// that no request waits on a call to this service. Use it where a limit
// can be enforced approximately, a share per Envoy, in exchange for no
// round trip on the request's path; package rls decides each request
// exactly, at the cost of a call.
//
// New builds a Service from a function that returns the descriptors.Index
// in force (read at each report, so a reload needs no call) and Options;
// register it with rlqspb.RegisterRateLimitQuotaServiceServer. Options.Store,
// a DemandStore, holds what each client wants of each bucket: nil keeps it
// in this process (Memory), so the limit is divided among this instance's
// streams; redisdemand.Store shares it through Redis, so every instance
// divides one limit among all their clients. Explain shows one bucket's
// division; Drain ends the streams for a graceful stop, and Evict closes the
// longest-silent stream when the server's bound on streams is reached.
//
// It does not count requests itself (each Envoy enforces its share), nor
// listen, load limits files or serve metrics: the envoy-rls command does,
// around it.
//
// # How a bucket is divided
//
// A bucket id is matched against the limits of the report's domain, the
// same descriptor trees the RLS service reads; a limit's rate is global,
// divided max-min fairly (package share) among every client that reports a
// bucket, on every instance that shares the DemandStore.
package rlqs
