package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"corral/sandbox"
)

// runDoctor probes what this host can isolate and prints it: a table for people,
// the HostReport as JSON with --json. It fails (exit 1) only when sessions cannot
// run at all; a degraded host is still a working one.
func runDoctor(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: corral doctor [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return badInput("%v", err)
	}
	if fs.NArg() > 0 {
		return badInput("unexpected argument %q (usage: corral doctor [--json])", fs.Arg(0))
	}

	report := sandbox.Probe()
	if *asJSON {
		b, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	} else if err := writeDoctorTable(stdout, report); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if !report.CanRun {
		return errors.New("sessions cannot run on this host (see the missing required items)")
	}
	return nil
}

// writeDoctorTable prints one aligned line per item, the cost indented under each
// missing one, and the isolation summary last.
func writeDoctorTable(w io.Writer, r sandbox.HostReport) error {
	width := 0
	for _, it := range r.Items {
		width = max(width, utf8.RuneCountInString(it.Name))
	}
	var b strings.Builder
	for _, it := range r.Items {
		mark := "✓"
		if !it.OK {
			mark = "✗"
		}
		fmt.Fprintf(&b, "%s %-*s  %s\n", mark, width, it.Name, it.Detail)
		if !it.OK && it.Cost != "" {
			note := it.Cost
			if it.Need == sandbox.NeedOptional {
				note += " (optional)"
			}
			fmt.Fprintf(&b, "  %-*s  ↳ %s\n", width, "", note)
		}
	}
	fmt.Fprintf(&b, "\nisolation: %s\n", r.Isolation)
	_, err := io.WriteString(w, b.String())
	return err
}
