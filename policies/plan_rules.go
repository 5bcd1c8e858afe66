package policies

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxTaskID bounds a task id's length: ids name session directories, cgroups and the
// sandbox's hostname (`<task>-<attempt>` must stay a 63-byte DNS label), and every
// path in the overlay's option string counts against its 4 KiB limit.
const MaxTaskID = 48

var taskIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// ValidTaskID reports why id cannot name a task, or nil.
func ValidTaskID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty id")
	case len(id) > MaxTaskID:
		return fmt.Errorf("id %q: longer than %d characters", id, MaxTaskID)
	case !taskIDPattern.MatchString(id):
		return fmt.Errorf("id %q: want lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	return nil
}

// Suggest returns the word of known closest to word when it is close enough to be a
// likely typo ("promt" → "prompt"), or "".
func Suggest(word string, known []string) string {
	best, bestD := "", -1
	w := strings.ToLower(word)
	for _, k := range known {
		d := editDistance(w, strings.ToLower(k))
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	// One edit in three characters is a typo; more is a different word.
	if bestD < 0 || bestD > 2 || bestD*3 > len(w)+1 {
		return ""
	}
	return best
}

// editDistance is the optimal-string-alignment distance between a and b: insertions,
// deletions, substitutions and swaps of neighbours ("mian" → "main") cost one each.
// Counted in bytes; keys are ASCII.
func editDistance(a, b string) int {
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, rows[i-2][j-2]+1)
			}
			rows[i][j] = d
		}
	}
	return rows[len(a)][len(b)]
}

// FindCycles returns every dependency cycle among nodes, each once, as a path that
// starts and ends at the same node ([a b a]). A cycle starts at its node that comes
// first in nodes, so the same plan always reports the same cycles. Edges to nodes
// not in nodes are ignored.
func FindCycles(nodes []string, after map[string][]string) [][]string {
	pos := map[string]int{}
	for i, n := range nodes {
		pos[n] = i
	}
	const (
		white = iota
		grey
		black
	)
	colour := map[string]int{}
	var stack []string
	seen := map[string]bool{}
	var cycles [][]string
	var visit func(n string)
	visit = func(n string) {
		colour[n] = grey
		stack = append(stack, n)
		for _, m := range after[n] {
			if _, ok := pos[m]; !ok {
				continue
			}
			switch colour[m] {
			case white:
				visit(m)
			case grey:
				at := len(stack) - 1
				for stack[at] != m {
					at--
				}
				cycle := rotateToFirst(stack[at:], pos)
				if key := strings.Join(cycle, "\x00"); !seen[key] {
					seen[key] = true
					cycles = append(cycles, append(cycle, cycle[0]))
				}
			}
		}
		stack = stack[:len(stack)-1]
		colour[n] = black
	}
	for _, n := range nodes {
		if colour[n] == white {
			visit(n)
		}
	}
	return cycles
}

// rotateToFirst returns a copy of cycle rotated to start at its earliest node.
func rotateToFirst(cycle []string, pos map[string]int) []string {
	first := 0
	for i, n := range cycle {
		if pos[n] < pos[cycle[first]] {
			first = i
		}
	}
	return append(append([]string{}, cycle[first:]...), cycle[:first]...)
}
