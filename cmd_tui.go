package main

import (
	"context"
	"errors"
)

// runTUIFleet opens the TUI on a fleet until the user quits.
func runTUIFleet(ctx context.Context, fl *fleet) error {
	return errors.New("the TUI is not built yet; add --headless")
}
