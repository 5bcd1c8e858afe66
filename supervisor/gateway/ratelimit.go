package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimits is what a response's headers say about the provider's limits. Unknown
// numbers are -1; a zero Reset is unknown.
type RateLimits struct {
	TokensRemaining   int64     `json:"tokens_remaining"`
	TokensLimit       int64     `json:"tokens_limit"`
	RequestsRemaining int64     `json:"requests_remaining"`
	Reset             time.Time `json:"reset,omitzero"`
	// Utilization is the share of the window used (0..1): reported by the provider
	// (subscription windows), or else 1 - remaining/limit of the tokens.
	Utilization float64 `json:"utilization"`
	// Raw keeps every rate-limit header as sent, for the record.
	Raw map[string]string `json:"raw,omitempty"`
}

// parseRateLimits reads Anthropic's anthropic-ratelimit-* and OpenAI's x-ratelimit-*
// headers. Reset times come as RFC 3339 (Anthropic), Unix seconds, or a duration from
// now ("6m0s", OpenAI); the earliest token reset is kept.
func parseRateLimits(h http.Header, now time.Time) RateLimits {
	rl := RateLimits{TokensRemaining: -1, TokensLimit: -1, RequestsRemaining: -1, Utilization: -1}
	for name, vals := range h {
		lname := strings.ToLower(name)
		if !strings.Contains(lname, "ratelimit") || len(vals) == 0 {
			continue
		}
		v := strings.TrimSpace(vals[0])
		if rl.Raw == nil {
			rl.Raw = map[string]string{}
		}
		rl.Raw[lname] = v
		switch {
		case strings.HasSuffix(lname, "utilization"):
			if f, err := strconv.ParseFloat(v, 64); err == nil && f > rl.Utilization {
				if f > 1 { // a percentage
					f /= 100
				}
				rl.Utilization = f
			}
		case lname == "anthropic-ratelimit-tokens-remaining" || lname == "x-ratelimit-remaining-tokens":
			rl.TokensRemaining = parseInt(v)
		case lname == "anthropic-ratelimit-tokens-limit" || lname == "x-ratelimit-limit-tokens":
			rl.TokensLimit = parseInt(v)
		case lname == "anthropic-ratelimit-requests-remaining" || lname == "x-ratelimit-remaining-requests":
			rl.RequestsRemaining = parseInt(v)
		}
		if strings.Contains(lname, "reset") && (strings.Contains(lname, "token") || strings.Contains(lname, "unified")) {
			if t, ok := ParseReset(v, now); ok && (rl.Reset.IsZero() || t.Before(rl.Reset)) {
				rl.Reset = t
			}
		}
	}
	if rl.Utilization < 0 && rl.TokensLimit > 0 && rl.TokensRemaining >= 0 {
		rl.Utilization = 1 - float64(rl.TokensRemaining)/float64(rl.TokensLimit)
	}
	return rl
}

func parseInt(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// ParseReset reads a reset time as providers and probes write it: an RFC 3339 time,
// Unix seconds, or a duration from now ("42s", "1h5m").
func ParseReset(v string, now time.Time) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, true
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 1e9 {
		return time.Unix(n, 0), true
	}
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(d), true
	}
	return time.Time{}, false
}
