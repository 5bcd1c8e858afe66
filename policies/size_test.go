package policies

import "testing"

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "1024": 1024, "4k": 4096, "512M": 512 << 20, "512MiB": 512 << 20,
		"1.5G": 3 << 29, "2 GB": 2 << 30, "1t": 1 << 40,
	}
	for in, want := range good {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "12Q", "-1G", "1..2M", "ten"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{12: "12B", 4096: "4.0K", 3 << 29: "1.5G", 12 << 20: "12.0M"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
