package supervisor

import (
	"fmt"
	"net/url"
	"os"
	"sort"
	"time"

	"corral/policies"
	"corral/supervisor/gateway"
)

// GatewayPlan is the plan's [gateway]: the model upstreams sessions reach through the
// gateway, the hosts its egress proxy allows, the price table, and the fleet quota.
type GatewayPlan struct {
	Upstreams []GatewayUpstream         `json:"upstreams"`
	Allow     []string                  `json:"allow,omitempty"`
	Prices    map[string]policies.Price `json:"prices,omitempty"`
	Quota     *policies.Quota           `json:"quota,omitempty"`
	// Probe is a host command printing the window's utilisation and reset, for
	// subscription windows no header reports; it runs every ProbeEvery in Dir.
	Probe      string        `json:"probe,omitempty"`
	ProbeEvery time.Duration `json:"probe_every,omitempty"`
	Dir        string        `json:"dir,omitempty"`
}

// GatewayUpstream is one [gateway.anthropic] or [gateway.openai] table. Keys are
// named by host environment variables, read when the supervisor starts: the plan
// never holds a secret, and the sandbox never sees one.
type GatewayUpstream struct {
	Kind           string `json:"kind"`
	URL            string `json:"url"`
	KeyEnv         string `json:"key_env,omitempty"`
	FallbackURL    string `json:"fallback_url,omitempty"`
	FallbackKeyEnv string `json:"fallback_key_env,omitempty"`
}

var (
	planGatewayKeys  = []string{"allow", gateway.Anthropic, gateway.OpenAI, "prices", "quota"}
	planUpstreamKeys = []string{"url", "key_env", "fallback_url", "fallback_key_env"}
	planPriceKeys    = []string{"input", "output", "cache_read", "cache_write"}
	planQuotaKeys    = []string{"metric", "limit", "window", "soft", "hard", "probe", "probe_every"}
	planUpstreamURL  = map[string]string{gateway.Anthropic: "https://api.anthropic.com", gateway.OpenAI: "https://api.openai.com"}
)

// decodeGateway reads [gateway]; nil when the plan has none (sessions then have no
// way out of a private network namespace).
func (d *planDecoder) decodeGateway(dir string) *GatewayPlan {
	v, ok := d.root["gateway"]
	if !ok {
		return nil
	}
	table, ok := v.(map[string]any)
	if !ok {
		d.problem("gateway", "want a table [gateway], got %s", planDescribe(v))
		return nil
	}
	d.checkKeys("gateway", table, planGatewayKeys, map[string]string{"allowlist": "allow", "hosts": "allow", "price": "prices", "claude": "anthropic"})
	g := &GatewayPlan{Dir: dir}
	if v, ok := table["allow"]; ok {
		hosts, _ := d.strs("gateway.allow", v)
		for i, h := range hosts {
			if _, err := gateway.AllowList([]string{h}); err != nil {
				d.problem(fmt.Sprintf("gateway.allow[%d]", i), "%v", err)
			}
		}
		g.Allow = hosts
	}
	for _, kind := range []string{gateway.Anthropic, gateway.OpenAI} {
		if v, ok := table[kind]; ok {
			if u, ok := d.decodeUpstream("gateway."+kind, kind, v); ok {
				g.Upstreams = append(g.Upstreams, u)
			}
		}
	}
	if len(g.Upstreams) == 0 {
		d.problem("gateway", "no upstream: add [gateway.anthropic] or [gateway.openai] with url = \"…\"")
	}
	if v, ok := table["prices"]; ok {
		g.Prices = d.decodePrices(v)
	}
	if v, ok := table["quota"]; ok {
		g.Quota, g.Probe, g.ProbeEvery = d.decodeQuota(v, g.Prices)
	}
	return g
}

func (d *planDecoder) decodeUpstream(field, kind string, v any) (GatewayUpstream, bool) {
	u := GatewayUpstream{Kind: kind, URL: planUpstreamURL[kind]}
	table, ok := v.(map[string]any)
	if !ok {
		d.problem(field, "want a table [%s], got %s", field, planDescribe(v))
		return u, false
	}
	d.checkKeys(field, table, planUpstreamKeys, map[string]string{"base_url": "url", "key": "key_env", "api_key_env": "key_env"})
	for key, dst := range map[string]*string{"url": &u.URL, "fallback_url": &u.FallbackURL} {
		if v, ok := table[key]; ok {
			s, ok := d.str(field+"."+key, v)
			if p, err := url.Parse(s); ok && (err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "") {
				d.problem(field+"."+key, "%q: want an http(s) URL such as %q", s, planUpstreamURL[kind])
			}
			*dst = s
		}
	}
	for key, dst := range map[string]*string{"key_env": &u.KeyEnv, "fallback_key_env": &u.FallbackKeyEnv} {
		if v, ok := table[key]; ok {
			s, ok := d.str(field+"."+key, v)
			if ok && os.Getenv(s) == "" {
				d.problem(field+"."+key, "$%s is not set in the host environment (the gateway injects it; the sandbox never sees it)", s)
			}
			*dst = s
		}
	}
	if u.FallbackKeyEnv != "" && u.FallbackURL == "" {
		d.problem(field+".fallback_key_env", "no fallback_url for it to authenticate to")
	}
	return u, true
}

func (d *planDecoder) decodePrices(v any) map[string]policies.Price {
	table, ok := v.(map[string]any)
	if !ok {
		d.problem("gateway.prices", "want a table of models, e.g. [gateway.prices.\"claude-sonnet-4-5\"], got %s", planDescribe(v))
		return nil
	}
	prices := map[string]policies.Price{}
	models := planSortedKeys(table)
	sort.Strings(models)
	for _, model := range models {
		field := planJoinField("gateway.prices", model)
		pt, ok := table[model].(map[string]any)
		if !ok {
			d.problem(field, "want a table of input, output, cache_read, cache_write (per million tokens), got %s", planDescribe(table[model]))
			continue
		}
		d.checkKeys(field, pt, planPriceKeys, map[string]string{"cache_creation": "cache_write", "cached": "cache_read", "prompt": "input", "completion": "output"})
		var p policies.Price
		for key, dst := range map[string]*float64{"input": &p.Input, "output": &p.Output, "cache_read": &p.CacheRead, "cache_write": &p.CacheWrite} {
			if v, ok := pt[key]; ok {
				if n, ok := d.number(field+"."+key, v); ok && n < 0 {
					d.problem(field+"."+key, "%v: want a price of 0 or more per million tokens", n)
				} else {
					*dst = n
				}
			}
		}
		prices[model] = p
	}
	return prices
}

func (d *planDecoder) decodeQuota(v any, prices map[string]policies.Price) (*policies.Quota, string, time.Duration) {
	table, ok := v.(map[string]any)
	if !ok {
		d.problem("gateway.quota", "want a table [gateway.quota], got %s", planDescribe(v))
		return nil, "", 0
	}
	d.checkKeys("gateway.quota", table, planQuotaKeys, map[string]string{"kind": "metric", "period": "window", "soft_limit": "soft", "hard_limit": "hard"})
	q := policies.DefaultQuota()
	if v, ok := table["metric"]; ok {
		q.Metric, _ = d.oneOf("gateway.quota.metric", v, policies.QuotaTokens, policies.QuotaCost, policies.QuotaUtilization)
	}
	if v, ok := table["limit"]; ok {
		q.Limit, _ = d.number("gateway.quota.limit", v)
	}
	if v, ok := table["window"]; ok {
		q.Window, _ = d.duration("gateway.quota.window", v)
	}
	for key, dst := range map[string]*float64{"soft": &q.Soft, "hard": &q.Hard} {
		if v, ok := table[key]; ok {
			*dst, _ = d.number("gateway.quota."+key, v)
		}
	}
	probe, every := "", time.Minute
	if v, ok := table["probe"]; ok {
		probe, _ = d.str("gateway.quota.probe", v)
	}
	if v, ok := table["probe_every"]; ok {
		if t, ok := d.duration("gateway.quota.probe_every", v); ok && t < time.Second {
			d.problem("gateway.quota.probe_every", "%v: want at least 1s", t)
		} else if ok {
			every = t
		}
	}
	// Validate reports one problem; only when metric and window read well, so a bad
	// value is not reported twice.
	if q.Metric != "" && q.Window > 0 {
		if err := q.Validate(); err != nil {
			field, msg, _ := cutField(err.Error())
			d.problem("gateway.quota."+field, "%s", msg)
		}
	}
	if q.Metric == policies.QuotaCost && len(prices) == 0 {
		d.problem("gateway.quota.metric", "\"cost\" needs a price table: add [gateway.prices.\"MODEL\"]")
	}
	return &q, probe, every
}

// cutField splits policies' "field: message" errors.
func cutField(s string) (field, msg string, ok bool) {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == ':' && s[i+1] == ' ' {
			return s[:i], s[i+2:], true
		}
	}
	return "", s, false
}

// checkBudgets reports budgets nothing could enforce: without a [gateway] no call is
// metered, and without prices nothing has a cost.
func (d *planDecoder) checkBudgets(gw *GatewayPlan, tasks []*planTask) {
	reported := map[string]bool{}
	for _, t := range tasks {
		for _, key := range []string{"budget_tokens", "budget_cost"} {
			field, ok := t.set[key]
			if !ok || reported[field] {
				continue
			}
			switch {
			case gw == nil:
				reported[field] = true
				d.problem(field, "a budget needs a [gateway] to meter the task's model calls")
			case key == "budget_cost" && len(gw.Prices) == 0:
				reported[field] = true
				d.problem(field, "a cost budget needs a price table: add [gateway.prices.\"MODEL\"]")
			}
		}
	}
}
