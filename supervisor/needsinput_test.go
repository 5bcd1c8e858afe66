package supervisor

import "testing"

func TestClassifyPrompt(t *testing.T) {
	for _, c := range []struct{ screen, kind string }{
		{"Reading files…\nOverwrite config.txt? [y/N] ", InboxPermission},
		{"Do you want to allow this command?\n❯ 1. Yes\n  2. No\n> ", InboxPermission},
		{"Bash command: rm -rf build\nDo you want to proceed?\n❯ 1. Yes\n  2. No", InboxPermission},
		{"Pick a plan\n❯ 1. Small", InboxNeedsInput},
		{"Allow edits to src/app.go? (y/n)", InboxPermission},
		{"API error: rate limit exceeded\nwaiting", InboxRateLimited},
		{"Usage limit reached. Try again in 3 hours.\n", InboxRateLimited},
		{"Which file should I change?", InboxNeedsInput},
		{"Enter a name:", InboxNeedsInput},
		{"compiling 12 packages\nok", ""},
		{"", ""},
	} {
		if got, _ := classifyPrompt(c.screen); got != c.kind {
			t.Errorf("classifyPrompt(%q) = %q, want %q", c.screen, got, c.kind)
		}
	}
}

func TestScreenText(t *testing.T) {
	raw := []byte("\x1b[1mbold\x1b[0m line\r\nprogress 10%\rprogress 100%\r\n\x1b[32mOverwrite? [y/N]\x1b[0m \r\n\r\n")
	want := "bold line\nprogress 100%\nOverwrite? [y/N]"
	if got := screenText(raw, 10); got != want {
		t.Errorf("screenText = %q, want %q", got, want)
	}
}
