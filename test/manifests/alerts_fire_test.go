package manifests_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	promqlparser "github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers"
	"github.com/bootimage-operator/bootimage-operator/manifests"
)

// The tests here run the shipped alerts the way the platform Prometheus does: the operator's own
// metrics (controllers.Metrics counting a controllers.Tracker's decisions) are scraped as text every
// 30 s, as the shipped ServiceMonitor says, into a TSDB, and Prometheus's rule code evaluates every
// shipped alert on them every 30 s, on simulated time.

const (
	// scrapeInterval is the shipped ServiceMonitor's interval.
	scrapeInterval = 30 * time.Second
	// evaluationInterval is the platform Prometheus's rule evaluation interval.
	evaluationInterval = 30 * time.Second
)

// targetLabels are what a scrape of the operator's Service adds to each series.
var targetLabels = map[string]string{
	"namespace": "openshift-machine-config-operator",
	"service":   "bootimage-operator",
	"job":       "bootimage-operator",
	"endpoint":  "metrics",
	"pod":       "bootimage-operator-6d9f7c5b8-x2k4q",
	"instance":  "10.128.0.42:8443",
}

// operator is the operator's metrics, fed the way its controllers feed them.
type operator struct {
	metrics  *controllers.Metrics
	tracker  *controllers.Tracker
	registry *prometheus.Registry
}

func newOperator(t *testing.T) *operator {
	t.Helper()
	o := &operator{metrics: controllers.NewMetrics(), tracker: controllers.NewTracker(), registry: prometheus.NewPedanticRegistry()}
	for _, c := range o.metrics.Collectors() {
		if err := o.registry.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	o.metrics.ExportDecisionsForTest(o.tracker)
	return o
}

// decide makes d the operator's current decision for its object.
func (o *operator) decide(ds ...bootimage.Decision) {
	for _, d := range ds {
		o.tracker.Record(d, "inputs")
	}
}

// restore is what the operator does when a machine fails on the image it wrote: the object
// restored and held, the restore counted.
func (o *operator) restore(d bootimage.Decision) {
	d.Action, d.Reason, d.Verification = bootimage.Skip, bootimage.ReasonBootImageHeld, "Failed"
	o.decide(d)
	o.metrics.CountRestoreForTest(d)
}

// monitoring is the platform Prometheus watching one operator: a TSDB, the PromQL engine and the
// shipped alerting rules, on a clock of its own.
type monitoring struct {
	t       *testing.T
	op      *operator
	storage *teststorage.TestStorage
	engine  *promql.Engine
	alerts  []*rules.AlertingRule
	start   time.Time
	now     time.Time
	// scraped are the series of the last scrape, whose absence in the next one Prometheus marks
	// stale.
	scraped map[string]labels.Labels
}

func newMonitoring(t *testing.T, op *operator) *monitoring {
	t.Helper()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	m := &monitoring{
		t: t, op: op, storage: teststorage.New(t),
		engine: promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute}),
		start:  start, now: start,
	}
	for _, r := range shippedAlerts(t) {
		expr, err := promqlparser.NewParser(promqlparser.Options{}).ParseExpr(r.Expr)
		if err != nil {
			t.Fatalf("alert %s: %v", r.Alert, err)
		}
		m.alerts = append(m.alerts, rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
			labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, slog.New(slog.DiscardHandler)))
	}
	m.step()
	return m
}

// shippedAlerts are the alerting rules of the shipped PrometheusRule, as Prometheus's rule file
// parser reads them.
func shippedAlerts(t *testing.T) []rulefmt.Rule {
	t.Helper()
	var alerts []rulefmt.Rule
	for _, obj := range objectsIn(t, manifests.MetricsFile) {
		rule, ok := obj.(*monitoringv1.PrometheusRule)
		if !ok {
			continue
		}
		data, err := yaml.Marshal(rule.Spec)
		if err != nil {
			t.Fatal(err)
		}
		groups, errs := rulefmt.Parse(data, false, model.LegacyValidation, promqlparser.NewParser(promqlparser.Options{}), slog.Default())
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				if r.Alert != "" {
					alerts = append(alerts, r)
				}
			}
		}
	}
	return alerts
}

// advance moves the clock on by d, scraping and evaluating on the way.
func (m *monitoring) advance(d time.Duration) {
	m.t.Helper()
	for end := m.now.Add(d); m.now.Before(end); {
		m.now = m.now.Add(scrapeInterval)
		m.step()
	}
}

// step scrapes the operator and evaluates every alert at the current time.
func (m *monitoring) step() {
	m.t.Helper()
	m.scrape()
	if m.now.Sub(m.start)%evaluationInterval != 0 {
		return
	}
	query := rules.EngineQueryFunc(m.engine, m.storage)
	for _, a := range m.alerts {
		if _, err := a.Eval(context.Background(), 0, m.now, query, nil, 0); err != nil {
			m.t.Fatalf("alert %s at %s: %v", a.Name(), m.elapsed(), err)
		}
	}
}

// scrape reads the operator's registry as Prometheus does: its text exposition, parsed by
// Prometheus's own scrape parser, each series with the target's labels, and a staleness marker
// for each series gone since the last scrape.
func (m *monitoring) scrape() {
	m.t.Helper()
	families, err := m.op.registry.Gather()
	if err != nil {
		m.t.Fatal(err)
	}
	var text bytes.Buffer
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&text, f); err != nil {
			m.t.Fatal(err)
		}
	}
	parser, err := textparse.New(text.Bytes(), string(expfmt.NewFormat(expfmt.TypeTextPlain)), labels.NewSymbolTable(), textparse.ParserOptions{})
	if parser == nil {
		m.t.Fatal(err)
	}
	ts := m.now.UnixMilli()
	app := m.storage.Appender(context.Background())
	seen := map[string]labels.Labels{}
	for {
		entry, err := parser.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			m.t.Fatalf("parsing the exposition: %v\n%s", err, text.String())
		}
		if entry != textparse.EntrySeries {
			continue
		}
		_, _, v := parser.Series()
		var lset labels.Labels
		parser.Labels(&lset)
		b := labels.NewBuilder(lset)
		for k, val := range targetLabels {
			b.Set(k, val)
		}
		lset = b.Labels()
		seen[lset.String()] = lset
		if _, err := app.Append(0, lset, ts, v); err != nil {
			m.t.Fatal(err)
		}
	}
	for key, lset := range m.scraped {
		if _, ok := seen[key]; !ok {
			if _, err := app.Append(0, lset, ts, math.Float64frombits(value.StaleNaN)); err != nil {
				m.t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		m.t.Fatal(err)
	}
	m.scraped = seen
}

func (m *monitoring) elapsed() time.Duration { return m.now.Sub(m.start) }

// firing returns the alerts firing now, each as alertname{labels} without severity and the
// target labels the alert's aggregation keeps, sorted.
func (m *monitoring) firing() []string {
	var out []string
	for _, a := range m.alerts {
		for _, alert := range a.ActiveAlerts() {
			if alert.State != rules.StateFiring {
				continue
			}
			var kv []string
			alert.Labels.Range(func(l labels.Label) {
				if l.Name != "alertname" && l.Name != "severity" {
					kv = append(kv, l.Name+"="+l.Value)
				}
			})
			out = append(out, a.Name()+"{"+strings.Join(kv, ",")+"}")
		}
	}
	slices.Sort(out)
	return out
}

// expectFiring fails unless exactly want are firing.
func (m *monitoring) expectFiring(want ...string) {
	m.t.Helper()
	slices.Sort(want)
	if got := m.firing(); !slices.Equal(got, want) {
		m.t.Errorf("at %s firing %q, want %q", m.elapsed(), got, want)
	}
}

// Decisions of the objects the tests watch.
var (
	machineSet = bootimage.Decision{Kind: bootimage.KindMachineSet, Namespace: "openshift-machine-api", Name: "worker-us-east-1a",
		Stream: "rhel-9", Action: bootimage.NoChange, Reason: bootimage.ReasonUpToDate, Verification: "Verified"}
	otherMachineSet = named(machineSet, "worker-us-east-1b")
	controlPlane    = bootimage.Decision{Kind: "ControlPlaneMachineSet", Namespace: "openshift-machine-api", Name: "cluster",
		Stream: "rhel-9", Action: bootimage.NoChange, Reason: bootimage.ReasonUpToDate}
	capiMachineSet = bootimage.Decision{Kind: bootimage.KindMachineSet, APIGroup: string(bootimage.ClusterAPIGroup), Namespace: bootimage.ClusterAPINamespace,
		Name: "worker-capi", Stream: "rhel-9", Action: bootimage.NoChange, Reason: bootimage.ReasonUpToDate, Verification: "Verified"}
	notSelected = bootimage.Decision{Kind: bootimage.KindMachineSet, Namespace: "openshift-machine-api", Name: "infra",
		Stream: "rhel-9", Action: bootimage.Skip, Reason: bootimage.ReasonNotSelected}
)

func named(d bootimage.Decision, name string) bootimage.Decision {
	d.Name = name
	return d
}

func with(d bootimage.Decision, action bootimage.Action, reason, verification string) bootimage.Decision {
	d.Action, d.Reason, d.Verification = action, reason, verification
	return d
}

// on is the label set the shipped alerts keep, for kind.
func on(kind string) string {
	return "{kind=" + kind + ",namespace=" + targetLabels["namespace"] + "}"
}

// healthy is a cluster whose selected objects are all on their target and verified.
func healthy(t *testing.T) (*operator, *monitoring) {
	t.Helper()
	op := newOperator(t)
	op.decide(machineSet, otherMachineSet, controlPlane, capiMachineSet, notSelected)
	return op, newMonitoring(t, op)
}

// TestAlertsQuietOnAHealthyOperator checks that no shipped alert fires in a day and more of an
// operator whose objects are up to date, verified or not selected.
func TestAlertsQuietOnAHealthyOperator(t *testing.T) {
	_, mon := healthy(t)
	for range 26 {
		mon.advance(time.Hour)
		mon.expectFiring()
	}
}

// TestBootImageRestoredFires checks that a restore fires BootImageRestored at once, for the kind
// restored, for an hour; a Cluster API kind too, whose counter is born by its first restore.
func TestBootImageRestoredFires(t *testing.T) {
	op, mon := healthy(t)
	mon.advance(2 * time.Hour)
	mon.expectFiring()

	op.restore(machineSet)
	mon.advance(time.Minute)
	mon.expectFiring("BootImageRestored" + on("MachineSet"))

	op.restore(capiMachineSet)
	mon.advance(time.Minute)
	mon.expectFiring("BootImageRestored"+on("MachineSet"), "BootImageRestored"+on("MachineSet.cluster.x-k8s.io"))

	// An hour after each restore the alert resolves; the holds, still there, are
	// BootImageUpdateFailing's from then on.
	mon.advance(57 * time.Minute)
	mon.expectFiring("BootImageRestored"+on("MachineSet"), "BootImageRestored"+on("MachineSet.cluster.x-k8s.io"))
	mon.advance(4 * time.Minute)
	mon.expectFiring("BootImageUpdateFailing"+on("MachineSet"), "BootImageUpdateFailing"+on("MachineSet.cluster.x-k8s.io"))
}

// TestBootImageRestoredIsNotAPrometheusRestart checks that a Prometheus that starts afresh (no
// persistent storage, a new pod) over an operator that restored objects before does not take those
// restores for new ones.
func TestBootImageRestoredIsNotAPrometheusRestart(t *testing.T) {
	op := newOperator(t)
	op.restore(machineSet)
	op.restore(capiMachineSet)
	op.decide(machineSet, otherMachineSet, controlPlane, capiMachineSet, notSelected)
	mon := newMonitoring(t, op)
	for _, d := range []time.Duration{time.Minute, 30 * time.Minute, 30 * time.Minute, time.Hour} {
		mon.advance(d)
		mon.expectFiring()
	}

	op.restore(capiMachineSet)
	mon.advance(time.Minute)
	mon.expectFiring("BootImageRestored" + on("MachineSet.cluster.x-k8s.io"))
}

// TestBootImageUpdateFailingFires checks that an object held or failing fires
// BootImageUpdateFailing after an hour, by kind, and that the errors other alerts own do not.
func TestBootImageUpdateFailingFires(t *testing.T) {
	op, mon := healthy(t)
	mon.advance(time.Hour)

	// The hot loop has its alert, the stream's errors are the cluster's (BootImageUpdateDegraded).
	op.decide(with(controlPlane, bootimage.Error, bootimage.ReasonHotLoopDetected, ""),
		with(otherMachineSet, bootimage.Error, bootimage.ReasonStreamMissing, ""))
	mon.advance(2 * time.Hour)
	mon.expectFiring("BootImageUpdateHotLoop" + on("ControlPlaneMachineSet"))

	op.decide(otherMachineSet,
		with(machineSet, bootimage.Skip, bootimage.ReasonBootImageHeld, "Failed"),
		with(controlPlane, bootimage.Error, bootimage.ReasonInvalidArchitecture, ""))
	mon.advance(59 * time.Minute)
	mon.expectFiring()
	mon.advance(2 * time.Minute)
	mon.expectFiring("BootImageUpdateFailing"+on("ControlPlaneMachineSet"), "BootImageUpdateFailing"+on("MachineSet"))

	// The hold cleared and the target verified: the alert resolves on the next evaluation.
	op.decide(machineSet, controlPlane)
	mon.advance(time.Minute)
	mon.expectFiring()
}

// TestBootImageOutdatedFires checks that a selected object off its target fires BootImageOutdated
// after a day, not before, and resolves once the object is updated.
func TestBootImageOutdatedFires(t *testing.T) {
	op, mon := healthy(t)
	mon.advance(time.Hour)

	op.decide(with(otherMachineSet, bootimage.Skip, bootimage.ReasonWaitingForCanary, ""))
	mon.advance(23*time.Hour + 59*time.Minute)
	mon.expectFiring()
	mon.advance(2 * time.Minute)
	mon.expectFiring("BootImageOutdated" + on("MachineSet"))

	op.decide(otherMachineSet)
	mon.advance(time.Minute)
	mon.expectFiring()
}
