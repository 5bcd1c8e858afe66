package supervisor

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"corral/policies"
)

// A plan is read twice: go-toml's decoder gives the values with TOML's semantics
// (duplicate keys, redefined tables, integer forms), and its unstable AST gives the
// line of every key and array element, which the decoder does not keep. Fields are
// named the same way in both ("task[2].intent[0]"), so a problem found on a value
// finds its line by name.

// planDecoder turns a plan's values into records, collecting problems as it goes.
type planDecoder struct {
	file  string
	root  map[string]any
	lines map[string]int
	probs []Problem
}

// newPlanDecoder parses data, or returns the syntax problem that stops it.
func newPlanDecoder(file string, data []byte) (*planDecoder, *Problem) {
	d := &planDecoder{file: file, root: map[string]any{}}
	if err := toml.Unmarshal(data, &d.root); err != nil {
		p := Problem{File: file, Line: 1, Field: "toml", Msg: err.Error()}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			p.Line, _ = de.Position()
			p.Msg = strings.TrimPrefix(de.Error(), "toml: ")
			if k := de.Key(); len(k) > 0 {
				p.Field = strings.Join(k, ".")
			}
		}
		return nil, &p
	}
	d.lines = planKeyLines(data)
	return d, nil
}

// problem records a problem at field's line.
func (d *planDecoder) problem(field, format string, args ...any) {
	d.probs = append(d.probs, Problem{File: d.file, Line: d.line(field), Field: field, Msg: fmt.Sprintf(format, args...)})
}

// line finds where field was written, falling back to its enclosing tables; a value
// the plan never wrote (a default) is reported at line 1.
func (d *planDecoder) line(field string) int {
	if l := planLookupLine(d.lines, field); l > 0 {
		return l
	}
	return 1
}

func planLookupLine(lines map[string]int, field string) int {
	for field != "" {
		if l, ok := lines[field]; ok {
			return l
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			return 0
		}
		field = field[:i]
	}
	return 0
}

// planKeyLines maps every key, table header and array element of a plan to its line.
func planKeyLines(data []byte) map[string]int {
	k := planKeyLiner{lines: map[string]int{}}
	// Newline offsets, so a line is a binary search rather than a scan from the
	// start of the file (Parser.Shape's way) for each of a 100-task plan's keys.
	for i, c := range data {
		if c == '\n' {
			k.newlines = append(k.newlines, i)
		}
	}
	arrays := map[string]int{} // array-of-tables path → entries so far
	var p unstable.Parser
	p.Reset(data)
	table := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			it := e.Key()
			table = ""
			line := 0
			for it.Next() {
				if line == 0 {
					line = k.line(it.Node().Raw)
				}
				table = planJoinField(table, string(it.Node().Data))
				// [[task.x]] belongs to the latest [[task]].
				if n, ok := arrays[table]; ok && !it.IsLast() {
					table += "[" + strconv.Itoa(n-1) + "]"
				}
			}
			if e.Kind == unstable.ArrayTable {
				n := arrays[table]
				arrays[table] = n + 1
				table += "[" + strconv.Itoa(n) + "]"
			}
			k.lines[table] = line
		case unstable.KeyValue:
			k.keyValue(table, e)
		}
	}
	return k.lines
}

type planKeyLiner struct {
	lines    map[string]int
	newlines []int
}

func (k *planKeyLiner) line(r unstable.Range) int {
	return sort.SearchInts(k.newlines, int(r.Offset)) + 1
}

// keyValue records a key = value line under table, and inside its value.
func (k *planKeyLiner) keyValue(table string, kv *unstable.Node) {
	field, line := table, 0
	it := kv.Key()
	for it.Next() {
		if line == 0 {
			line = k.line(it.Node().Raw)
		}
		field = planJoinField(field, string(it.Node().Data))
	}
	k.value(field, kv.Value(), line)
}

func (k *planKeyLiner) value(field string, v *unstable.Node, line int) {
	if _, ok := k.lines[field]; !ok {
		k.lines[field] = line
	}
	it := v.Children()
	switch v.Kind {
	case unstable.Array:
		i := 0
		for it.Next() {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			cl := line
			// Containers carry no range of their own; scalars do.
			if c.Raw.Length > 0 {
				cl = k.line(c.Raw)
			}
			k.value(field+"["+strconv.Itoa(i)+"]", c, cl)
			i++
		}
	case unstable.InlineTable:
		for it.Next() {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				k.keyValue(field, c)
			}
		}
	}
}

// planJoinField appends a key to a field name, quoting keys that are not bare TOML keys
// so that "a.b" stays one key.
func planJoinField(field, key string) string {
	bare := key != ""
	for _, c := range key {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			bare = false
		}
	}
	if !bare {
		key = strconv.Quote(key)
	}
	if field == "" {
		return key
	}
	return field + "." + key
}

// checkKeys reports keys of table that are not in known, suggesting the closest one.
func (d *planDecoder) checkKeys(field string, table map[string]any, known []string, aliases map[string]string) {
	for _, k := range planSortedKeys(table) {
		if planContains(known, k) {
			continue
		}
		hint := aliases[strings.ToLower(k)]
		if hint == "" {
			hint = policies.Suggest(k, known)
		}
		if hint != "" {
			d.problem(planJoinField(field, k), "unknown key (did you mean %q?)", hint)
		} else {
			d.problem(planJoinField(field, k), "unknown key (known: %s)", strings.Join(known, ", "))
		}
	}
}

func planSortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func planContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// planDescribe names a decoded TOML value for a type mismatch message.
func planDescribe(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("string %q", v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return fmt.Sprintf("float %v", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a date/time %v", v)
}

// The typed readers below report a mismatch at field and return ok=false.

func (d *planDecoder) str(field string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		d.problem(field, "want a string, got %s", planDescribe(v))
	}
	return s, ok
}

func (d *planDecoder) integer(field string, v any) (int64, bool) {
	n, ok := v.(int64)
	if !ok {
		d.problem(field, "want an integer, got %s", planDescribe(v))
	}
	return n, ok
}

// number accepts integers where a float is meant: `cpu = 2` is as good as `cpu = 2.0`.
func (d *planDecoder) number(field string, v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	d.problem(field, "want a number, got %s", planDescribe(v))
	return 0, false
}

// size reads "2G"-style sizes, or a plain integer of bytes.
func (d *planDecoder) size(field string, v any) (int64, bool) {
	switch s := v.(type) {
	case int64:
		if s < 0 {
			d.problem(field, "size %d: want a non-negative number of bytes", s)
			return 0, false
		}
		return s, true
	case string:
		n, err := policies.ParseSize(s)
		if err != nil {
			d.problem(field, "%v", err)
			return 0, false
		}
		return n, true
	}
	d.problem(field, "want a size such as \"512M\" or \"2G\", got %s", planDescribe(v))
	return 0, false
}

func (d *planDecoder) duration(field string, v any) (time.Duration, bool) {
	s, ok := v.(string)
	if !ok {
		d.problem(field, "want a duration such as \"2s\" or \"500ms\", got %s", planDescribe(v))
		return 0, false
	}
	t, err := time.ParseDuration(s)
	if err != nil {
		d.problem(field, "duration %q: want a Go duration such as \"2s\", \"500ms\" or \"1m30s\"", s)
		return 0, false
	}
	return t, true
}

// oneOf reads a string that must be one of allowed.
func (d *planDecoder) oneOf(field string, v any, allowed ...string) (string, bool) {
	s, ok := d.str(field, v)
	if !ok {
		return "", false
	}
	if !planContains(allowed, s) {
		d.problem(field, "%q: want %s", s, planQuoteJoin(allowed))
		return "", false
	}
	return s, true
}

func planQuoteJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = strconv.Quote(w)
	}
	return strings.Join(q, " or ")
}

// array reads an array, hinting at the brackets when a single value was written.
func (d *planDecoder) array(field string, v any, of string) ([]any, bool) {
	a, ok := v.([]any)
	if !ok {
		hint := ""
		if s, isStr := v.(string); isStr {
			if _, err := strconv.Atoi(s); of == "integers" && err == nil {
				hint = fmt.Sprintf(" (write [%s])", s)
			} else if of == "strings" {
				hint = fmt.Sprintf(" (write [%q])", s)
			}
		}
		d.problem(field, "want an array of %s, got %s%s", of, planDescribe(v), hint)
	}
	return a, ok
}

func (d *planDecoder) strs(field string, v any) ([]string, bool) {
	a, ok := d.array(field, v, "strings")
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		s, ok := d.str(fmt.Sprintf("%s[%d]", field, i), e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func (d *planDecoder) ints(field string, v any) ([]int64, bool) {
	a, ok := d.array(field, v, "integers")
	if !ok {
		return nil, false
	}
	out := make([]int64, 0, len(a))
	for i, e := range a {
		n, ok := d.integer(fmt.Sprintf("%s[%d]", field, i), e)
		if !ok {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}
