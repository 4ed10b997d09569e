package main

import (
	"fmt"
	"io"
)

// runRefreshPlan is `bootimagectl refresh plan`; the refresh library is not built yet.
func runRefreshPlan(_ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "bootimagectl refresh plan: not available yet")
	return exitUnusable
}
