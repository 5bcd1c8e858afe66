package main

import "io"

func runGC(args []string, stdout, stderr io.Writer) error { return badInput("gc: todo") }
