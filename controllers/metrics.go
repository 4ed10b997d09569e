package controllers

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// The operator's metrics, on controller-runtime's registry beside its controller_runtime_* ones.
// The alerts in manifests/0000_90_machine-config_10_bootimage-operator_metrics.yaml name them; the cloud adapters add
// bootimage_cloud_requests_total and bootimage_cloud_request_duration_seconds.
var (
	updatesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bootimage_updates_total",
		Help: "Boot image updates written, by kind of object.",
	}, []string{"kind"})
	errorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bootimage_errors_total",
		Help: "Decisions that became Error, by kind of object and reason.",
	}, []string{"kind", "reason"})
	lastSuccessfulReconcile = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bootimage_last_successful_reconcile_timestamp_seconds",
		Help: "Unix time of the last MachineSet or ControlPlaneMachineSet reconcile that ran to the end.",
	})
	degradedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bootimage_degraded",
		Help: "1 while MachineConfiguration/cluster has BootImageUpdateDegraded=True, else 0.",
	})
	upgradeBlockedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bootimage_upgrade_blocked",
		Help: "1 while boot image skew blocks cluster upgrades (Upgradeable=False, ClusterBootImageSkewError), else 0.",
	})
	decisions = &decisionCollector{}
)

func init() {
	metrics.Registry.MustRegister(updatesTotal, errorsTotal, lastSuccessfulReconcile, degradedGauge, upgradeBlockedGauge, decisions)
	// Known kinds start at zero, so rate() sees the first update.
	for _, kind := range trackedKinds {
		updatesTotal.WithLabelValues(kind)
	}
}

// trackedKinds are the kinds of object whose decisions the Tracker holds.
var trackedKinds = []string{machineSetKind, cpmsKind}

const machineSetKind = "MachineSet"

var decisionsDesc = prometheus.NewDesc("bootimage_decisions",
	"Objects by the operator's current decision for them.", []string{"kind", "action", "reason"}, nil)

// decisionCollector counts the Tracker's decisions when Prometheus scrapes, so the gauge always
// agrees with the status conditions, which are computed from the same decisions.
type decisionCollector struct {
	tracker atomic.Pointer[Tracker]
}

// Describe implements prometheus.Collector.
func (c *decisionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- decisionsDesc }

// Collect implements prometheus.Collector.
func (c *decisionCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.tracker.Load()
	if t == nil {
		return
	}
	type series struct {
		kind   string
		action bootimage.Action
		reason string
	}
	counts := map[series]int{}
	for _, kind := range trackedKinds {
		for _, d := range t.Latest(kind) {
			counts[series{kind, d.Action, d.Reason}]++
		}
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.GaugeValue, float64(n), s.kind, string(s.action), s.reason)
	}
}

// exportDecisions makes bootimage_decisions count t's decisions. The registry is process-wide, so
// the last manager set up wins; the operator sets up one.
func exportDecisions(t *Tracker) { decisions.tracker.Store(t) }

// countUpdate counts a boot image written to an object of kind.
func countUpdate(kind string) { updatesTotal.WithLabelValues(kind).Inc() }

// countError counts a decision that became Error.
func countError(d bootimage.Decision) { errorsTotal.WithLabelValues(d.Kind, d.Reason).Inc() }

// markReconciled records that a reconcile ran to the end.
func markReconciled() { lastSuccessfulReconcile.SetToCurrentTime() }

// setDegraded mirrors BootImageUpdateDegraded.
func setDegraded(degraded bool) { degradedGauge.Set(boolValue(degraded)) }

// SetUpgradeBlocked sets bootimage_upgrade_blocked: call it with true while boot image skew blocks
// upgrades, with false once it does not.
func SetUpgradeBlocked(blocked bool) { upgradeBlockedGauge.Set(boolValue(blocked)) }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
