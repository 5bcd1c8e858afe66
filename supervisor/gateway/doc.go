// Package gateway is the sessions' only way out of their network namespaces: a model
// gateway that forwards Anthropic- and OpenAI-shaped API calls to the configured
// upstreams unchanged (streaming included), injecting the host's credentials and
// metering every response's token usage and rate-limit headers; and an HTTP(S) proxy
// for everything else, limited to an allowlist of hosts.
//
// Each session gets a listener of its own (bound inside its netns by the sandbox), so
// every request is attributed to its session without trusting anything it sends. The
// gateway can hold a session's next model request (the quota policy's pause) until
// released.
//
// It imports no package of corral's: the supervisor turns its callbacks into records
// and events.
package gateway
