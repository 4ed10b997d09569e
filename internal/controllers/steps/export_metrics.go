package steps

import "github.com/bootimage-operator/bootimage-operator/bootimage"

// This file exports, for tests outside the module's own packages only, what drives the operator's
// metrics without a cluster: test/manifests evaluates the shipped alerts with Prometheus's engine
// on series these produce. The operator itself never calls them.

// ExportDecisionsForTest makes m's bootimage_decisions, bootimage_verifications and
// bootimage_outdated count t's decisions, as the operator's wiring does with its own tracker.
func (m *Metrics) ExportDecisionsForTest(t *Tracker) {
	m.ExportDecisions(t)
}

// CountRestoreForTest counts in bootimage_restores_total a restore that d decided, as a restore
// of the object does.
func (m *Metrics) CountRestoreForTest(d bootimage.Decision) {
	m.countRestore(d)
}
