package steps

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// Metrics are the operator's metrics, all of them: this file is where they are defined. They are
// registered where the embedder says (see controllers.Options.Metrics; controller-runtime's
// registry, beside its controller_runtime_* ones, by default), never at import time. The alerts in
// manifests/0000_90_machine-config_10_bootimage-operator_metrics.yaml name them. The cloud
// adapters count their requests through Observe (a cloud.Observer). A nil *Metrics counts nothing.
type Metrics struct {
	updatesTotal            *prometheus.CounterVec
	restoresTotal           *prometheus.CounterVec
	errorsTotal             *prometheus.CounterVec
	lastSuccessfulReconcile prometheus.Gauge
	degradedGauge           prometheus.Gauge
	upgradeBlockedGauge     prometheus.Gauge
	decisions               *decisionCollector
	cloudRequests           *prometheus.CounterVec
	cloudRequestDuration    *prometheus.HistogramVec
}

// NewMetrics returns unregistered metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		updatesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bootimage_updates_total",
			Help: "Boot image updates written, by kind of object (Kind.group for Cluster API objects).",
		}, []string{"kind"}),
		restoresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bootimage_restores_total",
			Help: "Objects the operator put back on their previous boot image because a machine failed on the new one, by kind of object (Kind.group for Cluster API objects).",
		}, []string{"kind"}),
		errorsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bootimage_errors_total",
			Help: "Decisions that became Error, by kind of object (Kind.group for Cluster API objects) and reason.",
		}, []string{"kind", "reason"}),
		lastSuccessfulReconcile: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bootimage_last_successful_reconcile_timestamp_seconds",
			Help: "Unix time of the last MachineSet, ControlPlaneMachineSet or Cluster API MachineSet or MachineDeployment reconcile that ran to the end.",
		}),
		degradedGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bootimage_degraded",
			Help: "1 while MachineConfiguration/cluster has BootImageUpdateDegraded=True, else 0.",
		}),
		upgradeBlockedGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bootimage_upgrade_blocked",
			Help: "1 while boot image skew blocks cluster upgrades (Upgradeable=False, ClusterBootImageSkewError), else 0.",
		}),
		decisions: &decisionCollector{},
		cloudRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bootimage_cloud_requests_total",
			Help: "Cloud API requests made to classify and check boot images, by API and result (success or error). An answer such as \"no such image\" is a success.",
		}, []string{"api", "result"}),
		cloudRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bootimage_cloud_request_duration_seconds",
			Help:    "Duration of the cloud API requests made to classify and check boot images, by API, SDK retries included.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"api"}),
	}
	// Known kinds start at zero, so rate() sees the first update.
	for _, kind := range trackedKinds {
		m.updatesTotal.WithLabelValues(kind)
		m.restoresTotal.WithLabelValues(kind)
	}
	return m
}

// Collectors returns what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.updatesTotal, m.restoresTotal, m.errorsTotal, m.lastSuccessfulReconcile, m.degradedGauge, m.upgradeBlockedGauge, m.decisions, m.cloudRequests, m.cloudRequestDuration}
}

// trackedKinds are the kinds of Machine API object whose decisions the Tracker holds.
var trackedKinds = []string{machineSetKind, bootimage.KindControlPlaneMachineSet}

const machineSetKind = "MachineSet"

// metricKind is the kind label of d's object: its kind for the Machine API (the series the
// shipped alerts know), Kind.group as kubectl spells it for Cluster API objects, so that a Cluster
// API MachineSet never counts as a Machine API one.
func metricKind(d bootimage.Decision) string {
	if d.APIGroup == string(bootimage.ClusterAPIGroup) {
		return d.Kind + "." + d.APIGroup
	}
	return d.Kind
}

var decisionsDesc = prometheus.NewDesc("bootimage_decisions",
	"Objects by the operator's current decision for them, by kind (Kind.group for Cluster API objects) and the OS stream their boot image comes from.", []string{"kind", "action", "reason", "stream"}, nil)

var verificationsDesc = prometheus.NewDesc("bootimage_verifications",
	"Objects by the state of their newest boot image change (Pending until a machine boots it, Verified, Failed), by kind (Kind.group for Cluster API objects).", []string{"kind", "state"}, nil)

var outdatedDesc = prometheus.NewDesc("bootimage_outdated",
	"Selected objects left on an image other than their target: left behind, failing, held after a restore or waiting for a canary (bootimage.Decision.Outdated), by kind (Kind.group for Cluster API objects).", []string{"kind"}, nil)

// decisionCollector counts the Tracker's decisions when Prometheus scrapes, so the gauge always
// agrees with the status conditions, which are computed from the same decisions.
type decisionCollector struct {
	tracker atomic.Pointer[Tracker]
}

// Describe implements prometheus.Collector.
func (c *decisionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- decisionsDesc
	ch <- verificationsDesc
	ch <- outdatedDesc
}

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
		stream string
	}
	type verification struct{ kind, state string }
	counts, verifications, outdated := map[series]int{}, map[verification]int{}, map[string]int{}
	// Cluster API MachineSets are tracked as MachineSets; metricKind tells them apart.
	for _, kind := range append(trackedKinds, bootimage.KindMachineDeployment) {
		for _, d := range t.Latest(kind) {
			counts[series{metricKind(d), d.Action, d.Reason, d.Stream}]++
			if d.Verification != "" {
				verifications[verification{metricKind(d), d.Verification}]++
			}
			if d.Outdated() {
				outdated[metricKind(d)]++
			}
		}
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.GaugeValue, float64(n), s.kind, string(s.action), s.reason, s.stream)
	}
	for v, n := range verifications {
		ch <- prometheus.MustNewConstMetric(verificationsDesc, prometheus.GaugeValue, float64(n), v.kind, v.state)
	}
	// Every tracked kind has a series, 0 when nothing is outdated, so an alert on it resolves.
	for _, kind := range trackedKinds {
		outdated[kind] += 0
	}
	for kind, n := range outdated {
		ch <- prometheus.MustNewConstMetric(outdatedDesc, prometheus.GaugeValue, float64(n), kind)
	}
}

// ExportDecisions makes bootimage_decisions count t's decisions.
func (m *Metrics) ExportDecisions(t *Tracker) {
	if m != nil {
		m.decisions.tracker.Store(t)
	}
}

// countUpdate counts a boot image written, as d decided.
func (m *Metrics) countUpdate(d bootimage.Decision) {
	if m != nil {
		m.updatesTotal.WithLabelValues(metricKind(d)).Inc()
	}
}

// countRestore counts an object put back on its previous boot image, as d decided.
func (m *Metrics) countRestore(d bootimage.Decision) {
	if m != nil {
		m.restoresTotal.WithLabelValues(metricKind(d)).Inc()
	}
}

// countError counts a decision that became Error.
func (m *Metrics) countError(d bootimage.Decision) {
	if m != nil {
		m.errorsTotal.WithLabelValues(metricKind(d), d.Reason).Inc()
	}
}

// markReconciled records that a reconcile ran to the end, at now.
func (m *Metrics) markReconciled(now time.Time) {
	if m != nil {
		m.lastSuccessfulReconcile.Set(float64(now.UnixNano()) / 1e9)
	}
}

// SetDegraded mirrors BootImageUpdateDegraded.
func (m *Metrics) SetDegraded(degraded bool) {
	if m != nil {
		m.degradedGauge.Set(boolValue(degraded))
	}
}

// SetUpgradeBlocked sets bootimage_upgrade_blocked: true while boot image skew blocks upgrades.
func (m *Metrics) SetUpgradeBlocked(blocked bool) {
	if m != nil {
		m.upgradeBlockedGauge.Set(boolValue(blocked))
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Observe records one cloud request to api that started at start and ended with err.
func (m *Metrics) Observe(api string, start time.Time, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.cloudRequests.WithLabelValues(api, result).Inc()
	m.cloudRequestDuration.WithLabelValues(api).Observe(time.Since(start).Seconds())
}
