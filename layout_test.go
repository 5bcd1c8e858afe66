package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// allowedImports is DESIGN.md's one-way import rule, written as the corral packages
// each package may import directly: tui → supervisor ← store; supervisor → sandbox,
// policies; sandbox, policies and themes import nothing of ours. Only main sees all.
var allowedImports = map[string][]string{
	"corral/tui":        {"corral/supervisor", "corral/themes"},
	"corral/supervisor": {"corral/sandbox", "corral/policies", "corral/supervisor/gateway"},
	// The model gateway is network plumbing like sandbox: it imports nothing of ours.
	"corral/supervisor/gateway": {},
	"corral/store":              {"corral/supervisor"},
	"corral/sandbox":            {},
	"corral/policies":           {},
	"corral/themes":             {},
}

// forbiddenDeps names packages that must never be reached, even transitively. (The TUI
// reaches sandbox through supervisor, as DESIGN.md draws it; it must not import it.)
var forbiddenDeps = map[string][]string{
	"corral/tui":                {"corral/store"},
	"corral/supervisor":         {"corral/store", "corral/tui"},
	"corral/sandbox":            {"corral/"},
	"corral/supervisor/gateway": {"corral/"},
	"corral/policies":           {"corral/"},
	"corral/themes":             {"corral/"},
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func TestImportRule(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := map[string]bool{}
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		seen[p.ImportPath] = true
		if p.ImportPath == "corral" {
			continue
		}
		allowed, ok := allowedImports[p.ImportPath]
		if !ok {
			t.Errorf("package %s is not in the layout; add it to DESIGN.md and allowedImports", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, "corral/") {
				continue
			}
			if !contains(allowed, imp) {
				t.Errorf("%s imports %s; the import rule allows only %v", p.ImportPath, imp, allowed)
			}
		}
		for _, dep := range p.Deps {
			for _, bad := range forbiddenDeps[p.ImportPath] {
				if dep == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad)) {
					t.Errorf("%s depends on %s (transitively); the import rule forbids it", p.ImportPath, dep)
				}
			}
		}
	}
	for pkg := range allowedImports {
		if !seen[pkg] {
			t.Errorf("package %s from the layout is missing", pkg)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
