package policies

import (
	"fmt"
	"strconv"
	"strings"
)

// sizeUnits are the suffixes a size may carry, binary multiples as users of
// docker/k8s expect ("512M" is 512 MiB).
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

// ParseSize reads a byte size such as "512M", "1.5GiB" or "1048576".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	mult, ok := sizeUnits[unit]
	if !ok || num == "" {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (K, M, G, T)", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: want a non-negative number with an optional unit (K, M, G, T)", s)
	}
	return int64(f * float64(mult)), nil
}

// FormatSize prints a byte count the way ParseSize reads it, for humans.
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + "G"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + "M"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + "K"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// FormatCount prints a count short, for token figures: 950, 1.2k, 12k, 3.4M.
func FormatCount(n int64) string {
	switch {
	case n >= 1_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
	case n >= 10_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 0, 64) + "k"
	case n >= 1_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatInt(n, 10)
}
